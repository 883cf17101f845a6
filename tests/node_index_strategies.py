"""Hypothesis strategies for the node index's DecoratorController: its requests, valid and damaged.

Two parents, as Metacontroller sends them: an OME model agent's ConfigMap (its data in
OME's key format, entries of every status and shape), with its Node when the Node still
exists and the attachments an earlier answer left (as the API server returns them); and
the hook's own Namespace, with every node's ``NodeIndex`` marker. Then, half the time,
the request is damaged by ``tests.strategies.damaged``. The agents' side of a whole
cluster (``agent_worlds``) feeds the test tying the index to OME's own rules.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from hooks.nodes.index_objects import (
    INDEXED,
    NODE_GONE,
    NODE_INDEX_SUMMARIES,
    NODE_INDEXES,
    NODE_MODEL_STATUSES,
    node_index_marker,
    node_index_summary,
    node_model_status,
)
from hooks.nodes.ome_keys import ENTRY_DELETED, ENTRY_FAILED, ENTRY_READY, STATUS_LABEL, configmap_key
from hooks.observed import NODES
from hooks.settings import Settings
from tests.metacontroller import manifests
from tests.metacontroller.cluster import Clock, Cluster
from tests.strategies import NAMES, NAMESPACES, NOW, Draw, created, damaged, sometimes

SETTINGS = (Settings(), Settings(ome_namespace="ome-system"))
(DECORATOR,) = manifests("decoratorcontroller.yaml")
(HOOK_NAMESPACE,) = manifests("namespace.yaml")
AGENT = "model-agent"

NODE_NAMES = st.sampled_from(["10.0.10.105", "node-a", "node-b", "gpu-node-7", "pool-h100." + "a" * 240])
ENTRY_STATUSES = st.sampled_from([ENTRY_READY, ENTRY_FAILED, "Updating", ENTRY_DELETED, "", "ready", "Unknown"])
# Keys OME maps to no model, or to one no BaseModel can be (a model's name and namespace are DNS names).
OTHER_KEYS = st.sampled_from(["agent-version", "node-info.json", "basemodel", "clusterbasemodel", "models.Basemodel.x",
                              "team-a.basemodel._draft", "x.basemodel.y-", ".basemodel.z", "clusterbasemodel.-a"])
UNPARSABLE = st.sampled_from(["", "{not json", "null", "[]", '"Ready"', '{"status": 1}', '{"status": null}', "{" * 2000])

MODEL_CONFIG = {
    "modelType": "llama",
    "modelArchitecture": "LlamaForCausalLM",
    "modelFramework": {"name": "transformers", "version": "4.45.0"},
    "modelFormat": {"name": "safetensors", "version": "1.0.0"},
    "modelParameterSize": "8.03B",
    "maxTokens": 131072,
    "modelCapabilities": ["TEXT_GENERATION"],
    "decodedModelConfiguration": {"hidden_size": 4096, "num_attention_heads": 32, "rope_scaling": {"factor": 8.0}},
    "artifact": {"sha": "", "parentPath": {}, "childrenPaths": None},
}
PROGRESS = {"phase": "Downloading", "totalBytes": 16060522496, "completedBytes": 5368709120, "totalFiles": 12,
            "completedFiles": 4, "speedBytesPerSec": 52428800.5, "lastUpdated": "2026-11-30T11:58:30Z"}


@st.composite
def model_keys(draw: Draw) -> str:
    """OME's data key of a BaseModel or ClusterBaseModel, hash-truncated when its names are long."""
    name = draw(NAMES)
    return configmap_key(None if draw(st.booleans()) else draw(NAMESPACES), name)


@st.composite
def entries(draw: Draw, key: str, status: str | None = None) -> str:
    """A ``ModelEntry`` as the agent serialises it (Go's field order, no spaces), or a value that does not parse."""
    if status is None and sometimes(draw, 6):
        return draw(UNPARSABLE)
    entry: dict[str, Any] = {"name": key.rpartition(".")[2], "status": status or draw(ENTRY_STATUSES)}
    if draw(st.booleans()):
        entry["config"] = MODEL_CONFIG
    if entry["status"] == "Updating" and draw(st.booleans()):
        entry["progress"] = PROGRESS
    return json.dumps(entry, separators=(",", ":"))


def agent_configmap(api: Cluster, node: str, data: dict[str, str], namespace: str, *, labelled: bool = True) -> dict[str, Any]:
    """The agent's ConfigMap of one node, created as the agent creates it (``kubectl get -o json`` shape)."""
    labels = {STATUS_LABEL: "true", "node": node} if labelled else {"node": node}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": node, "namespace": namespace, "labels": labels,
                     "annotations": {"models.ome.io/node-name": node, "models.ome.io/managed-by": AGENT}},
    }
    if data:
        configmap["data"] = data
    return api.create(configmap, manager=AGENT)


def node_object(api: Cluster, name: str) -> dict[str, Any]:
    """A GPU node as the kubelet registered it, with the labels the agent adds."""
    when = "2026-11-30T11:59:40Z"
    return api.create({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "BM.GPU.H100.8",
                                              "models.ome.io/clusterbasemodel.mistral-7b": "Ready"}},
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": f"oci://ocid1.instance.oc1.{name}"},
        "status": {
            "capacity": {"cpu": "224", "memory": "2113412500Ki", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": when, "lastTransitionTime": "2026-11-01T08:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.10.105"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"machineID": "ec2a7f0d3b", "systemUUID": "4c4c4544-0047", "bootID": "2f1d3c4b", "kernelVersion": "5.15.0",
                         "osImage": "Oracle Linux Server 8.10", "containerRuntimeVersion": "containerd://1.7.20",
                         "kubeletVersion": "v1.31.1", "kubeProxyVersion": "v1.31.1", "operatingSystem": "linux",
                         "architecture": "amd64"},
        },
    }, manager="kubelet")


def _keyed(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A v2 object map: ``namespace/name`` for namespaced objects, the name for the others."""
    return {"/".join(filter(None, (obj["metadata"].get("namespace"), obj["metadata"]["name"]))): obj for obj in objects}


def _request(parent: dict[str, Any], children: dict[str, list[dict[str, Any]]], related: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The sync request as the DecoratorController sends it with hook version v2: every
    declared attachment type, every type a customize rule asked for, even when empty."""
    groups = {type_key: [] for type_key in (NODE_MODEL_STATUSES, NODE_INDEXES, NODE_INDEX_SUMMARIES)} | children
    return {"controller": DECORATOR, "parent": parent,
            "children": {type_key: _keyed(objects) for type_key, objects in groups.items()},
            "related": {type_key: _keyed(objects) for type_key, objects in related.items()}, "finalizing": False}


@st.composite
def configmap_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """One node's ConfigMap, its Node unless deleted, and what an earlier answer attached
    (entries of older statuses, of keys since removed, the marker in either state)."""
    settings = draw(st.sampled_from(SETTINGS))
    ome = settings.ome_namespace
    api = Cluster(Clock(NOW - timedelta(minutes=1)))
    node = draw(NODE_NAMES)
    keys = draw(st.lists(model_keys(), unique=True, max_size=4))
    data = {key: draw(entries(key)) for key in keys}
    data |= {key: draw(st.one_of(UNPARSABLE, entries(key))) for key in draw(st.lists(OTHER_KEYS, unique=True, max_size=2))}
    foreign = sometimes(draw, 8)
    configmap = agent_configmap(api, node, data, draw(st.sampled_from(["kube-system", ome])) if foreign else ome,
                                labelled=not (foreign and draw(st.booleans())))
    nodes = [] if sometimes(draw, 4) else [node_object(api, node)]
    earlier = draw(st.lists(st.sampled_from([*keys, "models.basemodel.removed-model"]), unique=True))
    attached = [node_model_status(ome, node, key, draw(st.one_of(st.none(), ENTRY_STATUSES))) for key in earlier]
    marker = draw(st.sampled_from([None, INDEXED, NODE_GONE]))
    markers = [] if marker is None else [node_index_marker(ome, node, marker)]
    children = {type_key: [created(api, obj, configmap, decorator=DECORATOR["metadata"]["name"]) for obj in objects]
                for type_key, objects in ((NODE_MODEL_STATUSES, attached), (NODE_INDEXES, markers))}
    return _request(configmap, children, {NODES: nodes}), settings


@st.composite
def summary_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """The hook's Namespace (or another one Metacontroller asks about), every node's marker
    and the summary an earlier answer attached."""
    settings = draw(st.sampled_from(SETTINGS))
    ome = settings.ome_namespace
    api = Cluster(Clock(NOW - timedelta(minutes=1)))
    namespace = copy.deepcopy(HOOK_NAMESPACE)
    if sometimes(draw, 6):
        namespace["metadata"] = {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}
    parent = api.create(namespace)
    markers = []
    for node in draw(st.lists(NODE_NAMES, unique=True, max_size=4)):
        owner = agent_configmap(api, node, {}, ome)
        markers.append(created(api, node_index_marker(ome, node, draw(st.sampled_from([INDEXED, NODE_GONE]))), owner,
                               decorator=DECORATOR["metadata"]["name"]))
    earlier = []
    if draw(st.booleans()):
        stale = draw(st.lists(NODE_NAMES, unique=True, max_size=3))
        earlier = [created(api, node_index_summary(ome, stale, []), parent, decorator=DECORATOR["metadata"]["name"])]
    return _request(parent, {NODE_INDEX_SUMMARIES: earlier}, {NODE_INDEXES: markers}), settings


@st.composite
def node_index_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A sync request of either parent (mostly a ConfigMap, there are a thousand of them),
    or (half the time) the same request damaged."""
    request, settings = draw(st.one_of(configmap_requests(), configmap_requests(), summary_requests()))
    if draw(st.booleans()):
        request = draw(damaged(request))
    return request, settings


NODE_DELETED, CONFIGMAP_DELETED, REPORTED = "Node deleted", "ConfigMap deleted", "entry written"


@dataclass(frozen=True)
class Change:
    """One thing that happens once the index is built: a Node or a node's ConfigMap
    deleted, or an agent writing (or, with ``entry`` None, removing) one model's entry."""

    what: str
    node: str
    key: str = ""
    entry: str | None = None


@dataclass(frozen=True)
class AgentWorld:
    """What OME's agents and the cluster hold: the Nodes alive, every node's ConfigMap data
    (a deleted node's ConfigMap stays), the models with the status OME last wrote, and
    what changes later (while the hook is down, with ``outage``)."""

    alive: frozenset[str]
    configmaps: dict[str, dict[str, str]]
    models: tuple[tuple[str, str | None, str, dict[str, Any]], ...]
    changes: tuple[Change, ...] = ()
    outage: bool = False

    def changed(self) -> AgentWorld:
        """The world once every change happened (an entry written to a deleted ConfigMap is lost)."""
        alive, configmaps = set(self.alive), copy.deepcopy(self.configmaps)
        for change in self.changes:
            if change.what == NODE_DELETED:
                alive.discard(change.node)
            elif change.what == CONFIGMAP_DELETED:
                configmaps.pop(change.node, None)
            elif change.node in configmaps and change.entry is None:
                configmaps[change.node].pop(change.key, None)
            elif change.node in configmaps:
                configmaps[change.node][change.key] = change.entry
        return AgentWorld(frozenset(alive), configmaps, self.models)


MODEL_NAMES = st.sampled_from(["llama-3.1-8b-instruct", "mistral-7b", "org.example." + "very-long-model-name-" * 11 + "v1"])
WORLD_NODES = ("node-a", "node-b", "node-c", "gpu-node-7")


@st.composite
def agent_worlds(draw: Draw) -> AgentWorld:
    """A few nodes (some deleted since) reporting on a few models, each entry in any state
    or unparsable; a model's earlier status names only nodes that had a ConfigMap. Then a
    few changes, sometimes while the hook is down."""
    nodes = draw(st.lists(st.sampled_from(WORLD_NODES), unique=True, min_size=1))
    models = []
    for name in draw(st.lists(MODEL_NAMES, unique=True, min_size=1, max_size=3)):
        namespace = draw(st.sampled_from([None, "models", "n" * 63]))
        earlier: dict[str, Any] = {}
        if draw(st.booleans()):
            ready = sorted(draw(st.lists(st.sampled_from(nodes), unique=True)))
            failed = sorted(set(draw(st.lists(st.sampled_from(nodes), unique=True))) - set(ready))
            earlier = {"state": "Ready" if ready else "Failed" if failed else "In_Transit",
                       **({"nodesReady": ready} if ready else {}), **({"nodesFailed": failed} if failed else {})}
        models.append(("BaseModel" if namespace else "ClusterBaseModel", namespace, name, earlier))
    keys = [configmap_key(namespace, name) for _, namespace, name, _ in models]
    configmaps = {node: {key: draw(entries(key)) for key in keys if draw(st.booleans())} for node in nodes}
    alive = frozenset(node for node in nodes if not sometimes(draw, 4))
    changes = []
    for _ in range(draw(st.integers(0, 3))):
        what, node, key = draw(st.sampled_from([NODE_DELETED, CONFIGMAP_DELETED, REPORTED])), draw(st.sampled_from(nodes)), draw(st.sampled_from(keys))
        changes.append(Change(what, node, key, draw(st.one_of(st.none(), entries(key)))) if what == REPORTED else Change(what, node))
    return AgentWorld(alive, configmaps, tuple(models), tuple(changes), draw(st.booleans()))
