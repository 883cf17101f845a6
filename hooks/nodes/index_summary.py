"""The index summary: every node's marker folded into one object that each model reads.

A model must tell "this node does not hold me" from "this node is not indexed yet" and
from "this node is gone". A thousand markers would weigh more than a model's own entries,
so one ``NodeIndexSummary`` lists their nodes by state. It changes only when a node is
first indexed, goes, or comes back, which is exactly when every model may need a look.
Its parent is the hook's own Namespace (labelled for the DecoratorController), so the
summary is created by the same install and goes with it.

A marker goes only with its ConfigMap, and then the node says nothing any more (OME
reads no ConfigMap that is not there). Without a trace a model could not tell that node
from one not indexed yet, and would keep whatever its status said about it, for good,
whenever it missed the moment the node's entries and the summary disagreed (a hook
restart is enough). So a node the previous summary listed and no marker names any more
is listed ``departed``, the newest ``MAX_DEPARTED`` of them, until a ConfigMap of its
name is indexed again.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes.index_objects import (
    API_VERSION,
    INDEXED,
    MAX_DEPARTED,
    NODE_INDEX,
    NODE_INDEX_SUMMARIES,
    NODE_INDEXES,
    RESOURCES,
    SUMMARY_PARENT_LABEL,
    find_summary,
    node_index_summary,
    read_marker_state,
    read_summary,
)
from hooks.observed import BadRequest, field, object_group, text


def customize_rules(namespace: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """Every marker in OME's namespace; nothing for a Namespace that does not hold the summary
    (Metacontroller asks this for every Namespace it knows)."""
    if not _holds_summary(namespace):
        return []
    return [{"apiVersion": API_VERSION, "resource": RESOURCES[NODE_INDEX], "namespace": ome_namespace}]


def attachments(namespace: dict[str, Any], request: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """The one summary, from the markers Metacontroller sent and the summary it holds."""
    if not _holds_summary(namespace):
        return []
    indexed: list[str] = []
    gone: list[str] = []
    for marker in object_group(request, "related", NODE_INDEXES, required=True):
        if marker["metadata"].get("namespace") != ome_namespace:
            continue
        node = text(field(marker, "spec"), "node")
        if not node:
            raise BadRequest(f"{NODE_INDEX} {marker['metadata']['name']!r} has no spec.node")
        (indexed if read_marker_state(marker) == INDEXED else gone).append(node)
    previous = read_summary(find_summary(object_group(request, "children", NODE_INDEX_SUMMARIES, required=True), ome_namespace))
    listed = {*indexed, *gone}
    before = [*previous.departed, *sorted(previous.indexed | previous.gone)]
    departed = tuple(dict.fromkeys(node for node in before if node not in listed))[-MAX_DEPARTED:]
    return [node_index_summary(ome_namespace, indexed, gone, departed)]


def _holds_summary(namespace: dict[str, Any]) -> bool:
    return field(field(namespace, "metadata"), "labels").get(SUMMARY_PARENT_LABEL) == "true"
