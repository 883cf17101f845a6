"""A model's whole life under the simulated Metacontroller, with what each story costs.

Counts are exact: hook calls (sync, finalize, customize), children created and deleted
by Metacontroller, and status writes, with the shipped CompositeControllers. The last
figure is what the same story costs in sync and finalize calls without
``ignoreStatusChanges``; the outcome (every status transition, the final status, the
Jobs and when they were created) is the same either way.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import lifecycle
from tests.lifecycle import KINDS, SCENARIOS, Outcome, hook_calls, row

# sync, finalize, customize, create, delete, status write | sync + finalize without ignoreStatusChanges
EXPECTED = {
    "happy path to Ready": ((7, 0, 2, 5, 0, 4), 7),
    "100 resyncs, steady state": ((100, 0, 5, 0, 0, 0), 100),
    "TTL removes the finished Job": ((4, 0, 2, 0, 3, 0), 4),
    "Job fails twice, then succeeds": ((33, 0, 2, 7, 0, 10), 33),
    "Job deadline exceeded": ((12, 0, 1, 6, 0, 6), 12),
    "PVC late, bound later, deleted": ((10, 0, 2, 5, 0, 7), 13),
    "agent fills the spec, a day passes": ((50, 0, 48, 0, 3, 0), 50),
    "URI changed mid-Job": ((11, 0, 3, 6, 1, 6), 11),
    "PVC -> hf://": ((0, 2, 1, 0, 5, 1), 2),
    "hf:// -> PVC": ((7, 0, 2, 5, 0, 4), 7),
    "deletion, PVC flow": ((0, 2, 1, 0, 5, 1), 2),
    "hook restart mid-Job": ((7, 0, 2, 5, 0, 4), 7),
}
CASES = [(name, kind) for name in SCENARIOS for kind in KINDS]


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, str, bool], Outcome]:
    return {(name, kind, ignoring): lifecycle.run_scenario(name, kind, ignoring) for name, kind in CASES for ignoring in (True, False)}


def test_every_scenario_has_its_expected_counts() -> None:
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_scenario_costs_exactly_the_expected_calls_and_writes(name: str, kind: str, outcomes: Any) -> None:
    counts, without = EXPECTED[name]
    assert row(outcomes[(name, kind, True)]) == counts
    assert hook_calls(outcomes[(name, kind, False)]) == without


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_ignoring_status_changes_loses_no_transition(name: str, kind: str, outcomes: Any) -> None:
    shipped, without = outcomes[(name, kind, True)].world, outcomes[(name, kind, False)].world
    assert [item[1:] for item in shipped.transitions] == [item[1:] for item in without.transitions]
    assert shipped.jobs_created == without.jobs_created
    assert (shipped.model() or {}).get("status") == (without.model() or {}).get("status")


def reasons(outcome: Outcome) -> list[str]:
    """The Ready reasons the status went through, a repeat (only the message moved) folded."""
    seen: list[str] = []
    for _, _, reason in outcome.world.transitions:
        if not seen or seen[-1] != reason:
            seen.append(reason)
    return seen


def job_kinds(kind: str) -> list[str]:
    return ["ConfigMap", "Job", "Role", "RoleBinding", "ServiceAccount"] if kind == "BaseModel" else \
        ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job", "ServiceAccount"]


@pytest.mark.parametrize("kind", KINDS)
def test_happy_path_reaches_ready_with_one_job_and_the_agents_spec_write(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("happy path to Ready", kind, True)]
    assert reasons(outcome) == ["JobPending", "JobRunning", "Ready"]
    assert outcome.world.state() == ("Ready", "Ready")
    assert sorted(key.removeprefix("create ") for key, value in outcome.counts.items()
                  if key.startswith("create ") and value) == sorted(job_kinds(kind))
    assert outcome.world.agent.writes == 1 and outcome.world.model()["metadata"]["generation"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_removal_of_the_finished_job_changes_nothing_the_model_says(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("TTL removes the finished Job", kind, True)]
    assert outcome.world.jobs() == [] and outcome.world.transitions[-1][0] < 600
    assert outcome.world.state() == ("Ready", "Ready")


@pytest.mark.parametrize("kind", KINDS)
def test_failed_jobs_are_retried_exactly_at_the_configured_delays(kind: str, outcomes: Any) -> None:
    world = outcomes[("Job fails twice, then succeeds", kind, True)].world
    failures = [seconds for seconds, state, _ in world.transitions if state == "Failed"]
    assert failures == [90.005, 190.0]
    # failedAt is the FailureTarget time to the second; the delays are 10 s, then 20 s.
    assert world.jobs_created == [0.005, 90 + 10, 190 + 20]
    assert world.state() == ("Ready", "Ready")
    assert world.model()["status"]["metadataExtraction"]["attempts"] == 3


@pytest.mark.parametrize("kind", KINDS)
def test_deadline_exceeded_is_reported_and_retried(kind: str, outcomes: Any) -> None:
    world = outcomes[("Job deadline exceeded", kind, True)].world
    assert (300.005, "Failed", "JobDeadlineExceeded") in world.transitions
    assert world.jobs_created == [0.005, 310.0]


@pytest.mark.parametrize("kind", KINDS)
def test_pvc_transitions_are_each_reported_and_no_job_runs_before_it_is_bound(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("PVC late, bound later, deleted", kind, True)]
    assert reasons(outcome) == ["PVCNotFound", "PVCNotBound", "JobPending", "JobRunning", "Ready", "PVCNotFound"]
    assert outcome.world.jobs_created == [60.0]
    assert outcome.world.state() == ("Failed", "PVCNotFound")


@pytest.mark.parametrize("kind", KINDS)
def test_the_agents_spec_write_never_brings_a_new_job(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("agent fills the spec, a day passes", kind, True)]
    assert outcome.counts.get("create Job", 0) == 0 and outcome.world.jobs_created == [0.005]
    assert outcome.world.state() == ("Ready", "Ready")


@pytest.mark.parametrize("kind", KINDS)
def test_a_uri_change_mid_job_replaces_the_job(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("URI changed mid-Job", kind, True)]
    assert outcome.counts["delete Job"] == 1 and outcome.world.jobs_created == [0.005, 30.0]
    status = outcome.world.model()["status"]
    assert status["metadataExtraction"]["storageUri"].endswith("/llama-3.1-8b-instruct")
    assert outcome.world.state() == ("Ready", "Ready")


@pytest.mark.parametrize("kind", KINDS)
def test_switching_to_hf_drops_every_child_and_hands_the_status_back(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("PVC -> hf://", kind, True)]
    assert outcome.world.model()["status"] == {"state": "In_Transit", "observedGeneration": 3}
    assert outcome.world.jobs() == [] and outcome.world.sim.cluster.list("v1", "ServiceAccount") == []


@pytest.mark.parametrize("kind", KINDS)
def test_switching_to_pvc_extracts_once(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("hf:// -> PVC", kind, True)]
    assert reasons(outcome) == ["JobPending", "JobRunning", "Ready"]
    assert outcome.world.jobs_created == [40.005] and "nodesReady" not in outcome.world.model()["status"]


@pytest.mark.parametrize("kind", KINDS)
def test_deletion_ends_with_the_model_and_its_children_gone(kind: str, outcomes: Any) -> None:
    world = outcomes[("deletion, PVC flow", kind, True)].world
    assert world.model() is None and world.jobs() == []
    assert world.sim.cluster.list("v1", "ServiceAccount") == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_hook_restart_mid_job_costs_and_says_the_same(kind: str, outcomes: Any) -> None:
    restarted, calm = outcomes[("hook restart mid-Job", kind, True)], outcomes[("happy path to Ready", kind, True)]
    assert restarted.counts == calm.counts
    assert restarted.world.model()["status"] == calm.world.model()["status"]


def test_the_table_prints_a_row_per_scenario_and_kind(outcomes: Any) -> None:
    lines = lifecycle.table(lambda name, kind, ignoring: outcomes[(name, kind, ignoring)])
    assert len(lines) == 2 + len(CASES) and lines[2].startswith("| happy path to Ready | BaseModel | 7 |")


@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_pvc_fails_the_model_and_brings_no_job(kind: str) -> None:
    built = lifecycle.ready_world(kind)
    before = dict(built.sim.counts)
    built.binder.lose(lifecycle.NAMESPACE, lifecycle.PVC)
    built.sim.advance(60)
    assert built.state() == ("Failed", "PVCNotBound")
    assert "Lost" in built.model()["status"]["conditions"][0]["message"]
    assert built.sim.counts["create"] == before["create"] and built.sim.counts["status write"] == before["status write"] + 1


def test_the_readme_quotes_the_counts_the_scenarios_cost() -> None:
    text = (lifecycle.REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## What it costs the cluster", 1)[1].split("\n## ", 1)[0]
    quoted = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in EXPECTED:
            quoted[cells[0]] = (tuple(int(cell) for cell in cells[1:7]), int(cells[7]))
    assert quoted == EXPECTED
