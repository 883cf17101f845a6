"""The index summary: every node's marker folded into one object that each model reads.

A model must tell "this node does not hold me" from "this node is not indexed yet" and
from "this node is gone". A thousand markers would weigh more than a model's own entries,
so one ``NodeIndexSummary`` lists their nodes by state. It changes only when a node is
first indexed, goes, or comes back, which is exactly when every model may need a look.
Its parent is the hook's own Namespace (labelled for the DecoratorController), so the
summary is created by the same install and goes with it.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes.index_objects import (
    API_VERSION,
    INDEXED,
    NODE_INDEX,
    NODE_INDEXES,
    RESOURCES,
    SUMMARY_PARENT_LABEL,
    node_index_summary,
    read_marker_state,
)
from hooks.observed import BadRequest, field, object_group, text


def customize_rules(namespace: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """Every marker in OME's namespace; nothing for a Namespace that does not hold the summary
    (Metacontroller asks this for every Namespace it knows)."""
    if not _holds_summary(namespace):
        return []
    return [{"apiVersion": API_VERSION, "resource": RESOURCES[NODE_INDEX], "namespace": ome_namespace}]


def attachments(namespace: dict[str, Any], request: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """The one summary, from the markers Metacontroller sent."""
    if not _holds_summary(namespace):
        return []
    indexed, gone = [], []
    for marker in object_group(request, "related", NODE_INDEXES, required=True):
        if marker["metadata"].get("namespace") != ome_namespace:
            continue
        node = text(field(marker, "spec"), "node")
        if not node:
            raise BadRequest(f"NodeIndex {marker['metadata']['name']!r} has no spec.node")
        (indexed if read_marker_state(marker) == INDEXED else gone).append(node)
    return [node_index_summary(ome_namespace, indexed, gone)]


def _holds_summary(namespace: dict[str, Any]) -> bool:
    return field(field(namespace, "metadata"), "labels").get(SUMMARY_PARENT_LABEL) == "true"
