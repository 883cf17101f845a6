"""The label keeper marks exactly the pvc:// models, and says nothing else (CONTRACT §3)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL, keep_label
from hooks.request import BadRequest
from hooks.settings import SyncSettings
from tests import golden
from tests.metacontroller import Simulator, core_hook, manifests
from tests.metacontroller.webhook import Hook

PVC_REQUEST = golden.FIXTURES / "label" / "basemodel-pvc-new.request.json"
SETTINGS = SyncSettings()


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
    assert keep_label(request_with_uri(uri), SETTINGS)["labels"] == {STORAGE_LABEL: label}


def test_the_answer_is_only_the_label_never_a_status_or_attachment() -> None:
    assert set(keep_label(request_with_uri("hf://x/y"), SETTINGS)) == {"labels"}


@pytest.mark.parametrize(
    ("uri", "carried", "resync"),
    [
        ("pvc://model-storage/models/llama", None, True),
        ("pvc://model-storage/models/llama", "yes", True),
        ("pvc://model-storage/models/llama", PVC_STORAGE, False),
        ("hf://meta-llama/Llama-3.1-8B", PVC_STORAGE, True),
        ("hf://meta-llama/Llama-3.1-8B", None, False),
    ],
)
def test_the_keeper_asks_to_look_again_exactly_while_the_model_lacks_the_label_it_wants(
    uri: str, carried: str | None, resync: bool
) -> None:
    """Metacontroller may drop the label write (a Conflict it swallows); the resync is
    queued before the write, so the keeper looks again until the label is right."""
    request = request_with_uri(uri)
    if carried is not None:
        request["object"]["metadata"]["labels"] = {STORAGE_LABEL: carried}
    answer = keep_label(request, SyncSettings(label_resync_seconds=7))
    assert answer.get("resyncAfterSeconds") == (7 if resync else None)


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
        keep_label(body, SETTINGS)


def test_a_model_without_a_storage_uri_is_refused_rather_than_guessed() -> None:
    with pytest.raises(BadRequest, match="storageUri"):
        keep_label(request_with_uri(None), SETTINGS)


def keeper(hook: Hook) -> Simulator:
    sim = Simulator()
    for manifest in manifests("label-keeper.yaml"):
        sim.add_controller(manifest, hook)
    return sim


def model(kind: str, uri: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "llama", **({"namespace": "models"} if kind == "BaseModel" else {})}
    return {"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata, "spec": {"storage": {"storageUri": uri}}}


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_through_metacontroller_only_a_label_change_writes_the_model(kind: str) -> None:
    """One write to label a pvc:// model, one to unlabel it when its URI leaves pvc://,
    none for a model of other storage; a status write does not call the keeper."""
    sim = keeper(core_hook(golden.fixture_settings(), lambda: golden.FIXTURE_NOW))
    namespace = "models" if kind == "BaseModel" else None
    sim.cluster.create(model(kind, "hf://meta-llama/Llama-3.1-8B"))
    sim.run_until_quiet(3600)
    assert sim.decorator_counts["parent write"] == 0 and sim.decorator_counts["status write"] == 0
    stored = sim.cluster.get("ome.io/v1beta1", kind, namespace, "llama")
    stored["spec"]["storage"]["storageUri"] = "pvc://models:store/llama" if namespace is None else "pvc://store/llama"
    sim.cluster.update(stored)
    sim.run_until_quiet(60)
    labelled = sim.cluster.get("ome.io/v1beta1", kind, namespace, "llama")
    assert labelled["metadata"]["labels"] == {STORAGE_LABEL: PVC_STORAGE}
    assert sim.decorator_counts["parent write"] == 1
    calls = sim.decorator_counts["sync"]
    sim.cluster.update_status({**copy.deepcopy(labelled), "status": {"state": "In_Transit"}}, manager="ome-controller-manager")
    sim.run_until_quiet(60)
    assert sim.decorator_counts["sync"] == calls
    labelled = sim.cluster.get("ome.io/v1beta1", kind, namespace, "llama")
    labelled["spec"]["storage"]["storageUri"] = "hf://meta-llama/Llama-3.1-8B"
    sim.cluster.update(labelled)
    sim.run_until_quiet(60)
    assert sim.cluster.get("ome.io/v1beta1", kind, namespace, "llama")["metadata"].get("labels") == {}
    assert sim.decorator_counts["parent write"] == 2 and sim.decorator_counts["status write"] == 0
