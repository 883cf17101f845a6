"""The node flow through the node index, under the simulated Metacontroller, with exact counts.

Three nodes with OME's model agents (each alone in its node group; ``SHARING`` is two
nodes of one group), three non-PVC models Ready on all of them, the shipped
CompositeControllers and the DecoratorController ``ome-node-index``. Each story
counts the hook calls per model (``/sync`` by parent name) and what the index cost
(``sim.decorator_counts``), and records every status each model was written with.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hooks.nodes.index_objects import API_VERSION, NODE_GONE, group_of
from hooks.nodes.ome_keys import configmap_key
from hooks.settings import Settings
from tests.lifecycle import install_node_index
from tests.metacontroller import Simulator, core_hook, manifests
from tests.metacontroller.kubernetes import NodeAgents
from tests.metacontroller.webhook import Hook

SETTINGS = Settings()
NODES = ("node-a", "node-b", "node-c")
MODELS = (("BaseModel", "models", "llama"), ("BaseModel", "models", "qwen"), ("ClusterBaseModel", None, "mixtral"))


@dataclass
class Calls:
    """The hook, counting its calls by path and parent name."""

    inner: Hook
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.counts[(path, body["parent"]["metadata"]["name"])] += 1
        return self.inner(path, body)

    def since(self, before: Counter[tuple[str, str]], path: str = "/sync") -> dict[str, int]:
        return {name: count - before.get((where, name), 0)
                for (where, name), count in self.counts.items() if where == path and count > before.get((where, name), 0)}


@dataclass
class Cluster:
    sim: Simulator
    agents: NodeAgents
    hook: Calls
    written: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def model(self, name: str) -> dict[str, Any]:
        kind, namespace, _ = next(model for model in MODELS if model[2] == name)
        found = self.sim.cluster.find("ome.io/v1beta1", kind, namespace, name)
        assert found is not None
        return found

    def status(self, name: str) -> dict[str, Any]:
        return {key: value for key, value in self.model(name)["status"].items() if key in ("state", "nodesReady", "nodesFailed")}

    def states_written(self) -> set[str]:
        return {status.get("state", "") for _, status in self.written}

    def index(self, kind: str) -> list[dict[str, Any]]:
        return self.sim.cluster.list(API_VERSION, kind, "ome")

    def run(self, seconds: float = 30) -> tuple[dict[str, int], Counter[str]]:
        """Advance, and return the model syncs and the index's work this cost."""
        calls, index = copy.copy(self.hook.counts), copy.copy(self.sim.decorator_counts)
        self.sim.advance(seconds)
        return self.hook.since(calls), self.sim.decorator_counts - index


def key(name: str) -> str:
    kind, namespace, _ = next(model for model in MODELS if model[2] == name)
    return configmap_key(namespace if kind == "BaseModel" else None, name)


def install(sim: Simulator, hook: Hook, *, composite: bool = True, index: bool = True) -> None:
    if index:
        install_node_index(sim, hook)
    if composite:
        for manifest in manifests("compositecontrollers.yaml"):
            sim.add_controller(manifest, hook)


def cluster(*, ome_status: dict[str, Any] | None = None, installed: bool = True, nodes: tuple[str, ...] = NODES) -> Cluster:
    """Nodes reporting every model Ready; the models exist (with OME's status, if given)."""
    sim = Simulator()
    for namespace in ("models", "ome"):
        sim.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    agents = NodeAgents(sim)
    for node in nodes:
        agents.add_node(node)
    for _, _, name in MODELS:
        for node in nodes:
            agents.report(node, key(name), "Ready")
    for kind, namespace, name in MODELS:
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        model = sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata,
                                    "spec": {"storage": {"storageUri": f"hf://org/{name}"}}})
        if ome_status is not None:
            sim.cluster.update_status({**model, "status": ome_status}, manager="ome-manager")
    built = Cluster(sim, agents, Calls(core_hook(SETTINGS, sim.clock)))

    def record(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is not None and new["kind"] in ("BaseModel", "ClusterBaseModel") and new.get("status") != (old or {}).get("status"):
            built.written.append((new["metadata"]["name"], new.get("status") or {}))
    sim.cluster.watchers.append(record)
    if installed:
        install(sim, built.hook)
        sim.advance(60)
    return built


READY_EVERYWHERE = {"state": "Ready", "nodesReady": list(NODES)}


def test_every_model_is_ready_on_every_node_through_the_index() -> None:
    built = cluster()
    assert {name: built.status(name) for _, _, name in MODELS} == {name: READY_EVERYWHERE for _, _, name in MODELS}
    groups = {group_of(node) for node in NODES}
    assert len(built.index("NodeModelStatus")) == len(groups) * len(MODELS)
    assert sorted(node for obj in built.index("NodeGroup") for node in obj.get("status", {}).get("indexed", [])) == list(NODES)
    assert [obj["spec"]["state"] for obj in built.index("NodeIndex")] == ["Indexed"] * len(NODES)


def test_a_node_heartbeat_wakes_no_model() -> None:
    built = cluster()
    node = built.sim.cluster.get("v1", "Node", None, "node-a")
    node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "lastHeartbeatTime": "2026-11-30T12:05:00Z"}]}
    writes = built.sim.counts["status write"]
    built.sim.cluster.update(node, manager="kubelet")
    model_syncs, index = built.run()
    assert model_syncs == {}
    assert (index["sync"], index["create"], index["update"], index["delete"]) == (1, 0, 0, 0)
    assert built.sim.counts["status write"] == writes


def test_an_entry_change_wakes_that_model_only() -> None:
    built = cluster()
    built.agents.report("node-b", key("qwen"), "Failed")
    model_syncs, index = built.run()
    assert model_syncs == {"qwen": 1}
    # the ConfigMap's sync (its NodeIndex updated) and its group's (qwen's NodeModelStatus
    # updated), each again as its own write wakes it, changing nothing
    assert (index["sync"], index["update NodeIndex"], index["update NodeModelStatus"]) == (4, 1, 1)
    assert (index["update"], index["create"], index["delete"]) == (2, 0, 0)
    assert built.status("qwen") == {"state": "Ready", "nodesReady": ["node-a", "node-c"], "nodesFailed": ["node-b"]}
    assert built.status("llama") == READY_EVERYWHERE


SHARING = ("node-e", "node-u")  # both in group nodes-53


def test_an_entry_change_in_a_group_of_several_nodes_wakes_that_model_only() -> None:
    built = cluster(nodes=SHARING)
    assert group_of("node-e") == group_of("node-u")
    assert len(built.index("NodeModelStatus")) == len(MODELS)
    built.agents.report("node-u", key("qwen"), "Failed")
    model_syncs, index = built.run()
    assert model_syncs == {"qwen": 1}
    assert (index["update NodeIndex"], index["update NodeModelStatus"], index["status write"]) == (1, 1, 0)
    assert built.status("qwen") == {"state": "Ready", "nodesReady": ["node-e"], "nodesFailed": ["node-u"]}
    assert built.status("llama") == {"state": "Ready", "nodesReady": list(SHARING)}


def test_a_node_deleted_from_a_group_of_several_nodes_leaves_the_others_reported() -> None:
    built = cluster(nodes=SHARING)
    built.sim.cluster.delete("v1", "Node", None, "node-u")
    model_syncs, index = built.run()
    assert set(model_syncs) == {name for _, _, name in MODELS}
    assert (index["update NodeModelStatus"], index["delete NodeModelStatus"], index["status write"]) == (3, 0, 1)
    for _, _, name in MODELS:
        assert built.status(name) == {"state": "Ready", "nodesReady": ["node-e"]}
    assert built.states_written() == {"Ready"}


def test_a_download_progress_update_wakes_no_model() -> None:
    """The agent rewrites an entry's progress while downloading; only its status is indexed."""
    built = cluster()
    configmap = built.sim.cluster.get("v1", "ConfigMap", "ome", "node-a")
    entry = json.loads(configmap["data"][key("llama")])
    entry["progress"] = {"phase": "Downloading", "completedBytes": 4_000_000_000, "totalBytes": 16_000_000_000}
    configmap["data"][key("llama")] = json.dumps(entry)
    built.sim.cluster.update(configmap, manager="model-agent")
    model_syncs, index = built.run()
    assert model_syncs == {} and (index["sync"], index["create"], index["update"]) == (1, 0, 0)


def test_a_deleted_node_disappears_from_every_model() -> None:
    built = cluster()
    built.sim.cluster.delete("v1", "Node", None, "node-c")
    model_syncs, index = built.run()
    # node-c is alone in its group: each model is woken by its NodeModelStatus there going
    # and by the summary naming node-c gone (a sync after the group's status), once when
    # both come together
    assert set(model_syncs) == {name for _, _, name in MODELS} and set(model_syncs.values()) <= {1, 2}
    assert (index["update NodeIndex"], index["delete NodeModelStatus"], index["status write"]) == (1, 3, 1)
    assert index["update NodeIndexSummary"] == 1
    assert built.index("NodeIndexSummary")[0]["spec"]["gone"] == ["node-c"]
    for _, _, name in MODELS:
        assert built.status(name) == {"state": "Ready", "nodesReady": ["node-a", "node-b"]}
    assert {node for obj in built.index("NodeModelStatus") for node in obj["spec"]["nodes"]} == {"node-a", "node-b"}
    assert built.sim.cluster.get(API_VERSION, "NodeIndex", "ome", "node-c")["spec"]["state"] == NODE_GONE
    assert built.states_written() == {"Ready"}


def test_a_node_deleted_with_its_configmap_while_the_hook_is_down_disappears_once_it_is_back() -> None:
    """The index never sees the node gone: its NodeIndex goes with the ConfigMap while no
    sync can run. Its group lists it departed, and every model drops it."""
    built = cluster()
    up = built.hook.inner
    built.hook.inner = lambda path, body: (503, {"error": "restarting"})
    built.sim.cluster.delete("v1", "Node", None, "node-c")
    built.sim.cluster.delete("v1", "ConfigMap", "ome", "node-c")
    built.run(20)
    built.hook.inner = up
    built.run(1200)
    for _, _, name in MODELS:
        assert built.status(name) == {"state": "Ready", "nodesReady": ["node-a", "node-b"]}
    assert built.sim.cluster.get(API_VERSION, "NodeGroup", "ome", group_of("node-c"))["status"]["departed"] == ["node-c"]
    assert built.index("NodeIndexSummary")[0]["spec"]["departed"] == ["node-c"]
    assert built.states_written() == {"Ready"}


def test_a_node_that_comes_back_is_reported_again_without_a_flap() -> None:
    built = cluster()
    gone = built.sim.cluster.get("v1", "Node", None, "node-c")
    built.sim.cluster.delete("v1", "Node", None, "node-c")
    built.run()
    built.sim.cluster.create({key: value for key, value in gone.items() if key != "metadata"}
                             | {"metadata": {"name": "node-c"}})
    built.run()
    assert {name: built.status(name) for _, _, name in MODELS} == {name: READY_EVERYWHERE for _, _, name in MODELS}
    assert built.states_written() == {"Ready"}


def test_a_new_node_joins_without_a_flap() -> None:
    built = cluster()
    built.agents.add_node("node-d")
    built.agents.report("node-d", key("llama"), "Ready")
    model_syncs, _ = built.run()
    assert built.status("llama") == {"state": "Ready", "nodesReady": [*NODES, "node-d"]}
    assert built.status("qwen") == READY_EVERYWHERE
    assert built.states_written() == {"Ready"}
    assert model_syncs["llama"] >= 1


def test_first_install_over_models_omes_controller_made_ready_never_flaps() -> None:
    """The models first (their customize then finds no index at all), the index after."""
    built = cluster(ome_status=READY_EVERYWHERE, installed=False)
    install(built.sim, built.hook, index=False)
    built.sim.advance(30)
    assert {name: built.status(name) for _, _, name in MODELS} == {name: READY_EVERYWHERE for _, _, name in MODELS}
    install(built.sim, built.hook, composite=False)
    built.sim.advance(60)
    assert built.states_written() == {"Ready"}
    assert {name: built.status(name) for _, _, name in MODELS} == {name: READY_EVERYWHERE for _, _, name in MODELS}


def test_first_install_drops_a_node_omes_status_kept_once_that_node_is_indexed() -> None:
    """OME's status still listed node-c, whose agent has since dropped the model."""
    built = cluster(ome_status=READY_EVERYWHERE, installed=False)
    built.agents.report("node-c", key("llama"), None)
    install(built.sim, built.hook)
    built.sim.advance(60)
    assert built.status("llama") == {"state": "Ready", "nodesReady": ["node-a", "node-b"]}
    assert built.states_written() == {"Ready"}


def test_a_hook_restart_changes_nothing_the_index_or_the_models_say() -> None:
    built = cluster()
    fresh = Calls(core_hook(SETTINGS, built.sim.clock))
    for controller in built.sim.controllers:
        controller.use_hook(fresh)
    writes, index = built.sim.counts["status write"], copy.copy(built.sim.decorator_counts)
    built.sim.advance(3600)
    assert built.sim.counts["status write"] == writes
    assert {name: n for name, n in (built.sim.decorator_counts - index).items() if name in ("create", "update", "delete")} == {}
