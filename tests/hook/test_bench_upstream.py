"""The comparison page's writing (bench/upstream.py), from outcomes made here: no cluster."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

from tests import bench_scripts
from tests.cluster.comparison import HOOK, KINDS, SIDES, STORIES, UPSTREAM, Outcome


page_writer = bench_scripts.load("upstream", "bench_upstream")
cell, render, verdict, writes = page_writer.cell, page_writer.render, page_writer.verdict, page_writer.writes

WHEN = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
HAPPY = STORIES[0][1]


def outcome(side: str, **fields: object) -> Outcome:
    return Outcome(HAPPY, "BaseModel", side, **fields)  # type: ignore[arg-type]


def test_a_verdict_says_where_the_model_ended_how_fast_and_with_how_many_jobs() -> None:
    assert verdict(outcome(HOOK.title, state="Ready", reason="Ready", seconds_to_ready=8.6, jobs=["a"])) == \
        "Ready `Ready`, Ready after 9 s, 1 Job"
    assert verdict(outcome(UPSTREAM.title, state="In_Transit", reason="PVCMetadataExtracting", jobs=["a", "b"])) == \
        "In_Transit `PVCMetadataExtracting`, 2 Jobs"
    assert verdict(outcome(HOOK.title)) == "no status, 0 Jobs"


def test_writes_come_busiest_actor_first_with_refusals_in_brackets() -> None:
    counted = outcome(UPSTREAM.title, writes={"Metacontroller": Counter(writes=3),
                                              "OME's manager": Counter(writes=9, refused=4)})
    assert writes(counted) == "OME's manager 9 (4 refused), Metacontroller 3"


def test_a_cell_keeps_the_table_whole() -> None:
    assert cell("a | b\nc") == "a \\| b<br>c"


def test_the_page_has_a_row_per_story_told_and_side_and_a_table_per_story() -> None:
    page = render([outcome(HOOK.title, state="Ready", reason="Ready", seconds_to_ready=9.0, jobs=["j"]),
                   outcome(UPSTREAM.title, state="Ready", reason="PVCMetadataReady", seconds_to_ready=12.0, jobs=["k"],
                           left=["ServiceAccount ome-model-metadata"])], WHEN, 2)
    assert "2026-11-30, 2 cores" in page
    assert f"| {HAPPY} | BaseModel | Ready `Ready`, Ready after 9 s, 1 Job | Ready `PVCMetadataReady`, Ready after 12 s, 1 Job |" in page
    assert page.count(f"## {HAPPY}") == 1
    assert all(f"## {title}" not in page for _, title, _ in STORIES[1:])
    assert "ServiceAccount ome-model-metadata" in page


def test_a_page_of_some_stories_names_every_story_and_kind_it_did_not_tell() -> None:
    page = render([outcome(HOOK.title), outcome(UPSTREAM.title)], WHEN, 2)
    assert f"{HAPPY} (BaseModel)" not in page
    assert f"{HAPPY} (ClusterBaseModel)" in page and f"{STORIES[1][1]} (BaseModel)" in page
    whole = [Outcome(title, kind, side.title) for _, title, _ in STORIES for kind in KINDS for side in SIDES]
    assert "Not told" not in render(whole, WHEN, 2)
