"""One node's part of the index: its agent's ConfigMap and its Node in, its index objects out.

The DecoratorController syncs each model-status ConfigMap with the Node of the same name
(asked for by name, so a Node's heartbeat wakes its own ConfigMap's sync and nothing
else) and returns the ConfigMap's attachments; Metacontroller creates, updates and
deletes them, and garbage-collects them with the ConfigMap. The ConfigMap itself is never
written.
"""

from __future__ import annotations

from typing import Any

from hooks.names import is_label_value
from hooks.nodes.index_objects import (
    INDEXED,
    NODE_GONE,
    NODE_INDEXES,
    NODE_MODEL_STATUSES,
    model_label,
    node_index_marker,
    node_model_status,
    read_marker_state,
)
from hooks.nodes.ome_keys import ENTRY_DELETED, entry_status, is_model_key, is_status_configmap
from hooks.observed import NODES, field, object_group


def customize_rules(configmap: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """The ConfigMap's own Node, by name; nothing for a ConfigMap OME would not read.

    Metacontroller asks this for every ConfigMap of the cluster it holds in its cache, not
    only the ones the DecoratorController selects, so a foreign ConfigMap gets no rule.
    """
    if not is_status_configmap(configmap, ome_namespace):
        return []
    return [{"apiVersion": "v1", "resource": "nodes", "names": [configmap["metadata"]["name"]]}]


def attachments(configmap: dict[str, Any], request: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """The node's ``NodeModelStatus`` objects and its ``NodeIndex`` marker.

    - Node gone: no entries (OME ignores a deleted node's reports) and the marker says
      ``NodeGone``, so models drop the node at once instead of waiting on it.
    - Node alive: one entry per model key that is not ``Deleted``; the marker says
      ``Indexed`` only once every entry is observed, because a model reads "indexed and
      no entry" as "this node does not hold me". Once indexed it stays so while entries
      come and go: those changes reach their models through the entries themselves.
    """
    if not is_status_configmap(configmap, ome_namespace):
        return []
    node = configmap["metadata"]["name"]
    alive = any(item["metadata"]["name"] == node for item in object_group(request, "related", NODES, required=True))
    markers = object_group(request, "children", NODE_INDEXES, required=True)
    observed_entries = {item["metadata"]["name"] for item in object_group(request, "children", NODE_MODEL_STATUSES, required=True)}
    if not alive:
        return [node_index_marker(ome_namespace, node, NODE_GONE)]
    entries = [
        node_model_status(ome_namespace, node, key, status)
        for key, raw in sorted(field(configmap, "data").items())
        if _is_indexed(key) and (status := entry_status(raw)) != ENTRY_DELETED
    ]
    observed_state = next((read_marker_state(item) for item in markers if item["metadata"]["name"] == node), None)
    if observed_state == INDEXED or all(entry["metadata"]["name"] in observed_entries for entry in entries):
        return [*entries, node_index_marker(ome_namespace, node, INDEXED)]
    if observed_state == NODE_GONE:
        return [*entries, node_index_marker(ome_namespace, node, NODE_GONE)]
    return entries


def _is_indexed(key: str) -> bool:
    """A key OME maps to a model, and one a model can have: every model's label (from its
    DNS names) is a valid label value, so a key whose label is not belongs to no model,
    and its entry, which the API server would refuse, would keep the node from ever
    being ``Indexed``."""
    return is_model_key(key) and is_label_value(model_label(key))
