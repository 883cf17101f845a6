"""The label keeper through the simulated Metacontroller's DecoratorController: which
changes of a model bring a call, and which answers a write of it (CONTRACT §3)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL
from tests import golden
from tests.metacontroller import Simulator, core_hook, manifests
from tests.metacontroller.webhook import Hook


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
