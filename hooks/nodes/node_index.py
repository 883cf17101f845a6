"""One node's part of the index: its agent's ConfigMap and its Node in, its ``NodeIndex`` out.

The DecoratorController syncs each model-status ConfigMap with the Node of the same name
(asked for by name, so a Node's heartbeat wakes its own ConfigMap's sync and nothing
else) and returns the ConfigMap's one attachment: the entries boiled down to each
model's status, which is all OME's rules read of them. Metacontroller writes it only
when a status changes, and garbage-collects it with the ConfigMap. The ConfigMap itself
is never written.
"""

from __future__ import annotations

from typing import Any

from hooks.names import is_label_value
from hooks.nodes.index_objects import INDEXED, NODE_GONE, model_label, node_index
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
    """The node's ``NodeIndex``: ``NodeGone`` once its Node is deleted (OME ignores a
    deleted node's reports, and models drop the node at once instead of waiting on it),
    else the status of every model key that is not ``Deleted``."""
    if not is_status_configmap(configmap, ome_namespace):
        return []
    node = configmap["metadata"]["name"]
    if not any(item["metadata"]["name"] == node for item in object_group(request, "related", NODES, required=True)):
        return [node_index(ome_namespace, node, NODE_GONE, {})]
    models = {
        key: status
        for key, raw in field(configmap, "data").items()
        if _is_indexed(key) and (status := entry_status(raw)) != ENTRY_DELETED
    }
    return [node_index(ome_namespace, node, INDEXED, models)]


def _is_indexed(key: str) -> bool:
    """A key OME maps to a model, and one a model can have: every model's label (from its
    DNS names) is a valid label value, so a key whose label is not belongs to no model."""
    return is_model_key(key) and is_label_value(model_label(key))
