"""OME's BaseModel and ClusterBaseModel reconcilers in the simulator behave as OME v0.1.5's do,
beside the hook and behind the fence."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests import lifecycle
from tests.metacontroller import ApiError, Simulator
from tests.metacontroller.identities import METACONTROLLER, OME_MANAGER
from tests.metacontroller.ome import FINALIZERS, NodeAgents, OMEManager, model_key, parse_model_key

Obj = dict[str, Any]

KINDS = ("BaseModel", "ClusterBaseModel")
HF_URI = "hf://meta-llama/Llama-3.1-8B"
CONFIG = {"modelType": "llama", "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "8.03B",
          "modelFramework": {"name": "transformers", "version": "4.44.0"}, "modelFormat": {"name": "safetensors"},
          "maxTokens": 131072, "modelCapabilities": ["TEXT_GENERATION"], "apiCapabilities": ["OPENAI_V1_CHAT_COMPLETIONS"],
          "artifact": {"sha": "abc", "parentPath": {}}}
FILLED = ("modelType", "modelArchitecture", "modelParameterSize", "maxTokens", "modelCapabilities", "modelFramework",
          "modelFormat")
"""What OME copies from an agent's ``config`` into a spec that lacks it (not ``apiCapabilities``)."""


class Cluster:
    """A simulator with OME's agents and manager and one model of ``kind``."""

    def __init__(self, kind: str, *nodes: str) -> None:
        self.kind = kind
        self.namespace = "models" if kind == "BaseModel" else None
        self.sim = Simulator()
        self.agents = NodeAgents(self.sim)
        for node in nodes:
            self.agents.add_node(node)
        self.ome = OMEManager(self.sim)

    def create_model(self, uri: str = HF_URI) -> None:
        metadata: Obj = {"name": "llama", **({"namespace": self.namespace} if self.namespace else {})}
        self.sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": self.kind, "metadata": metadata,
                                 "spec": {"storage": {"storageUri": uri}}})
        self.sim.settle()

    def model(self) -> Obj | None:
        return self.sim.cluster.find("ome.io/v1beta1", self.kind, self.namespace, "llama")

    def status(self) -> Obj:
        model = self.model()
        assert model is not None
        return model["status"]

    def report(self, node: str, status: str, config: Obj | None = None) -> None:
        self.agents.report(node, self.namespace, "llama", status, config)
        self.sim.settle()

    def delete_model(self) -> None:
        self.sim.cluster.delete("ome.io/v1beta1", self.kind, self.namespace, "llama")
        self.sim.settle()


@pytest.mark.parametrize("kind", KINDS)
def test_an_hf_model_becomes_ready_from_its_nodes_reports_and_gets_omes_finalizer(kind: str) -> None:
    cluster = Cluster(kind, "node-a", "node-b")
    cluster.create_model()
    model = cluster.model()
    assert model is not None and model["metadata"]["finalizers"] == [FINALIZERS[kind]]
    assert cluster.status() == {"state": "In_Transit"}
    cluster.report("node-a", "Updating")
    assert cluster.status() == {"state": "In_Transit"}
    cluster.report("node-a", "Ready", CONFIG)
    assert cluster.status() == {"state": "Ready", "nodesReady": ["node-a"]}
    cluster.report("node-b", "Failed")
    assert cluster.status() == {"state": "Ready", "nodesReady": ["node-a"], "nodesFailed": ["node-b"]}
    spec = (cluster.model() or {})["spec"]
    assert {key: spec.get(key) for key in FILLED} == {key: CONFIG[key] for key in FILLED}
    assert "apiCapabilities" not in spec
    assert cluster.ome.counts["finalizer write"] == cluster.ome.counts["spec write"] == 1
    assert cluster.ome.counts["status write"] == 3 and cluster.ome.counts["error"] == 0


def test_omes_typed_writes_give_a_model_without_a_format_an_empty_one() -> None:
    """``BaseModelSpec.ModelFormat`` has no ``omitempty``: the finalizer's Update sends
    ``modelFormat: {name: ""}``, a spec change (the API server's CRD defaults, not modelled
    here, would add ``operator`` and ``weight``)."""
    cluster = Cluster("BaseModel")
    cluster.create_model()
    model = cluster.model()
    assert model is not None
    assert model["spec"]["modelFormat"] == {"name": ""} and model["metadata"]["generation"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_an_in_transit_model_is_requeued_every_five_seconds_without_writing(kind: str) -> None:
    cluster = Cluster(kind, "node-a")
    cluster.create_model()
    writes, reconciles = cluster.ome.counts["status write"], cluster.ome.counts["reconcile"]
    cluster.sim.advance(60)
    assert cluster.ome.counts["reconcile"] == reconciles + 12
    assert cluster.ome.counts["status write"] == writes == 1


@pytest.mark.parametrize("kind", KINDS)
def test_behind_the_fence_every_status_write_to_a_pvc_model_is_refused_and_backs_off(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A day of OME beside the hook: 107 refused writes, and the hook's status stands.

    - 1 at creation: OME's first reconcile, before Metacontroller's first status
      (In_Transit, like OME's own view: from then on OME has nothing to write and requeues
      every 5 s; its rerun after the event of its own finalizer write already finds it);
    - 19 from the Ready the hook writes 30 s in: the work queue's per-item backoff, 5 ms
      doubling to 655.36 s (1,310.7 s in all);
    - 85 more at the 1000 s cap until the day ends;
    - 2 when the informers resync, 10 and 20 hours in (an event for every model; the
      pending backoff keeps its time).

    Metacontroller, the owner, is never refused."""
    built = lifecycle.world(kind)
    assert built.ome is not None
    refused: list[tuple[datetime, str]] = []
    write_status = built.sim.cluster.update_status

    def recording(obj: Obj, **writer: Any) -> Obj:
        try:
            return write_status(obj, **writer)
        except ApiError:
            refused.append((built.sim.clock.now, writer["user"]))
            raise
    monkeypatch.setattr(built.sim.cluster, "update_status", recording)
    start = built.sim.clock.now
    built.create_model()
    built.sim.advance(86400)

    assert built.ome.counts["status write refused"] == built.ome.counts["status write"] == len(refused) == 107
    assert {user for _, user in refused} == {OME_MANAGER}
    assert built.sim.counts["status write refused"] == 0
    assert built.state() == ("Ready", "Ready")
    times = [when - start for when, _ in refused]
    ready = timedelta(seconds=30)
    assert times[:2] == [timedelta(0), ready]
    backoff = [later - earlier for earlier, later in zip(times[1:20], times[2:20])]
    assert backoff == [timedelta(milliseconds=5 * 2**failures) for failures in range(18)]
    resyncs = [timedelta(hours=10), timedelta(hours=20)]
    capped = [when for when in times[19:] if when not in resyncs]
    assert [later - earlier for earlier, later in zip(capped, capped[1:])] == [timedelta(seconds=1000)] * 85
    assert [when for when in times if when in resyncs] == resyncs


@pytest.mark.parametrize("kind", KINDS)
def test_deleting_a_model_no_node_reports_removes_omes_finalizer_at_once(kind: str) -> None:
    cluster = Cluster(kind, "node-a")
    cluster.create_model()
    cluster.delete_model()
    assert cluster.model() is None
    assert cluster.ome.counts["finalizer write"] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_deleting_a_model_a_node_holds_waits_in_30_second_steps_until_the_entry_goes(kind: str) -> None:
    cluster = Cluster(kind, "node-a")
    cluster.create_model()
    cluster.report("node-a", "Ready")
    cluster.delete_model()
    cluster.sim.advance(10)
    reconciles = cluster.ome.counts["reconcile"]
    cluster.sim.advance(85)
    assert cluster.model() is not None
    assert cluster.ome.counts["reconcile"] == reconciles + 3
    cluster.report("node-a", "Deleted")
    assert cluster.model() is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_deleted_nodes_configmap_goes_and_its_models_forget_the_node(kind: str) -> None:
    cluster = Cluster(kind, "node-a", "node-b")
    cluster.create_model()
    cluster.report("node-a", "Ready")
    cluster.report("node-b", "Ready")
    assert cluster.status()["nodesReady"] == ["node-a", "node-b"]
    cluster.sim.cluster.delete("v1", "Node", None, "node-a")
    cluster.sim.settle()
    assert cluster.sim.cluster.find("v1", "ConfigMap", "ome", "node-a") is None
    assert cluster.ome.counts["configmap delete"] == 1
    assert cluster.status() == {"state": "Ready", "nodesReady": ["node-b"]}


def test_a_status_write_meeting_a_conflict_is_tried_again_on_a_fresh_read(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster("BaseModel", "node-a")
    write_status = cluster.sim.cluster.update_status
    conflicts = [ApiError(409, "the object has been modified")]

    def conflicting(obj: Obj, **writer: Any) -> Obj:
        if conflicts and writer["user"] == OME_MANAGER:
            raise conflicts.pop()
        return write_status(obj, **writer)
    monkeypatch.setattr(cluster.sim.cluster, "update_status", conflicting)
    cluster.create_model()
    assert cluster.status() == {"state": "In_Transit"}
    assert cluster.ome.counts["status write"] == 2 and cluster.ome.counts["error"] == 0


def test_omes_status_write_replaces_every_field_but_its_own_four() -> None:
    """The typed write: without the fence, OME wipes what the hook wrote."""
    cluster = Cluster("BaseModel")
    cluster.create_model("pvc://model-storage/llama")
    model = cluster.model()
    assert model is not None
    hook_status = {"state": "Ready", "lifecycle": "Public", "conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "ready", "lastTransitionTime": "2026-11-30T12:00:00Z"}]}
    cluster.sim.cluster.update_status({**model, "status": hook_status}, user=METACONTROLLER)
    cluster.sim.settle()
    assert cluster.status() == {"state": "In_Transit", "lifecycle": "Public"}


def test_configmap_keys_follow_omes_naming_and_truncation() -> None:
    assert model_key("models", "llama") == "models.basemodel.llama"
    assert model_key(None, "llama") == "clusterbasemodel.llama"
    long_name = "m" * 250 + "-tail"
    key = model_key("models", long_name)
    digest = hashlib.sha256(long_name.encode()).hexdigest()[:8]
    kept = 242 - len("models") - len(digest) - 1  # the name's budget, less the hash and its dash
    assert len(key) == 253 and key == f"models.basemodel.{digest}-{long_name[-kept:]}"
    long_namespace = "n" * 63
    key = model_key(long_namespace, long_name)
    assert key.startswith(hashlib.sha256(long_namespace.encode()).hexdigest()[:8] + ".basemodel.") and len(key) == 253
    assert len(model_key(None, long_name)) == 253
    assert parse_model_key("models.basemodel.llama") == ("models", "llama")
    assert parse_model_key("clusterbasemodel.llama") == (None, "llama")
    assert parse_model_key("clusterbasemodel.basemodel.llama") == (None, "basemodel.llama")
    assert parse_model_key("node-info") is None
