"""Models' whole lives in a simulated cluster where OME runs beside the hook.

Two kinds of check. What the scenarios promise holds exactly: which model is whose, which
Jobs run and when, what the status says and who wrote it. What they cost (hook calls,
child writes, status writes, OME's refused writes) is what ``docs/operations.md`` says,
exactly (``python -m tests.lifecycle`` prints the table), so a cheaper product updates the
page; and it stays within ``BUDGETS``, so a dearer one is a decision to raise a budget, not
a table pasted again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import packages_distributions, requires
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import lifecycle
from tests.docs import REPO
from tests.lifecycle import COLUMNS, HF_MODEL, KINDS, PVC_MODEL, SCENARIOS, Outcome, World
from tests.metacontroller.ome import FINALIZERS

# At most, for each kind: sync, finalize, customize, label, create, delete, update, status
# write, label write, OME status write, OME refused (lifecycle.COLUMNS).
BUDGETS: dict[str, tuple[int, ...]] = {
    "happy path to Ready": (6, 0, 2, 9, 5, 3, 0, 3, 3, 0, 18),
    "a day after Ready": (7, 0, 3, 10, 5, 3, 0, 3, 3, 0, 107),
    "100 resyncs, steady state": (100, 0, 5, 100, 0, 0, 0, 0, 0, 0, 6),
    "TTL removes the finished Job": (1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 4),
    "Job fails twice, then succeeds": (32, 0, 2, 39, 13, 9, 2, 9, 9, 0, 42),
    "Job deadline exceeded": (11, 0, 1, 15, 9, 3, 0, 5, 5, 0, 12),
    "PVC late, bound later, deleted": (9, 0, 2, 18, 5, 3, 0, 6, 6, 0, 32),
    "URI changed mid-Job": (9, 0, 3, 14, 6, 4, 0, 5, 5, 0, 18),
    "hf:// model made Ready by OME": (0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0),
    "hf:// -> pvc://": (6, 0, 2, 10, 5, 3, 0, 3, 3, 2, 17),
    "pvc:// -> hf:// mid-Job": (4, 2, 2, 9, 4, 4, 0, 3, 3, 0, 1),
    "pvc:// -> hf://, then the nodes report it": (0, 2, 1, 3, 0, 2, 0, 1, 1, 1, 0),
    "deletion of a pvc:// model": (0, 2, 1, 2, 0, 2, 0, 1, 0, 0, 0),
    "deletion of an hf:// model": (0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0),
    "install over existing models": (6, 0, 3, 10, 5, 3, 0, 3, 3, 0, 17),
    "OME's CRDs after a failed extraction, a day": (70, 0, 2, 81, 21, 15, 4, 59, 15, 0, 156),
    "Metacontroller restart mid-Job": (8, 0, 3, 12, 5, 3, 0, 3, 3, 0, 18),
    "hook restart mid-Job": (6, 0, 2, 9, 5, 3, 0, 3, 3, 0, 18),
}
CASES = [(name, kind) for name in SCENARIOS for kind in KINDS]


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, str], Outcome]:
    return {(name, kind): SCENARIOS[name](kind, None) for name, kind in CASES}


def test_every_scenario_has_a_budget() -> None:
    assert set(BUDGETS) == set(SCENARIOS) and all(len(budget) == len(COLUMNS) for budget in BUDGETS.values())


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_scenario_costs_no_more_than_its_budget(name: str, kind: str, outcomes: Any) -> None:
    counts = outcomes[(name, kind)].counts
    over = {column: (counts[column], budget) for column, budget in zip(COLUMNS, BUDGETS[name], strict=True)
            if counts[column] > budget}
    assert not over, f"over budget (spent, budget): {over}"


def test_operations_doc_quotes_what_each_scenario_costs(outcomes: Any) -> None:
    page = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "\n".join(lifecycle.table(outcomes)) in page, "docs/operations.md: the costs differ from `python -m tests.lifecycle`"


def test_every_page_that_counts_omes_refused_writes_a_day_counts_what_the_simulated_day_refused(outcomes: Any) -> None:
    """The README, docs/install.md and docs/operations.md each say how many of OME's writes
    the fence refuses a day per Ready model, and all say what the day scenario measured."""
    refused = {outcomes[("a day after Ready", kind)].counts["OME refused"] for kind in KINDS}
    for page in ("README.md", "docs/install.md", "docs/operations.md"):
        prose = " ".join((REPO / page).read_text(encoding="utf-8").split())
        quoted = {int(number) for number in re.findall(r"about (\d+) refused writes a day", prose)}
        assert quoted == refused, f"{page} counts {quoted or 'no'} refused writes a day; the simulated day refused {refused}"


def modules_of_the_test_extra() -> set[str]:
    """The top-level modules the test extra's own requirements install."""
    extra = {canonicalize_name(Requirement(line).name) for line in requires("ome-basemodel-hook") or []
             if Requirement(line).marker is not None and Requirement(line).marker.evaluate({"extra": "test"})}
    return {module for module, names in packages_distributions().items() if extra & {canonicalize_name(name) for name in names}}


def test_the_command_offered_before_the_test_extra_is_installed_says_what_to_install() -> None:
    """The README offers ``python -m tests.lifecycle`` right after its first command, which
    installs the hook alone: every module of the test extra hidden, it says so in one line."""
    hidden = sorted(modules_of_the_test_extra())
    assert {"yaml", "cel", "kubernetes_validate", "jsonschema", "pytest"} <= set(hidden)
    script = f"import runpy, sys; sys.modules.update(dict.fromkeys({hidden!r})); runpy.run_module('tests.lifecycle', run_name='__main__')"
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == ("python -m tests.lifecycle needs the test tools (yaml is missing): "
                             ".venv/bin/pip install -q -e '.[test]', the README's second command, installs them\n")


def reasons(world: World, name: str = PVC_MODEL) -> list[str]:
    """The Ready reasons a model's status went through, a repeat (only the message moved) folded."""
    seen: list[str] = []
    for _, _, reason, _ in world.transitions.get(name, []):
        if not seen or seen[-1] != reason:
            seen.append(reason)
    return seen


def status(world: World, name: str = PVC_MODEL) -> dict[str, Any]:
    model = world.model(name)
    assert model is not None
    return model.get("status", {})


def hooks_children(kind: str) -> list[str]:
    """What a model that became Ready owns: its finished Job, kept for its log until its TTL,
    and its record; the grant went when the Job finished."""
    return ["ExtractionRecord", "Job"]


@pytest.mark.parametrize("kind", KINDS)
def test_happy_path_reaches_ready_with_one_job_and_the_agents_spec_write(kind: str, outcomes: Any) -> None:
    world = outcomes[("happy path to Ready", kind)].world
    assert reasons(world) == ["JobPending", "JobRunning", "Ready"]
    assert world.state() == ("Ready", "Ready") and world.jobs_created == [0.0]
    assert world.owned() == hooks_children(kind)
    assert world.agent.writes == 1 and world.model()["spec"]["modelArchitecture"] == "LlamaForCausalLM"


@pytest.mark.parametrize("kind", KINDS)
def test_beside_ome_a_ready_model_stays_ready_a_whole_day_and_ome_writes_nothing(kind: str, outcomes: Any) -> None:
    """OME computes In_Transit for a model no node reports and tries to write it; the fence
    refuses every such write, so the status never flaps."""
    outcome = outcomes[("a day after Ready", kind)]
    first_ready = next(seconds for seconds, state, _, _ in outcome.world.transitions[PVC_MODEL] if state == "Ready")
    assert [item for item in outcome.world.transitions[PVC_MODEL] if item[0] > first_ready] == []
    assert outcome.counts["OME status write"] == 0 and outcome.counts["OME refused"] > 0
    assert outcome.world.state() == ("Ready", "Ready") and outcome.world.jobs_created == [0.0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_steady_state_writes_nothing(kind: str, outcomes: Any) -> None:
    counts = outcomes[("100 resyncs, steady state", kind)].counts
    assert counts["sync"] == 100
    assert all(counts[column] == 0 for column in ("create", "delete", "update", "status write", "label write"))


@pytest.mark.parametrize("kind", KINDS)
def test_ttl_removal_of_the_finished_job_changes_nothing_the_model_says(kind: str, outcomes: Any) -> None:
    world = outcomes[("TTL removes the finished Job", kind)].world
    assert world.jobs() == [] and world.owned() == ["ExtractionRecord"], "the record stays"
    assert world.state() == ("Ready", "Ready")


@pytest.mark.parametrize("kind", KINDS)
def test_failed_jobs_are_retried_exactly_at_the_configured_delays(kind: str, outcomes: Any) -> None:
    world = outcomes[("Job fails twice, then succeeds", kind)].world
    failures = [seconds for seconds, state, _, _ in world.transitions[PVC_MODEL] if state == "Failed"]
    assert failures == [90.0, 190.0]
    # failedAt is the FailureTarget time to the second; the delays are 10 s, then 20 s.
    assert world.jobs_created == [0.0, 90 + 10, 190 + 20]
    assert world.state() == ("Ready", "Ready") and status(world)["metadataExtraction"]["attempts"] == 3


@pytest.mark.parametrize("kind", KINDS)
def test_deadline_exceeded_is_reported_and_retried(kind: str, outcomes: Any) -> None:
    world = outcomes[("Job deadline exceeded", kind)].world
    assert (300.0, "Failed", "JobDeadlineExceeded", True) in world.transitions[PVC_MODEL]
    assert world.jobs_created == [0.0, 310.0]


@pytest.mark.parametrize("kind", KINDS)
def test_pvc_transitions_are_each_reported_and_no_job_runs_before_it_is_bound(kind: str, outcomes: Any) -> None:
    world = outcomes[("PVC late, bound later, deleted", kind)].world
    assert reasons(world) == ["PVCNotFound", "PVCPending", "JobPending", "JobRunning", "Ready", "PVCNotFound"]
    assert world.jobs_created == [60.0] and world.state() == ("Failed", "PVCNotFound")


@pytest.mark.parametrize("kind", KINDS)
def test_a_uri_change_mid_job_replaces_the_job(kind: str, outcomes: Any) -> None:
    world = outcomes[("URI changed mid-Job", kind)].world
    assert world.jobs_created == [0.0, 30.0] and len(world.jobs()) == 1
    assert status(world)["metadataExtraction"]["storageUri"].endswith("/llama-3.1-8b-instruct")
    assert world.state() == ("Ready", "Ready")


@pytest.mark.parametrize("kind", KINDS)
def test_an_hf_model_is_omes_alone_the_hook_is_never_called_and_metacontroller_never_writes(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("hf:// model made Ready by OME", kind)]
    assert [outcome.counts[column] for column in ("sync", "finalize", "customize", "status write", "label write")] == [0] * 5
    assert status(outcome.world, HF_MODEL) == {"state": "Ready", "nodesReady": list(lifecycle.NODES)}
    assert "labels" not in outcome.world.model(HF_MODEL)["metadata"]


@pytest.mark.parametrize("kind", KINDS)
def test_from_hf_to_pvc_the_model_is_the_hooks_from_its_next_sync_and_omes_state_never_shows_again(
    kind: str, outcomes: Any
) -> None:
    world = outcomes[("hf:// -> pvc://", kind)].world
    transitions = world.transitions[PVC_MODEL]
    taken = next(index for index, (_, _, _, ours) in enumerate(transitions) if ours)
    assert transitions[taken - 1][1:3] == ("Ready", ""), "OME had made it Ready on the nodes"
    assert all(ours for _, _, _, ours in transitions[taken:]), "a status without the hook's conditions came back"
    assert world.jobs_created == [40.0] and world.state() == ("Ready", "Ready")
    assert "nodesReady" not in status(world)


@pytest.mark.parametrize("kind", KINDS)
def test_from_pvc_to_hf_mid_job_the_job_stops_the_hooks_objects_and_finalizer_go_and_nothing_false_stays(
    kind: str, outcomes: Any
) -> None:
    """v0.1.5's agents start no download after the change, so OME's view stays In_Transit
    for the hour: the status the hook handed back says exactly that, and nothing of its own."""
    world = outcomes[("pvc:// -> hf:// mid-Job", kind)].world
    assert world.owned() == [] and world.jobs_created == [0.0]
    model = world.model()
    assert status(world) == {"state": "In_Transit", "observedGeneration": model["metadata"]["generation"]}
    assert model["metadata"]["finalizers"] == [FINALIZERS[kind]]
    assert model["metadata"].get("labels", {}) == {}
    assert world.transitions[PVC_MODEL][-1][0] == 30.0, "the handed-back status stood still for the hour"


@pytest.mark.parametrize("kind", KINDS)
def test_from_pvc_to_hf_omes_status_takes_over_once_the_nodes_report(kind: str, outcomes: Any) -> None:
    world = outcomes[("pvc:// -> hf://, then the nodes report it", kind)].world
    assert status(world) == {"state": "Ready", "nodesReady": list(lifecycle.NODES)}
    assert world.owned() == []


@pytest.mark.parametrize("kind", KINDS)
def test_deleting_a_pvc_model_completes_with_omes_finalizer_present(kind: str, outcomes: Any) -> None:
    world = outcomes[("deletion of a pvc:// model", kind)].world
    assert world.model() is None and world.owned() == []


@pytest.mark.parametrize("kind", KINDS)
def test_deleting_an_hf_model_is_omes_alone(kind: str, outcomes: Any) -> None:
    outcome = outcomes[("deletion of an hf:// model", kind)]
    assert outcome.world.model(HF_MODEL) is None
    assert [outcome.counts[column] for column in ("sync", "finalize", "customize", "status write")] == [0] * 4


@pytest.mark.parametrize("kind", KINDS)
def test_installed_over_existing_models_the_hook_takes_the_pvc_model_and_leaves_the_other_alone(
    kind: str, outcomes: Any
) -> None:
    world = outcomes[("install over existing models", kind)].world
    assert world.transitions[HF_MODEL] == [(0.0, "Ready", "", False)]
    assert world.model(HF_MODEL)["metadata"]["finalizers"] == [FINALIZERS[kind]]
    assert "labels" not in world.model(HF_MODEL)["metadata"]
    assert world.transitions[PVC_MODEL][0][1:] == ("In_Transit", "", False), "OME's status before the install"
    assert world.state() == ("Ready", "Ready") and world.jobs_created == [3600.0]


@pytest.mark.parametrize("kind", KINDS)
def test_with_omes_crds_failures_stay_counted_no_job_loops_and_the_state_stays_true(kind: str, outcomes: Any) -> None:
    """OME's CRD prunes the hook's status fields; the record keeps the attempts."""
    world = outcomes[("OME's CRDs after a failed extraction, a day", kind)].world
    assert len(world.jobs_created) == lifecycle.SETTINGS.retry.max_attempts
    assert status(world) == {"state": "Failed"}
    assert world.owned() == ["ExtractionRecord"]


@pytest.mark.parametrize("kind", KINDS)
def test_restarts_of_metacontroller_or_the_hook_run_no_job_twice(kind: str, outcomes: Any) -> None:
    calm = outcomes[("happy path to Ready", kind)].world
    for name in ("Metacontroller restart mid-Job", "hook restart mid-Job"):
        world = outcomes[(name, kind)].world
        assert world.jobs_created == calm.jobs_created and status(world) == status(calm), name


@pytest.mark.parametrize(("argv", "logged"), [([], False), (["--log"], True)])
def test_the_printed_costs_are_the_table_alone_unless_the_log_is_asked_for(
    argv: list[str], logged: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario that runs the hook through its HTTP shell, whose every call writes a log line."""
    monkeypatch.setattr(lifecycle, "SCENARIOS", {"hook restart mid-Job": lifecycle.hook_restart_mid_job})
    assert lifecycle.main(argv) == 0
    printed = capsys.readouterr()
    header, rule, row = printed.out.splitlines()
    assert header.startswith("| scenario | kind |") and rule.startswith("|---|") and row.startswith("| hook restart mid-Job |")
    assert bool(printed.err) is logged and all(line.startswith('{"time":') for line in printed.err.splitlines())

