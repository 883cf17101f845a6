"""The groups of the node index, held by the hook's own Namespace.

Each group is the parent of its models' ``NodeModelStatus`` objects (``node_group``), so
its objects must exist before a node is indexed and for as long as the install does.
The hook's Namespace (labelled for the DecoratorController) holds all of them as its
attachments: they are created by the same install, cannot be missed or mistyped by a
person, and go with it.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes.index_objects import GROUP_NAMES, GROUPS_PARENT_LABEL, node_group
from hooks.observed import field


def attachments(namespace: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """Every group, in OME's namespace; none for a Namespace that does not hold them
    (Metacontroller asks about every Namespace it knows)."""
    if field(field(namespace, "metadata"), "labels").get(GROUPS_PARENT_LABEL) != "true":
        return []
    return [node_group(ome_namespace, name) for name in GROUP_NAMES]
