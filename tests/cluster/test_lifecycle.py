"""Models' lives against the real API server, controller manager, OME manager and agent, both kinds.

Each story has a namespace of its own and ends with its costs recorded beside the
simulator's (``twins``); the session prints them as one table.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from hooks.pvc.annotations import STATE as WHY_STATE
from tests.cluster import audit, ome_manager, race, twins
from tests.cluster.model_files import BROKEN_CONFIG, PARAMETER_SIZE, write_model
from tests.cluster.story import HF_URI, KINDS, LABEL, SUB_PATH, Story
from tests.cluster.tier import Tier, why
from tests.metacontroller import identities

pytestmark = pytest.mark.cluster

READY_SECONDS = 120.0
STEP_SECONDS = 60.0
COMPOSITE_FINALIZERS = {"BaseModel": "metacontroller.io/compositecontroller-ome-basemodels",
                        "ClusterBaseModel": "metacontroller.io/compositecontroller-ome-clusterbasemodels"}


def hooks_children(kind: str) -> list[str]:
    """What a model that became Ready owns: its finished Job and its pod, kept for the log until
    the Job's TTL, and its record; the grant went when the Job finished."""
    return ["ExtractionRecord", "Job", "Pod"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_goes_to_ready_with_the_metadata_the_real_agent_wrote(tier: Tier, kind: str) -> None:
    happy_path(tier, kind, "happy path to Ready")


def settled(story: Story) -> None:
    """A model is Ready once the agent wrote its spec; its Job ends a moment later, and with
    it the grant, and the record is written."""
    story.tier.wait(lambda: story.children() == hooks_children(story.kind), STEP_SECONDS,
                    f"{story.kind} {story.name}'s children once its Job ended")


def ready_story(tier: Tier, kind: str, name: str) -> tuple[Story, dict[str, Any]]:
    """A story whose model, on a Bound PVC with a good model, went to Ready."""
    story = Story(tier, kind, name)
    story.storage()
    story.create()
    return story, story.wait_for(("Ready", "Ready"), READY_SECONDS)


def happy_path(tier: Tier, kind: str, title: str, ome_crds: bool = True) -> None:
    """A model on a Bound PVC: Ready, with the real agent's metadata, one Job, the hook's children."""
    story, model = ready_story(tier, kind, "happy")
    assert model["spec"]["modelParameterSize"] == PARAMETER_SIZE
    assert story.labelled() and race.OME_FINALIZERS[kind] in model["metadata"]["finalizers"]
    settled(story)
    assert len(story.jobs()) == 1
    story.report(title, twins.happy_path(kind, ome_crds))


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_then_pending_then_lost_pvc_is_each_reported_and_no_job_runs_before_it_is_bound(tier: Tier, kind: str) -> None:
    story = Story(tier, kind, "pvc")
    story.namespace_only()
    story.create()
    story.wait_for(("Failed", "PVCNotFound"), STEP_SECONDS)
    story.storage(bound=False)
    pending = story.wait_for(("In_Transit", "PVCPending"), STEP_SECONDS)
    assert story.jobs() == []
    assert "Pending" in why(pending, "message") and why(pending, "pvc") == f"{story.namespace}/model-storage"
    tier.add_volume(story.namespace, "model-storage")
    story.wait_for(("Ready", "Ready"), READY_SECONDS)
    tier.lose_volume(story.namespace, "model-storage")
    lost = story.wait_for(("Failed", "PVCLost"), STEP_SECONDS)
    assert "Lost" in why(lost, "message") and why(lost, "pvc-phase") == "Lost"
    story.report("PVC missing, Pending, bound, Lost", twins.pvc_missing_pending_bound_lost(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_a_block_claim_fails_before_any_job_and_a_read_write_once_claim_is_ready_with_a_note(tier: Tier, kind: str) -> None:
    block = Story(tier, kind, "block")
    block.storage(volume_mode="Block")
    block.create()
    failed = block.wait_for(("Failed", "PVCBlockMode"), STEP_SECONDS)
    assert "volumeMode Block" in why(failed, "message")
    once = Story(tier, kind, "rwo")
    once.storage(access_modes=("ReadWriteOnce",))
    once.create()
    ready = once.wait_for(("Ready", "Ready"), READY_SECONDS)
    note = why(ready, "message")
    assert "ReadWriteOnce: only pods on one node at a time can mount it" in note, note
    assert why(ready, "pvc-access-modes") == "ReadWriteOnce"
    assert block.jobs() == []


@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_failure_shows_the_agents_own_error_and_the_retry_succeeds_once_the_config_is_fixed(
    tier: Tier, kind: str
) -> None:
    story = Story(tier, kind, "agent")
    story.storage(config=BROKEN_CONFIG)
    story.create()
    failed = story.wait_for(("Failed", "JobFailed"), READY_SECONDS)
    message = why(failed, "message")
    agent_error = next(run.output for run in tier.kubelet.runs if run.exit_code != 0 and story.name in run.arguments)
    assert "failed to load model config" in agent_error and "unexpected end of JSON input" in agent_error, agent_error
    job = why(failed, "job")
    assert f"kubectl logs -n {job.replace('/', ' job/')}" in message, message
    attempt = int(why(failed, "attempt").split(" of ")[0])
    assert why(failed, "next-attempt"), failed["metadata"]["annotations"]
    write_model(tier.workdir / "volumes" / f"{story.namespace}-model-storage" / SUB_PATH)
    ready = story.wait_for(("Ready", "Ready"), READY_SECONDS)
    assert int(why(ready, "attempt").split(" of ")[0]) > attempt
    assert ready["spec"]["modelParameterSize"] == PARAMETER_SIZE
    story.report("agent fails (broken config.json), then retried", twins.agent_fails_then_config_fixed(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_moved_to_hf_is_handed_back_to_ome_and_taken_again_when_it_comes_back(tier: Tier, kind: str) -> None:
    story, _ = ready_story(tier, kind, "move")
    story.set_uri(HF_URI)
    tier.wait(lambda: not story.labelled() and COMPOSITE_FINALIZERS[kind] not in story.model()["metadata"]["finalizers"]
              and story.children() == [], STEP_SECONDS, "the model handed back")
    handed_back = story.model()
    assert "conditions" not in handed_back.get("status", {}), handed_back.get("status")
    story.set_uri(story.uri())
    back = story.wait_for(("Ready", "Ready"), READY_SECONDS)
    assert story.labelled() and back["metadata"]["labels"][LABEL] == "pvc"
    story.report("pvc:// -> hf:// and back", twins.pvc_to_hf_and_back(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_deleting_a_model_removes_it_and_the_garbage_collector_takes_every_child(tier: Tier, kind: str) -> None:
    story, _ = ready_story(tier, kind, "delete")
    settled(story)
    story.delete()
    tier.wait(lambda: story.model() is None and story.children() == [], STEP_SECONDS, "the model and its children gone")
    story.report("deletion of a pvc:// model", twins.deletion(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_the_label_race_with_omes_manager_ends_labelled_and_ready(tier: Tier, kind: str) -> None:
    """OME's manager adds its finalizer to a new model between the label keeper's read and
    its write (``race.played``); the model is written as the docs' sample is, with a format
    and framework, so that OME's write starts no new generation. It must end labelled and
    Ready all the same."""
    story = Story(tier, kind, "race")
    story.storage()
    finalized = lambda: race.OME_FINALIZERS[kind] in ((story.model() or {}).get("metadata", {}).get("finalizers") or [])  # noqa: E731
    with race.played(tier, kind, story.name, finalized) as happened:
        story.create(as_sample=True)
        tier.wait(lambda: bool(happened), STEP_SECONDS, "the keeper's call about the new model")
        story.wait_for(("Ready", "Ready"), READY_SECONDS)
    assert story.labelled()
    story.report("label race with OME's manager", twins.happy_path(kind))


def test_the_hooks_crds_and_then_omes_again_change_what_the_status_keeps_and_nothing_else(tier: Tier) -> None:
    """The tier runs OME's own CRDs, as the docs' install leaves them: a Ready model's status is
    its state alone and its why is on the model. The hook's optional CRDs applied as
    docs/install.md says bring the conditions back at the model's next sync; OME's ome-crd
    chart applying its own again (as each of its upgrades does) prunes them, keeps the state
    and the why, and starts no Job; and a model created under OME's CRDs after that goes
    Ready as the first did."""
    stories = [Story(tier, kind, "omecrds") for kind in KINDS]
    for story in stories:
        story.storage()
        story.create()
    for story in stories:
        ready = story.wait_for(("Ready", "Ready"), READY_SECONDS)
        assert ready["status"] == {"state": "Ready"} and why(ready, "job")
    tier.kubectl_as_user(["kubectl", "apply", "--server-side", "--force-conflicts", "-k", "metacontroller/crds/"])
    for story in stories:
        story.touch()
        tier.wait(lambda story=story: "conditions" in (story.model() or {}).get("status", {}), STEP_SECONDS,
                  f"{story.kind}'s conditions under the hook's CRDs")
    jobs = {story.kind: [job["metadata"]["name"] for job in story.jobs()] for story in stories}
    tier.plane.kubectl("replace", "--field-manager", "helm", f"--filename={ome_manager.crd_file('basemodels')}",
                       f"--filename={ome_manager.crd_file('clusterbasemodels')}")
    for story in stories:
        tier.wait(lambda story=story: "conditions" not in (story.model() or {}).get("status", {}), STEP_SECONDS,
                  f"{story.kind}'s status pruned")
    tier.metacontroller.run_for(30)
    for story in stories:
        assert story.model()["status"] == {"state": "Ready"} and story.state() == ("Ready", "Ready")
        assert [job["metadata"]["name"] for job in story.jobs()] == jobs[story.kind]
        story.report("the hook's CRDs, then OME's again", twins.ome_crds_put_back(story.kind))
    late = [Story(tier, kind, "latecrds") for kind in KINDS]
    for story in late:
        story.storage()
        story.create()
    for story in late:
        story.wait_for(("Ready", "Ready"), READY_SECONDS)


def test_under_omes_crds_the_why_is_written_once_per_transition_and_a_steady_state_stores_nothing(tier: Tier) -> None:
    """Metacontroller writes the model (outside its status) only to change something: the label
    keeper its why (labels and annotations) once for each change of what it says, the
    CompositeController its finalizer once; nothing while the why says the same. At a steady state each
    sync still sends the status again: Metacontroller injects ``observedGeneration`` before it
    compares with the stored status, which OME's CRDs prune. The API server finds the object
    unchanged and stores nothing: the model keeps its resourceVersion, so no watch event goes
    out and OME's manager has nothing to react to. Three changes of the model's PVC (a related
    object of both controllers) bring three such syncs of each, as resyncs would."""
    story, _ = ready_story(tier, "BaseModel", "pruned")
    settled(story)
    tier.metacontroller.run_for(5)
    written = story.model_writes()
    assert written and all(before != after for before, after in zip(written, written[1:])), "a write that changed nothing"
    whys = [write.why for write in written]
    assert [why for why, previous in zip(whys, [{}, *whys]) if why != previous] == list({str(why): why for why in whys}.values())
    assert whys[-1][WHY_STATE] == "Ready" and whys[0][WHY_STATE] == "In_Transit"
    before = story.model()
    since = datetime.now(timezone.utc)
    for touch in range(3):
        tier.plane.kubectl("annotate", "persistentvolumeclaim", "model-storage", "--namespace", story.namespace, "--overwrite",
                           f"touched-at={time.time_ns()}")

        def sent_again() -> bool:
            return sum(write.user == identities.METACONTROLLER and write.subresource == "status" and write.name == story.name
                       for write in audit.writes(tier.plane.audit_log, since, datetime.now(timezone.utc))) > touch
        tier.wait(sent_again, STEP_SECONDS, f"Metacontroller's status write after change {touch + 1} of the PVC")
    tier.metacontroller.run_for(5)
    after = story.model()
    assert story.model_writes(since) == []
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["status"] == before["status"] == {"state": "Ready"}