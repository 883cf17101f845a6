"""The node index's objects: what they are called, how they are labelled, what they hold.

The index is written by the DecoratorController (``hooks/nodes/decorator.py``) and read by
the node flow of every model (``hooks/nodes/node_status.py``); this module is the one
place both sides agree on. Four kinds, all in OME's namespace:

- ``NodeIndex``: one per node's ConfigMap, the node's entries boiled down to each
  model's status (or ``NodeGone`` once its Node is deleted), labelled with the node's
  group;
- ``NodeGroup``: a fixed set of ``GROUP_COUNT``, each gathering the nodes whose name
  hashes to it; its status names its nodes that are indexed, gone or departed;
- ``NodeModelStatus``: one per (group, model), the statuses of one model on the
  group's nodes, labelled with the model so a model asks for its own and nothing else;
- ``NodeIndexSummary``: one in all, every group's status folded together, so a model
  reads one object to learn which nodes are known instead of every group.

Why groups: a model must be woken by a change of its own entries only, so no object a
model reads may hold another model's statuses; and one object per (node, model) costs
more in Metacontroller's bookkeeping (about 1 KB each: a last-applied copy, managedFields,
an ownerReference) than the agents' entries it indexes. One object per (group, model)
keeps the first and pays that bookkeeping once per group instead of once per node.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hooks.nodes.ome_keys import truncate_with_hash
from hooks.observed import BadRequest, field, text

GROUP = "ome-basemodel-hook.ome.io"
API_VERSION = f"{GROUP}/v1alpha1"

NODE_INDEX = "NodeIndex"
NODE_GROUP = "NodeGroup"
NODE_MODEL_STATUS = "NodeModelStatus"
NODE_INDEX_SUMMARY = "NodeIndexSummary"
NODE_INDEXES = f"{NODE_INDEX}.{API_VERSION}"
NODE_GROUPS = f"{NODE_GROUP}.{API_VERSION}"
NODE_MODEL_STATUSES = f"{NODE_MODEL_STATUS}.{API_VERSION}"
NODE_INDEX_SUMMARIES = f"{NODE_INDEX_SUMMARY}.{API_VERSION}"
RESOURCES = {
    NODE_INDEX: "nodeindexes",
    NODE_GROUP: "nodegroups",
    NODE_MODEL_STATUS: "nodemodelstatuses",
    NODE_INDEX_SUMMARY: "nodeindexsummaries",
}
SUMMARY_NAME = "nodes"

MODEL_LABEL = f"{GROUP}/model"
GROUP_LABEL = f"{GROUP}/node-group"
GROUPS_PARENT_LABEL = f"{GROUP}/node-groups"
LABEL_VALUE_LENGTH = 63

# Fixed, so a node's group never changes: at 1,000 nodes a group holds about 16, and a
# group's sync carries that many NodeIndexes.
GROUP_COUNT = 64
GROUP_NAMES = tuple(f"nodes-{number:02d}" for number in range(GROUP_COUNT))
_GROUP_NAME_SET = frozenset(GROUP_NAMES)

INDEXED = "Indexed"
NODE_GONE = "NodeGone"
MAX_DEPARTED = 100


def group_of(node: str) -> str:
    """The group a node belongs to, from its name alone, so every side derives the same."""
    return GROUP_NAMES[int(hashlib.sha256(node.encode()).hexdigest()[:8], 16) % GROUP_COUNT]


def model_label(key: str) -> str:
    """The label value that names one model in the index: OME's ConfigMap key for the
    model, shortened the way OME shortens its own keys when it exceeds a label's 63
    characters (keys that long would need the same 32-bit hash and the same last 54
    characters to be mixed up)."""
    return truncate_with_hash(key, LABEL_VALUE_LENGTH)


def _statuses(spec: dict[str, Any], statuses: dict[str, str | None], what: str) -> None:
    """Readable statuses in a map, the names whose entry does not parse in a list: the
    schema keeps a map of strings, and OME counts such an entry as holding the model
    while neither ready nor failed."""
    spec[what] = {name: status for name, status in sorted(statuses.items()) if status is not None}
    unreadable = sorted(name for name, status in statuses.items() if status is None)
    if unreadable:
        spec["unreadable"] = unreadable


def _read_statuses(spec: dict[str, Any], what: str, kind: str, name: str) -> dict[str, str | None]:
    readable, unreadable = spec.get(what, {}), spec.get("unreadable", [])
    if not isinstance(readable, dict) or not all(isinstance(status, str) for status in readable.values()):
        raise BadRequest(f"{kind} {name!r} spec.{what} must be a map of strings")
    if not isinstance(unreadable, list) or not all(isinstance(item, str) for item in unreadable):
        raise BadRequest(f"{kind} {name!r} spec.unreadable must be a list of strings")
    return {**readable, **dict.fromkeys(unreadable)}


def node_index(namespace: str, node: str, state: str, models: dict[str, str | None]) -> dict[str, Any]:
    """One node's entries: each model's status by OME's key, named after the node as its
    ConfigMap is. A gone node says nothing about models (OME ignores its reports)."""
    spec: dict[str, Any] = {"node": node, "state": state}
    if state == INDEXED:
        _statuses(spec, models, "models")
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_INDEX,
        "metadata": {"name": node, "namespace": namespace, "labels": {GROUP_LABEL: group_of(node)}},
        "spec": spec,
    }


@dataclass(frozen=True)
class NodeEntries:
    """One ``NodeIndex`` as read back: the node, its state, each model's status by key."""

    node: str
    state: str
    models: dict[str, str | None]


def read_node_index(obj: dict[str, Any]) -> NodeEntries:
    """Refuse an index without its node or with an unknown state: guessing either would
    misplace a node's reports or drop them."""
    name, spec = obj["metadata"]["name"], field(obj, "spec")
    node, state = text(spec, "node"), spec.get("state")
    if not node:
        raise BadRequest(f"{NODE_INDEX} {name!r} has no spec.node")
    if state not in (INDEXED, NODE_GONE):
        raise BadRequest(f"{NODE_INDEX} {name!r} has state {state!r}, not {INDEXED} or {NODE_GONE}")
    return NodeEntries(node, state, _read_statuses(spec, "models", NODE_INDEX, name) if state == INDEXED else {})


def node_group(namespace: str, name: str) -> dict[str, Any]:
    """A group as the hook's Namespace holds it: a name and nothing else; its status is
    its own sync's."""
    return {"apiVersion": API_VERSION, "kind": NODE_GROUP, "metadata": {"name": name, "namespace": namespace}}


def is_node_group(obj: dict[str, Any], ome_namespace: str) -> bool:
    """One of the groups the hook derives, where it derives them."""
    metadata = field(obj, "metadata")
    return metadata.get("namespace") == ome_namespace and metadata.get("name") in _GROUP_NAME_SET


@dataclass(frozen=True)
class NodeSet:
    """Which nodes the index knows: fully indexed, known to be gone (the Node deleted), or
    departed (the ConfigMap deleted, oldest first)."""

    indexed: frozenset[str]
    gone: frozenset[str]
    departed: tuple[str, ...] = ()

    @property
    def ignored(self) -> frozenset[str]:
        """The nodes OME's controller would not read: their Node or their ConfigMap is gone."""
        return self.gone | frozenset(self.departed)


NO_NODES = NodeSet(frozenset(), frozenset())


def node_group_status(indexed: list[str], gone: list[str], departed: tuple[str, ...] = ()) -> dict[str, Any]:
    """A group's nodes by state; lists sorted so the same nodes give the same bytes, but
    ``departed`` (only there when not empty) oldest first, so the newest are kept."""
    status: dict[str, Any] = {"indexed": sorted(indexed), "gone": sorted(gone)}
    if departed:
        status["departed"] = list(departed)
    return status


def _node_lists(value: Any, kind: str, name: str, where: str) -> NodeSet:
    """The three node lists of a group's status or of the summary's spec. A value that is
    not an object is refused, not read as none: that would forget every indexed and
    departed node at once."""
    holder = {} if value is None else value
    lists = [holder.get("indexed", []), holder.get("gone", []), holder.get("departed", [])] if isinstance(holder, dict) else None
    if lists is None or not all(isinstance(names, list) and all(isinstance(node, str) for node in names) for names in lists):
        raise BadRequest(f"{kind} {name!r} {where}.indexed, {where}.gone and {where}.departed must be lists of node names")
    return NodeSet(frozenset(lists[0]), frozenset(lists[1]), tuple(lists[2]))


def read_node_group_status(obj: dict[str, Any]) -> NodeSet:
    """No status yet means no node of the group is known yet (the index is being built)."""
    return _node_lists(obj.get("status"), NODE_GROUP, obj["metadata"]["name"], "status")


def known_nodes(groups: list[dict[str, Any]], ome_namespace: str) -> NodeSet:
    """What every group of the index knows, together; ``departed`` oldest first within a
    group, the groups in name order."""
    sets = [read_node_group_status(obj) for obj in groups if is_node_group(obj, ome_namespace)]
    return NodeSet(
        frozenset().union(*(known.indexed for known in sets)),
        frozenset().union(*(known.gone for known in sets)),
        tuple(node for known in sets for node in known.departed),
    )


def node_index_summary(namespace: str, known: NodeSet) -> dict[str, Any]:
    """Every group's nodes in one object, in the shape of a group's status (``departed``
    as the groups keep it)."""
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_INDEX_SUMMARY,
        "metadata": {"name": SUMMARY_NAME, "namespace": namespace},
        "spec": node_group_status(list(known.indexed), list(known.gone), known.departed),
    }


def read_summary(summaries: list[dict[str, Any]], ome_namespace: str) -> NodeSet:
    """The one summary's nodes; none yet means no node is known yet (the index is being built)."""
    summary = next((obj for obj in summaries if obj["metadata"].get("namespace") == ome_namespace
                    and obj["metadata"]["name"] == SUMMARY_NAME), None)
    if summary is None:
        return NO_NODES
    if not isinstance(summary.get("spec"), dict):
        raise BadRequest(f"{NODE_INDEX_SUMMARY} {SUMMARY_NAME!r} has no spec")
    return _node_lists(summary["spec"], NODE_INDEX_SUMMARY, SUMMARY_NAME, "spec")


def entry_name(group: str, label: str) -> str:
    """One name per (group, model): ``<group>.<10 hex of the model's label>``."""
    return f"{group}.{hashlib.sha256(label.encode()).hexdigest()[:10]}"


def node_model_status(namespace: str, group: str, label: str, nodes: dict[str, str | None]) -> dict[str, Any]:
    """One model's status on each node of one group that holds it."""
    spec: dict[str, Any] = {}
    _statuses(spec, nodes, "nodes")
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_MODEL_STATUS,
        "metadata": {"name": entry_name(group, label), "namespace": namespace, "labels": {MODEL_LABEL: label}},
        "spec": spec,
    }


def read_node_model_status(obj: dict[str, Any]) -> tuple[str, dict[str, str | None]]:
    """The model's label and each node's status; refused without the label, which is
    what says whose statuses these are."""
    name = obj["metadata"]["name"]
    label = text(field(obj["metadata"], "labels"), MODEL_LABEL)
    if not label:
        raise BadRequest(f"{NODE_MODEL_STATUS} {name!r} has no {MODEL_LABEL} label")
    spec = obj.get("spec")
    if not isinstance(spec, dict) or "nodes" not in spec:
        raise BadRequest(f"{NODE_MODEL_STATUS} {name!r} has no spec.nodes")
    return label, _read_statuses(spec, "nodes", NODE_MODEL_STATUS, name)
