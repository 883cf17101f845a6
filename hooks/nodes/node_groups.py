"""The groups of the node index and their summary, held by the hook's own Namespace.

Each group is the parent of its models' ``NodeModelStatus`` objects (``node_group``), so
its objects must exist before a node is indexed and for as long as the install does.
The hook's Namespace (labelled for the DecoratorController) holds all of them as its
attachments: they are created by the same install, cannot be missed or mistyped by a
person, and go with it.

Its other attachment is the ``NodeIndexSummary``: the groups' statuses, which
Metacontroller sends back with the groups as this Namespace's attachments, folded into
one object. A model reads that one object instead of every group: a thousand nodes or
ten, its sync then carries one small object besides its own statuses. The summary
follows the groups one sync behind; it only ever lags towards "not known yet", where a
model keeps what its status said.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes.index_objects import GROUP_NAMES, GROUPS_PARENT_LABEL, NODE_GROUPS, known_nodes, node_group, node_index_summary
from hooks.observed import field, object_group


def attachments(namespace: dict[str, Any], request: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """Every group and the summary of their statuses, in OME's namespace; none for a
    Namespace that does not hold them (Metacontroller asks about every Namespace it knows)."""
    if field(field(namespace, "metadata"), "labels").get(GROUPS_PARENT_LABEL) != "true":
        return []
    known = known_nodes(object_group(request, "children", NODE_GROUPS, required=True), ome_namespace)
    return [*(node_group(ome_namespace, name) for name in GROUP_NAMES), node_index_summary(ome_namespace, known)]
