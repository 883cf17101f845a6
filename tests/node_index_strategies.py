"""Hypothesis strategies for the node index's DecoratorController: its requests, valid and damaged.

Three parents, as Metacontroller sends them, each with the attachments an earlier answer
left (as the API server returns them): an OME model agent's ConfigMap (its data in OME's
key format, entries of every status and shape), with its Node when the Node still exists;
the hook's own Namespace (or another one), holding the 64 groups; and a ``NodeGroup``
with the ``NodeIndex`` of each of its nodes (sometimes one that is not its own) and the
status its last sync wrote. Then, half the time, the request is damaged by
``tests.strategies.damaged``. The agents' side of a whole cluster (``agent_worlds``)
feeds the test tying the index to OME's own rules.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from hooks.nodes.index_objects import (
    GROUP_NAMES,
    INDEXED,
    MAX_DEPARTED,
    NODE_GONE,
    NODE_GROUPS,
    NODE_INDEXES,
    NODE_INDEX_SUMMARIES,
    NODE_MODEL_STATUSES,
    group_of,
    model_label,
    node_group,
    node_group_status,
    node_index,
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
    groups = {type_key: [] for type_key in (NODE_INDEXES, NODE_GROUPS, NODE_MODEL_STATUSES, NODE_INDEX_SUMMARIES)} | children
    return {"controller": DECORATOR, "parent": parent,
            "children": {type_key: _keyed(objects) for type_key, objects in groups.items()},
            "related": {type_key: _keyed(objects) for type_key, objects in related.items()}, "finalizing": False}


def attached(api: Cluster, objects: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    """Attachments as the API server returns them once the DecoratorController created them."""
    return [created(api, obj, parent, decorator=DECORATOR["metadata"]["name"]) for obj in objects]


def _cluster() -> Cluster:
    return Cluster(Clock(NOW - timedelta(minutes=1)))


@st.composite
def node_models(draw: Draw) -> dict[str, str | None]:
    """What a node's ``NodeIndex`` holds: a status by model key, None for an unreadable entry."""
    keys = draw(st.lists(model_keys(), unique=True, max_size=4))
    return {key: draw(st.one_of(st.none(), ENTRY_STATUSES.filter(lambda status: status != ENTRY_DELETED))) for key in keys}


@st.composite
def configmap_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """One node's ConfigMap, its Node unless deleted, and the ``NodeIndex`` an earlier
    answer attached (of older statuses, keys since removed, or the other state)."""
    settings = draw(st.sampled_from(SETTINGS))
    ome = settings.ome_namespace
    api = _cluster()
    node = draw(NODE_NAMES)
    keys = draw(st.lists(model_keys(), unique=True, max_size=4))
    data = {key: draw(entries(key)) for key in keys}
    data |= {key: draw(st.one_of(UNPARSABLE, entries(key))) for key in draw(st.lists(OTHER_KEYS, unique=True, max_size=2))}
    foreign = sometimes(draw, 8)
    configmap = agent_configmap(api, node, data, draw(st.sampled_from(["kube-system", ome])) if foreign else ome,
                                labelled=not (foreign and draw(st.booleans())))
    nodes = [] if sometimes(draw, 4) else [node_object(api, node)]
    earlier = []
    if draw(st.booleans()):
        state = draw(st.sampled_from([INDEXED, NODE_GONE]))
        earlier = [node_index(ome, node, state, draw(node_models()) if state == INDEXED else {})]
    return _request(configmap, {NODE_INDEXES: attached(api, earlier, configmap)}, {NODES: nodes}), settings


def hook_namespace(api: Cluster, holder: bool = True) -> dict[str, Any]:
    """The hook's Namespace as installed, or (``holder`` False) one of the others Metacontroller knows."""
    namespace = copy.deepcopy(HOOK_NAMESPACE)
    if not holder:
        namespace["metadata"] = {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}
    return api.create(namespace)


@st.composite
def namespace_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """The hook's Namespace (or another one Metacontroller asks about) and the groups an
    earlier answer attached, some with the status their own sync wrote."""
    settings = draw(st.sampled_from(SETTINGS))
    api = _cluster()
    parent = hook_namespace(api, holder=not sometimes(draw, 6))
    names = draw(st.sampled_from([GROUP_NAMES, GROUP_NAMES[:3], ()]))
    groups = attached(api, [node_group(settings.ome_namespace, name) for name in names], parent)
    for position in draw(st.lists(st.integers(0, len(groups) - 1), unique=True, max_size=2)) if groups else []:
        member = members(groups[position]["metadata"]["name"])[0]
        groups[position] = api.update_status({**groups[position], "status": node_group_status([member], [])})
    return _request(parent, {NODE_GROUPS: groups}, {}), settings


@lru_cache(maxsize=None)
def _members() -> dict[str, tuple[str, ...]]:
    """Node names by group, a few per group (names as clusters have them: IPs and pool names)."""
    found: dict[str, list[str]] = {name: [] for name in GROUP_NAMES}
    for number in range(4096):
        for node in (f"10.0.{number // 256}.{number % 256}", f"gpu-pool-{number}"):
            found[group_of(node)].append(node)
    return {name: tuple(nodes[:6]) for name, nodes in found.items()}


def members(group: str) -> tuple[str, ...]:
    """Six nodes that hash to ``group``."""
    return _members()[group]


NODE_STATES = st.sampled_from(["indexed", "gone", "departed", "unknown"])


@st.composite
def group_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A ``NodeGroup`` (sometimes one the hook did not derive) with the ``NodeIndex`` of
    some of its nodes (sometimes one of another group or namespace), the status its last
    sync wrote (nodes indexed, gone, departed, up to the cap), and the ``NodeModelStatus``
    objects it attached, some reflecting the indexes, some stale."""
    settings = draw(st.sampled_from(SETTINGS))
    ome = settings.ome_namespace
    api = _cluster()
    holder = hook_namespace(api)
    name = draw(st.sampled_from(GROUP_NAMES))
    own = members(name)
    group = node_group(ome, name)
    if sometimes(draw, 8):
        group["metadata"] = draw(st.sampled_from([{"name": "nodes-64", "namespace": ome}, {"name": name, "namespace": "kube-system"}]))
    parent = created(api, group, holder, decorator=DECORATOR["metadata"]["name"])
    stranger = members(GROUP_NAMES[(GROUP_NAMES.index(name) + 1) % len(GROUP_NAMES)])[0]
    indexes = []
    for node in draw(st.lists(st.sampled_from(own[:5]), unique=True, max_size=4)):
        state = NODE_GONE if sometimes(draw, 4) else INDEXED
        indexes.append(created(api, node_index(ome, node, state, draw(node_models()) if state == INDEXED else {}),
                               agent_configmap(api, node, {}, ome), decorator=DECORATOR["metadata"]["name"]))
    if sometimes(draw, 6):
        odd = node_index(ome, stranger, INDEXED, {configmap_key(None, "mistral-7b"): ENTRY_READY})
        odd["metadata"]["labels"] = {**odd["metadata"]["labels"], **dict.fromkeys(odd["metadata"]["labels"], name)}
        if draw(st.booleans()):
            odd = node_index("kube-system", own[0], INDEXED, {configmap_key(None, "mistral-7b"): ENTRY_READY})
        indexes.append(api.create(odd, manager="kubectl-client-side-apply"))
    if draw(st.booleans()):
        states = {node: draw(NODE_STATES) for node in (*own, stranger)}
        departed = tuple(node for node in (*own, stranger) if states[node] == "departed")
        if sometimes(draw, 8):
            departed = tuple(f"old-node-{number}" for number in range(MAX_DEPARTED)) + departed
        status = node_group_status([node for node, state in states.items() if state == "indexed"],
                                   [node for node, state in states.items() if state == "gone"], departed)
        parent = api.update_status({**parent, "status": status})
    statuses: dict[str, dict[str, str | None]] = {}
    for obj in indexes:
        for key, status in obj["spec"].get("models", {}).items() if draw(st.booleans()) else ():
            statuses.setdefault(model_label(key), {})[obj["spec"]["node"]] = draw(st.sampled_from([status, status, "Updating"]))
    if draw(st.booleans()):
        statuses.setdefault(model_label(configmap_key("models", "removed-model")), {})[own[5]] = ENTRY_READY
    earlier = [node_model_status(ome, name, label, nodes) for label, nodes in sorted(statuses.items())]
    return _request(parent, {NODE_MODEL_STATUSES: attached(api, earlier, parent)}, {NODE_INDEXES: indexes}), settings


@st.composite
def node_index_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A sync request of any parent (mostly ConfigMaps and groups, there are a thousand
    and 64 of them), or (half the time) the same request damaged."""
    request, settings = draw(st.one_of(configmap_requests(), group_requests(), configmap_requests(),
                                       group_requests(), namespace_requests()))
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
    what changes later (while the hook is down, with ``outage``). How the hook comes in:
    the nodes' objects created in ``order``, the index installed before the models'
    controllers or after them (``index_first``)."""

    alive: frozenset[str]
    configmaps: dict[str, dict[str, str]]
    models: tuple[tuple[str, str | None, str, dict[str, Any]], ...]
    changes: tuple[Change, ...] = ()
    outage: bool = False
    order: tuple[str, ...] = ()
    index_first: bool = True

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
WORLD_NODES = ("node-a", "node-b", "gpu-node-7", *members(group_of("node-a"))[:2])
"""Three of them in one group, so a group gathers several nodes' statuses of a model."""


@st.composite
def world_entries(draw: Draw, key: str) -> str:
    """An entry of a world: mostly the statuses OME's rules tell apart (a world has few
    entries, and a model Ready or Failed somewhere is what a status change is about)."""
    status = draw(st.sampled_from([ENTRY_READY, ENTRY_FAILED, None]))
    return draw(entries(key, status))


@st.composite
def agent_worlds(draw: Draw) -> AgentWorld:
    """A few nodes (some deleted since) reporting on a few models, each entry in any state
    or unparsable; a model's earlier status names only nodes that had a ConfigMap. Then a
    few changes, sometimes while the hook is down; the nodes in any order, the index
    installed first or last."""
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
    configmaps = {node: {key: draw(world_entries(key)) for key in keys if draw(st.booleans())} for node in nodes}
    alive = frozenset(node for node in nodes if not sometimes(draw, 4))
    changes = []
    for _ in range(draw(st.integers(0, 4))):
        what, node, key = draw(st.sampled_from([NODE_DELETED, CONFIGMAP_DELETED, REPORTED])), draw(st.sampled_from(nodes)), draw(st.sampled_from(keys))
        changes.append(Change(what, node, key, draw(st.one_of(st.none(), world_entries(key)))) if what == REPORTED else Change(what, node))
    return AgentWorld(alive, configmaps, tuple(models), tuple(changes), draw(st.booleans()),
                      tuple(draw(st.permutations(nodes))), draw(st.booleans()))
