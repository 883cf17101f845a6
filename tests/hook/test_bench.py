"""The bench's pieces that need no load: its arithmetic, its comparison of answers, the
baseline's worktree and one tiny round of the core, each well under a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import bench_scripts
from tests.unavailable import unavailable

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "sync" / "basemodel-job-running-v1-keys.request.json"
# --baseline reads the repository's history; a copy of the files without it has none to read.
@pytest.fixture
def git_checkout() -> None:
    if not (REPO / ".git").exists():
        unavailable("needs a git checkout of the repository")


needs_git = pytest.mark.usefixtures("git_checkout")


bench = bench_scripts.load("bench", "bench_script")


def worktrees() -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True, check=True).stdout


def test_ratios_pair_the_rounds_in_order_and_come_sorted() -> None:
    assert bench.neighbour_ratios([100.0, 90.0, 120.0], [100.0, 100.0, 80.0]) == [0.9, 1.0, 1.5]
    assert bench.ratio_cell([0.9, 1.0, 1.5]) == "**1.00×** (0.90–1.50)"


def test_ratios_of_rounds_that_do_not_pair_up_are_refused() -> None:
    with pytest.raises(ValueError):
        bench.neighbour_ratios([1.0, 2.0], [1.0])


def test_differences_name_the_paths_that_changed() -> None:
    answer = {"status": {"state": "Ready", "conditions": [{"reason": "A"}, {"reason": "B"}]}, "children": [1, 2]}
    assert bench.differences(answer, json.loads(json.dumps(answer))) == []
    changed = {"status": {"state": "Ready", "conditions": [{"reason": "A"}, {"reason": "C"}], "extra": 1},
               "children": [1]}
    assert bench.differences(changed, answer) == ["children", "status.conditions[1].reason", "status.extra"]


@needs_git
def test_an_unknown_baseline_revision_stops_the_bench_with_one_clear_line() -> None:
    before = worktrees()
    with pytest.raises(SystemExit, match="--baseline no-such-revision: not a revision of the repository"):
        bench.main(["--baseline", "no-such-revision", "--rounds", "1"])
    assert worktrees() == before


@needs_git
def test_the_baseline_worktree_goes_even_when_the_bench_fails() -> None:
    with pytest.raises(RuntimeError), bench.checked_out("HEAD") as tree:
        assert (tree / "hooks" / "sync.py").is_file()
        assert str(tree) in worktrees()
        raise RuntimeError("the bench failed")
    assert not tree.parent.exists()
    assert str(tree) not in worktrees()


def test_a_core_round_names_its_hooks_and_reports_a_request_it_cannot_decide(tmp_path: Path) -> None:
    unreadable = tmp_path / "not-json.json"
    unreadable.write_bytes(b"not json")
    measured = subprocess.run(
        [sys.executable, str(REPO / "bench" / "core_round.py"), "50000", "10", str(FIXTURE), str(unreadable)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True, text=True, timeout=30, check=True,
    )
    answer = json.loads(measured.stdout)
    bench.check_imported_from(REPO, answer["hooks"])
    decided, refused = answer["shapes"]
    assert 0 < decided["p50"] <= decided["p99"]
    assert refused["error"].startswith("JSONDecodeError")
