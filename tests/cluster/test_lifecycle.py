"""Models' lives against the real API server, controller manager, OME manager and agent, both kinds.

Each story has a namespace of its own and ends with its costs recorded beside the
simulator's (``twins``); the session prints them as one table.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import ome_manager, race, twins
from tests.cluster.model_files import BROKEN_CONFIG, PARAMETER_SIZE, write_model
from tests.cluster.story import HF_URI, LABEL, SUB_PATH, Story
from tests.cluster.tier import Tier

pytestmark = pytest.mark.cluster

KINDS = ("BaseModel", "ClusterBaseModel")
READY_SECONDS = 120.0
STEP_SECONDS = 60.0
COMPOSITE_FINALIZERS = {"BaseModel": "metacontroller.io/compositecontroller-ome-basemodels",
                        "ClusterBaseModel": "metacontroller.io/compositecontroller-ome-clusterbasemodels"}


def hooks_children(kind: str) -> list[str]:
    access = ["Role", "RoleBinding"] if kind == "BaseModel" else ["ClusterRole", "ClusterRoleBinding"]
    return sorted(["ConfigMap", "Job", "Pod", "ServiceAccount", *access])


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_goes_to_ready_with_the_metadata_the_real_agent_wrote(tier: Tier, kind: str) -> None:
    happy_path(tier, kind, "happy path to Ready")


def ready_story(tier: Tier, kind: str, name: str) -> tuple[Story, dict[str, Any]]:
    """A story whose model, on a Bound PVC with a good model, went to Ready."""
    story = Story(tier, kind, name)
    story.storage()
    story.create()
    return story, story.wait_for(("Ready", "Ready"), READY_SECONDS)


def happy_path(tier: Tier, kind: str, title: str) -> None:
    """A model on a Bound PVC: Ready, with the real agent's metadata, one Job, the hook's children."""
    story, model = ready_story(tier, kind, "happy")
    assert model["spec"]["modelParameterSize"] == PARAMETER_SIZE
    assert story.labelled() and race.OME_FINALIZERS[kind] in model["metadata"]["finalizers"]
    assert story.children() == hooks_children(kind)
    assert len(story.jobs()) == 1
    story.report(title, twins.happy_path(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_then_pending_then_lost_pvc_is_each_reported_and_no_job_runs_before_it_is_bound(tier: Tier, kind: str) -> None:
    story = Story(tier, kind, "pvc")
    story.namespace_only()
    story.create()
    story.wait_for(("Failed", "PVCNotFound"), STEP_SECONDS)
    story.storage(bound=False)
    pending = story.wait_for(("In_Transit", "PVCPending"), STEP_SECONDS)
    assert story.jobs() == []
    assert "Pending" in next(item["message"] for item in pending["status"]["conditions"] if item["type"] == "StorageReady")
    tier.add_volume(story.namespace, "model-storage")
    story.wait_for(("Ready", "Ready"), READY_SECONDS)
    tier.lose_volume(story.namespace, "model-storage")
    lost = story.wait_for(("Failed", "PVCLost"), STEP_SECONDS)
    assert "Lost" in next(item["message"] for item in lost["status"]["conditions"] if item["type"] == "StorageReady")
    story.report("PVC missing, Pending, bound, Lost", twins.pvc_missing_pending_bound_lost(kind))


@pytest.mark.parametrize("kind", KINDS)
def test_a_block_claim_fails_before_any_job_and_a_read_write_once_claim_is_ready_with_a_note(tier: Tier, kind: str) -> None:
    block = Story(tier, kind, "block")
    block.storage(volume_mode="Block")
    block.create()
    failed = block.wait_for(("Failed", "PVCBlockMode"), STEP_SECONDS)
    assert "volumeMode Block" in next(item["message"] for item in failed["status"]["conditions"] if item["type"] == "StorageReady")
    once = Story(tier, kind, "rwo")
    once.storage(access_modes=("ReadWriteOnce",))
    once.create()
    ready = once.wait_for(("Ready", "Ready"), READY_SECONDS)
    note = next(item["message"] for item in ready["status"]["conditions"] if item["type"] == "StorageReady")
    assert "ReadWriteOnce: only pods on one node at a time can mount it" in note, note
    assert block.jobs() == []


@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_failure_shows_the_agents_own_error_and_the_retry_succeeds_once_the_config_is_fixed(
    tier: Tier, kind: str
) -> None:
    story = Story(tier, kind, "agent")
    story.storage(config=BROKEN_CONFIG)
    story.create()
    failed = story.wait_for(("Failed", "JobFailed"), READY_SECONDS)
    message = next(item["message"] for item in failed["status"]["conditions"] if item["type"] == "MetadataReady")
    agent_error = next(run.output for run in tier.kubelet.runs if run.exit_code != 0 and story.name in run.arguments)
    assert "failed to load model config" in message and "failed to load model config" in agent_error, message
    assert "unexpected end of JSON input" in message, message
    write_model(tier.workdir / "volumes" / f"{story.namespace}-model-storage" / SUB_PATH)
    ready = story.wait_for(("Ready", "Ready"), READY_SECONDS)
    assert ready["status"]["metadataExtraction"]["attempts"] == 2
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
    assert story.children() == hooks_children(kind)
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


def test_omes_own_crds_put_back_prune_the_status_and_start_no_job(tier: Tier) -> None:
    """OME's ome-crd chart applies its CRDs again (as each of its upgrades does): the API server
    prunes the hook's status fields, the state stays true and no Job is started; the hook's
    CRDs then apply again as docs/install.md says. (The conditions come back at the model's
    next sync, which nothing but a resync brings once the model is Ready.)"""
    stories = [Story(tier, kind, "omecrds") for kind in KINDS]
    for story in stories:
        story.storage()
        story.create()
    for story in stories:
        story.wait_for(("Ready", "Ready"), READY_SECONDS)
    tier.plane.kubectl("replace", "--field-manager", "helm", f"--filename={ome_manager.crd_file('basemodels')}",
                       f"--filename={ome_manager.crd_file('clusterbasemodels')}")
    for story in stories:
        tier.wait(lambda story=story: "conditions" not in (story.model() or {}).get("status", {}), STEP_SECONDS,
                  f"{story.kind}'s status pruned")
    jobs = {story.kind: [job["metadata"]["name"] for job in story.jobs()] for story in stories}
    tier.metacontroller.run_for(30)
    for story in stories:
        assert story.model()["status"] == {"state": "Ready"}
        assert [job["metadata"]["name"] for job in story.jobs()] == jobs[story.kind]
    tier.kubectl_as_user(["kubectl", "apply", "--server-side", "--force-conflicts", "-k", "metacontroller/crds/"])
    for story in stories:
        assert story.model()["status"]["state"] == "Ready"
        story.report("OME's CRDs put back, then the hook's", twins.ome_crds_put_back(story.kind))
