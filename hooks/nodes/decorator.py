"""The DecoratorController's hooks (``/nodes/customize``, ``/nodes/sync``): the node index.

Three kinds of parent, told apart by ``kind``: each model-status ConfigMap (its node's
``NodeIndex``, ``node_index``), the hook's own Namespace (the groups and their summary,
``node_groups``) and
each ``NodeGroup`` (its models' ``NodeModelStatus`` objects, ``node_group``). Only a
group's answer has a status, its own; every other answer leaves its parent alone
(``status: null``, no labels or annotations), so Metacontroller never writes the agents'
ConfigMaps or the Namespace; it only manages the attachments.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes import node_group, node_groups, node_index
from hooks.nodes.index_objects import API_VERSION, NODE_GROUP
from hooks.observed import BadRequest, read_parent_name, read_request
from hooks.settings import Settings

CONFIG_MAP = "ConfigMap"
NAMESPACE = "Namespace"


PARENTS = {CONFIG_MAP: "v1", NAMESPACE: "v1", NODE_GROUP: API_VERSION}


def customize(body: Any, settings: Settings) -> dict[str, Any]:
    """The related objects of one parent: a ConfigMap's Node, a group's NodeIndexes; a
    Namespace needs none."""
    parent = _parent(body)
    if parent["kind"] == CONFIG_MAP:
        return {"relatedResources": node_index.customize_rules(parent, settings.ome_namespace)}
    if parent["kind"] == NODE_GROUP:
        return {"relatedResources": node_group.customize_rules(parent, settings.ome_namespace)}
    return {"relatedResources": []}


def sync(body: Any, settings: Settings) -> dict[str, Any]:
    """The parent's attachments, and a null status (the parent left as it is) but for a group."""
    parent = _parent(body)
    if parent["kind"] == CONFIG_MAP:
        return {"status": None, "attachments": node_index.attachments(parent, body, settings.ome_namespace)}
    if parent["kind"] == NODE_GROUP:
        status, attachments = node_group.sync(parent, body, settings.ome_namespace)
        return {"status": status, "attachments": attachments}
    return {"status": None, "attachments": node_groups.attachments(parent, body, settings.ome_namespace)}


def _parent(body: Any) -> dict[str, Any]:
    """Hook version v2 only: v1 drops a namespaced ConfigMap's cluster-scoped Node from
    ``related``, and an index built from that would declare every node gone."""
    if isinstance(body, dict) and "object" in body and "parent" not in body:
        raise BadRequest("the node index needs hook version v2 (this request has v1's 'object'); "
                         "set spec.hooks.*.version: v2 in the DecoratorController")
    parent = read_request(body)["parent"]
    kind = parent.get("kind")
    if not isinstance(kind, str) or kind not in PARENTS or parent.get("apiVersion") != PARENTS[kind]:
        raise BadRequest(f"parent {parent.get('apiVersion')!r} {parent.get('kind')!r} is not served by the node index; "
                         f"it serves v1 {CONFIG_MAP}, v1 {NAMESPACE} and {API_VERSION} {NODE_GROUP}")
    read_parent_name(parent, namespaced=parent["kind"] != NAMESPACE)
    _check_maps(parent)
    return parent


def _check_maps(parent: dict[str, Any]) -> None:
    """Refuse labels or data the API server could not have stored: with the parent's name
    they decide every attachment, and an answer about a misread parent would rewrite or
    drop a node's whole index (Metacontroller deletes what the answer leaves out)."""
    metadata = parent["metadata"]
    for where, holder, key in (("metadata.labels", metadata, "labels"), ("data", parent, "data")):
        value = holder.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
            raise BadRequest(f"parent {where} must be a map of strings")
