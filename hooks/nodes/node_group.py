"""One group of nodes: its ``NodeIndex`` objects in, one ``NodeModelStatus`` per model out.

The DecoratorController syncs each ``NodeGroup`` with the ``NodeIndex`` of every node of
the group (asked for by the group's label) and returns, as the group's attachments, each
model's statuses on those nodes. A change of one model's entry on one node changes that
model's object only, so only that model is woken. The group's status says which of its
nodes a model can trust:

- ``indexed``: every status of the node is in the group's objects, so a model the node
  does not name is one it does not hold. A node becomes indexed only once the objects
  Metacontroller sends back show all of them (the status is written before the objects
  are), and then stays so while its statuses change: those changes reach their models
  through the objects themselves.
- ``gone``: its Node is deleted, and OME ignores its reports. A node whose Node comes
  back stays gone until it is indexed again.
- ``departed``: a node the group listed whose ``NodeIndex`` is gone with its ConfigMap,
  the newest ``MAX_DEPARTED``, until it is indexed again. Without a trace a model could
  not tell that node from one not indexed yet, and would keep whatever its status said
  about it for good, whenever it missed the moment of the change (a hook restart is
  enough).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hooks.nodes.index_objects import (
    API_VERSION,
    GROUP_LABEL,
    INDEXED,
    MAX_DEPARTED,
    NODE_INDEX,
    NODE_INDEXES,
    NODE_MODEL_STATUSES,
    RESOURCES,
    group_of,
    is_node_group,
    model_label,
    node_group_status,
    node_model_status,
    read_node_group_status,
    read_node_index,
    read_node_model_status,
)
from hooks.observed import object_group

MISSING = object()


def customize_rules(group: dict[str, Any], ome_namespace: str) -> list[dict[str, Any]]:
    """The ``NodeIndex`` of every node of the group, by the label they carry."""
    if not is_node_group(group, ome_namespace):
        return []
    return [{
        "apiVersion": API_VERSION,
        "resource": RESOURCES[NODE_INDEX],
        "namespace": ome_namespace,
        "labelSelector": {"matchLabels": {GROUP_LABEL: group["metadata"]["name"]}},
    }]


def sync(group: dict[str, Any], request: dict[str, Any], ome_namespace: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The group's status and its ``NodeModelStatus`` objects; nothing, and the status
    left alone, for a group the hook did not derive."""
    if not is_node_group(group, ome_namespace):
        return None, []
    name = group["metadata"]["name"]
    entries = [
        read_node_index(obj)
        for obj in object_group(request, "related", NODE_INDEXES, required=True)
        if obj["metadata"].get("namespace") == ome_namespace
    ]
    entries = [entry for entry in entries if group_of(entry.node) == name]
    desired: dict[str, dict[str, str | None]] = defaultdict(dict)
    for entry in entries:
        if entry.state == INDEXED:
            for key, status in sorted(entry.models.items()):
                desired[model_label(key)][entry.node] = status
    observed = dict(
        read_node_model_status(obj)
        for obj in object_group(request, "children", NODE_MODEL_STATUSES, required=True)
        if obj["metadata"].get("namespace") == ome_namespace
    )
    previous = read_node_group_status(group)
    indexed: list[str] = []
    gone: list[str] = []
    for entry in entries:
        if entry.state != INDEXED:
            gone.append(entry.node)
        elif entry.node in previous.indexed or _reflected(entry.node, desired, observed):
            indexed.append(entry.node)
        elif entry.node in previous.gone:
            gone.append(entry.node)
    listed = {entry.node for entry in entries}
    before = [*previous.departed, *sorted(previous.indexed | previous.gone)]
    departed = tuple(dict.fromkeys(node for node in before if node not in listed))[-MAX_DEPARTED:]
    attachments = [node_model_status(ome_namespace, name, label, nodes) for label, nodes in sorted(desired.items())]
    return node_group_status(indexed, gone, departed), attachments


def _reflected(node: str, desired: dict[str, dict[str, str | None]], observed: dict[str, dict[str, str | None]]) -> bool:
    """Whether every status the node reports is already in the objects Metacontroller sent."""
    return all(observed.get(label, {}).get(node, MISSING) == nodes[node] for label, nodes in desired.items() if node in nodes)
