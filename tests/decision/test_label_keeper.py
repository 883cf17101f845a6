"""The label keeper marks exactly the pvc:// models and writes their why on them, and says
nothing else (CONTRACT §3; issue 29: the why readable whatever CRDs the cluster runs)."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL, keep_label
from hooks.pvc.annotations import KEYS, MESSAGE, REASON, STATE
from hooks.pvc.observation import CHILD_TYPES
from hooks.request import BadRequest
from hooks.settings import Settings, SyncSettings
from hooks.sync import HAND_BACK, sync
from tests import golden

PVC_REQUEST = golden.FIXTURES / "label" / "basemodel-pvc-new.request.json"
STEADY_REQUEST = golden.FIXTURES / "label" / "basemodel-ready-labelled-and-annotated-steady.request.json"
SETTINGS = Settings()
NOW = golden.FIXTURE_NOW


def request_with_uri(uri: Any) -> dict[str, Any]:
    request = golden.load(PVC_REQUEST)
    request["object"]["spec"]["storage"]["storageUri"] = uri
    return request


@pytest.mark.parametrize(
    ("uri", "label"),
    [
        ("pvc://model-storage/models/llama", PVC_STORAGE),
        ("pvc://models:model-storage/models/llama", PVC_STORAGE),
        ("pvc://Bad_Name", PVC_STORAGE),
        ("hf://meta-llama/Llama-3.1-8B", None),
        ("PVC://model-storage/models/llama", None),
        ("oci://n/ns/b/bucket/o/llama", None),
        ("", None),
    ],
)
def test_a_model_is_labelled_pvc_exactly_when_its_uri_starts_with_pvc(uri: str, label: str | None) -> None:
    """A malformed pvc:// URI is still the hook's: its status must say what is wrong with it."""
    assert keep_label(request_with_uri(uri), SETTINGS, NOW).response["labels"] == {STORAGE_LABEL: label}


def test_the_answer_is_the_label_and_the_annotations_never_a_status_or_attachment() -> None:
    assert set(keep_label(request_with_uri("hf://x/y"), SETTINGS, NOW).response) == {"labels", "annotations"}
    assert set(keep_label(golden.load(STEADY_REQUEST), SETTINGS, NOW).response) == {"labels", "annotations"}


def test_a_model_that_is_not_the_hooks_has_every_annotation_of_the_hooks_removed_and_no_other() -> None:
    answer = keep_label(request_with_uri("hf://x/y"), SETTINGS, NOW).response
    assert answer["annotations"] == dict.fromkeys(KEYS)
    assert all(key.startswith("ome-basemodel-hook.ome.io/") for key in answer["annotations"])


def steady(change: dict[str, Any]) -> dict[str, Any]:
    """The Ready model, labelled and annotated as the keeper wants, with ``change`` made to
    its labels (``labels``), annotations (``annotations``) or URI (``uri``)."""
    request = golden.load(STEADY_REQUEST)
    metadata = request["object"]["metadata"]
    metadata["labels"].update(change.get("labels", {}))
    metadata["annotations"].update(change.get("annotations", {}))
    if "uri" in change:
        request["object"]["spec"]["storage"]["storageUri"] = change["uri"]
    for key in [key for key, value in metadata["labels"].items() if value is None]:
        del metadata["labels"][key]
    return request


@pytest.mark.parametrize(
    ("change", "resync"),
    [
        ({}, False),
        ({"labels": {STORAGE_LABEL: None}}, True),
        ({"labels": {STORAGE_LABEL: "yes"}}, True),
        ({"annotations": {REASON: "JobRunning"}}, True),
        ({"annotations": {"team": "serving"}}, False),
        ({"uri": "hf://meta-llama/Llama-3.1-8B"}, True),
        ({"uri": "hf://meta-llama/Llama-3.1-8B", "labels": {STORAGE_LABEL: None}}, True),
    ],
    ids=["as-wanted", "unlabelled", "labelled-otherwise", "stale-why", "another-annotation", "left-pvc",
         "left-pvc-unlabelled-still-annotated"],
)
def test_the_keeper_asks_to_look_again_exactly_while_the_model_lacks_the_label_or_annotations_it_wants(
    change: dict[str, Any], resync: bool
) -> None:
    """Metacontroller may drop the keeper's write (a Conflict it swallows); the resync is
    queued before the write, so the keeper looks again until the model is as it wants."""
    answer = keep_label(steady(change), Settings(sync=SyncSettings(label_resync_seconds=7)), NOW).response
    assert answer.get("resyncAfterSeconds") == (7 if resync else None)


def test_an_hf_model_never_annotated_by_the_hook_costs_no_write_and_no_resync() -> None:
    request = request_with_uri("hf://meta-llama/Llama-3.1-8B")
    request["object"]["metadata"]["annotations"] = {"team": "serving"}
    assert "resyncAfterSeconds" not in keep_label(request, SETTINGS, NOW).response


SYNC_CASES = [path for path in golden.cases() if golden.hook_of(path) == "sync" and "v1-keys" not in path.name]


def as_keeper_request(sync_request: dict[str, Any]) -> dict[str, Any]:
    """What the label keeper is sent about the same model in the same state: its children
    arrive as related objects, which its customize hook asked for."""
    related = {**{key: sync_request["children"].get(key, {}) for key in CHILD_TYPES}, **sync_request.get("related", {})}
    return {"controller": {}, "object": sync_request["parent"], "attachments": {}, "related": related, "finalizing": False}


@pytest.mark.parametrize("request_file", SYNC_CASES, ids=[path.name.removesuffix(".request.json") for path in SYNC_CASES])
def test_the_annotations_say_what_the_status_says_in_the_same_state(request_file: Any) -> None:
    """One decision, two places: the state and the Ready condition's reason and message
    are the same on the model's annotations as in its status."""
    request = golden.load(request_file)
    decision = sync(request, SETTINGS, NOW)
    status = decision.response["status"]
    answer = keep_label(as_keeper_request(request), SETTINGS, NOW).response
    if decision.flow == HAND_BACK:
        assert answer["annotations"] == dict.fromkeys(KEYS), "a handed-back model keeps none of the hook's annotations"
        return
    ready = next(item for item in status["conditions"] if item["type"] == "Ready")
    annotations = answer["annotations"]
    assert (annotations[STATE], annotations[REASON], annotations[MESSAGE]) == (status["state"], ready["reason"], ready["message"])


@pytest.mark.parametrize(
    "damage",
    [lambda request: request.update(related={}), lambda request: request["related"].pop("PersistentVolumeClaim.v1"),
     lambda request: request["related"]["Job.batch/v1"].update({"models/x": "not an object"}),
     lambda request: request["object"]["metadata"].update(deletionTimestamp="2026-11-30T12:00:00Z")],
    ids=["related-not-sent", "pvc-not-sent", "malformed-related", "being-deleted"],
)
def test_the_label_never_waits_on_the_why(damage: Any) -> None:
    """Where the related objects cannot be read with certainty, or the model is being
    deleted, the annotations are left as they are and the label is still answered."""
    request = golden.load(golden.FIXTURES / "label" / "basemodel-job-running.request.json")
    damage(request)
    assert keep_label(request, SETTINGS, NOW).response == {"labels": {STORAGE_LABEL: PVC_STORAGE}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        ({"parent": {}}, "no 'object'"),
        ({"object": "llama"}, "no 'object'"),
        ({"object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}, "not served"),
    ],
)
def test_a_request_that_is_not_a_decorator_sync_about_a_model_is_refused(body: Any, message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        keep_label(body, SETTINGS, NOW)


def test_a_model_without_a_storage_uri_is_refused_rather_than_guessed() -> None:
    with pytest.raises(BadRequest, match="storageUri"):
        keep_label(request_with_uri(None), SETTINGS, NOW)


HANDED_TO_OME = [golden.FIXTURES / "label" / "basemodel-pvc-omes-chart-clusterrole-hands-back.request.json",
                 golden.FIXTURES / "label" / "clusterbasemodel-pvc-omes-job-hands-back.request.json"]


@pytest.mark.parametrize("request_file", HANDED_TO_OME, ids=[path.name.removesuffix(".request.json") for path in HANDED_TO_OME])
def test_a_pvc_model_is_handed_back_as_an_hf_one_is_once_omes_own_pvc_backend_shows(request_file: Any) -> None:
    """OME's chart's ClusterRole or its Job for the model: the label and every annotation go,
    so the CompositeControllers let the model go and OME's backend alone serves it."""
    labelled = keep_label(golden.load(request_file), SETTINGS, NOW)
    assert labelled.stepped_aside is not None
    assert labelled.response["labels"] == {STORAGE_LABEL: None}
    assert labelled.response["annotations"] == dict.fromkeys(KEYS)


def test_a_malformed_object_where_the_evidence_would_be_hands_no_model_back() -> None:
    request = golden.load(HANDED_TO_OME[0])
    request["related"]["ClusterRole.rbac.authorization.k8s.io/v1"]["ome-model-metadata"]["metadata"]["namespace"] = "ome"
    labelled = keep_label(request, SETTINGS, NOW)
    assert labelled.stepped_aside is None
    assert labelled.response["labels"] == {STORAGE_LABEL: PVC_STORAGE}


def test_a_model_on_other_storage_is_never_said_to_be_handed_to_omes_pvc_backend() -> None:
    request = golden.load(HANDED_TO_OME[0])
    request["object"]["spec"]["storage"]["storageUri"] = "hf://meta-llama/Llama-3.1-8B"
    assert keep_label(request, SETTINGS, NOW).stepped_aside is None
