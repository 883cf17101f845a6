"""The node index's objects: what they are called, how they are labelled, what they hold.

The index is written by the DecoratorController (``hooks/nodes/decorator.py``) and read by
the node flow of every model (``hooks/nodes/node_status.py``); this module is the one
place both sides agree on. Three kinds, all in OME's namespace, all kept small because
every model's sync carries its own share of them:

- ``NodeModelStatus``: one per (node, model) entry of an agent's ConfigMap, holding the
  node and the entry's ``status`` only, labelled with the model so a model asks for its
  own and nothing else;
- ``NodeIndex``: one per node's ConfigMap, saying whether that node is ``Indexed`` (every
  entry has its ``NodeModelStatus``) or ``NodeGone`` (its Node object was deleted);
- ``NodeIndexSummary``: one in all, the node names of every ``NodeIndex`` by state, so a
  model learns which nodes are indexed from one object instead of a thousand, and the
  nodes whose ConfigMap (and so whose marker) was deleted since.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hooks.nodes.ome_keys import truncate_with_hash
from hooks.observed import BadRequest, field, text

GROUP = "ome-basemodel-hook.ome.io"
API_VERSION = f"{GROUP}/v1alpha1"

NODE_MODEL_STATUS = "NodeModelStatus"
NODE_INDEX = "NodeIndex"
NODE_INDEX_SUMMARY = "NodeIndexSummary"
NODE_MODEL_STATUSES = f"{NODE_MODEL_STATUS}.{API_VERSION}"
NODE_INDEXES = f"{NODE_INDEX}.{API_VERSION}"
NODE_INDEX_SUMMARIES = f"{NODE_INDEX_SUMMARY}.{API_VERSION}"
RESOURCES = {
    NODE_MODEL_STATUS: "nodemodelstatuses",
    NODE_INDEX: "nodeindexes",
    NODE_INDEX_SUMMARY: "nodeindexsummaries",
}

MODEL_LABEL = f"{GROUP}/model"
SUMMARY_PARENT_LABEL = f"{GROUP}/node-index-summary"
SUMMARY_NAME = "nodes"
MAX_NAME_LENGTH = 253
LABEL_VALUE_LENGTH = 63

INDEXED = "Indexed"
NODE_GONE = "NodeGone"
MAX_DEPARTED = 1000


def model_label(key: str) -> str:
    """The label value that names one model in the index: OME's ConfigMap key for the
    model, shortened the way OME shortens its own keys when it exceeds a label's 63
    characters (keys that long would need the same 32-bit hash and the same last 54
    characters to be mixed up)."""
    return truncate_with_hash(key, LABEL_VALUE_LENGTH)


def entry_name(node: str, key: str) -> str:
    """One name per (node, model), readable by node: ``<node>.<10 hex of the key>``."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    if len(node) + 1 + len(digest) > MAX_NAME_LENGTH:
        node = hashlib.sha256(node.encode()).hexdigest()[:16]
    return f"{node}.{digest}"


def node_model_status(namespace: str, node: str, key: str, status: str | None) -> dict[str, Any]:
    """A node's report on one model: its node, its model (the label) and its status, which
    is absent when the entry does not parse (OME then counts the node as neither ready
    nor failed, but as still holding the model). Nothing else of the entry is copied:
    every model's sync carries one of these per node, and Metacontroller stores each
    with a copy of itself (its last-applied annotation) and managedFields."""
    spec = {"node": node}
    if status is not None:
        spec["status"] = status
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_MODEL_STATUS,
        "metadata": {"name": entry_name(node, key), "namespace": namespace, "labels": {MODEL_LABEL: model_label(key)}},
        "spec": spec,
    }


def node_index_marker(namespace: str, node: str, state: str) -> dict[str, Any]:
    """The marker of one node's ConfigMap, named after it as the ConfigMap is."""
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_INDEX,
        "metadata": {"name": node, "namespace": namespace},
        "spec": {"node": node, "state": state},
    }


def node_index_summary(namespace: str, indexed: list[str], gone: list[str], departed: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every node's marker in one object; lists sorted so the same markers give the same
    bytes, but ``departed`` (only there when not empty) oldest first, so the newest are kept."""
    spec: dict[str, Any] = {"indexed": sorted(indexed), "gone": sorted(gone)}
    if departed:
        spec["departed"] = list(departed)
    return {
        "apiVersion": API_VERSION,
        "kind": NODE_INDEX_SUMMARY,
        "metadata": {"name": SUMMARY_NAME, "namespace": namespace},
        "spec": spec,
    }


@dataclass(frozen=True)
class Entry:
    """One ``NodeModelStatus`` as read back: which node says what about which model (its label)."""

    node: str
    model_label: str
    status: str | None


def read_entry(obj: dict[str, Any]) -> Entry:
    """Refuse an entry without its node or model: guessing either would misplace a report."""
    spec = field(obj, "spec")
    node, label = text(spec, "node"), text(field(obj["metadata"], "labels"), MODEL_LABEL)
    if not node or not label:
        raise BadRequest(f"{NODE_MODEL_STATUS} {obj['metadata']['name']!r} has no spec.node or no {MODEL_LABEL} label")
    status = spec.get("status")
    return Entry(node, label, status if isinstance(status, str) else None)


def read_marker_state(obj: dict[str, Any]) -> str:
    """The state a ``NodeIndex`` records; refused when it is neither known value."""
    state = field(obj, "spec").get("state")
    if state not in (INDEXED, NODE_GONE):
        raise BadRequest(f"{NODE_INDEX} {obj['metadata']['name']!r} has state {state!r}, not {INDEXED} or {NODE_GONE}")
    return state


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


def find_summary(objects: list[dict[str, Any]], ome_namespace: str) -> dict[str, Any] | None:
    """The one summary among objects of its type, if it exists yet."""
    return next((obj for obj in objects if obj["metadata"].get("namespace") == ome_namespace and obj["metadata"]["name"] == SUMMARY_NAME), None)


def read_summary(obj: dict[str, Any] | None) -> NodeSet:
    """No summary yet means no node is known yet (the index is still being built)."""
    if obj is None:
        return NodeSet(frozenset(), frozenset())
    spec = field(obj, "spec")
    lists = [spec.get("indexed", []), spec.get("gone", []), spec.get("departed", [])]
    if not all(isinstance(names, list) and all(isinstance(name, str) for name in names) for names in lists):
        raise BadRequest(f"{NODE_INDEX_SUMMARY} spec.indexed, spec.gone and spec.departed must be lists of node names")
    return NodeSet(frozenset(lists[0]), frozenset(lists[1]), tuple(lists[2]))
