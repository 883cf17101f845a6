"""The DecoratorController's hooks (``/nodes/customize``, ``/nodes/sync``): the node index.

Two kinds of parent, told apart by ``kind``: each model-status ConfigMap (its node's part
of the index, ``node_index``) and the hook's own Namespace (the summary,
``index_summary``). Every answer leaves the parent alone (``status: null``, no labels or
annotations), so Metacontroller never writes the agents' ConfigMaps; it only manages the
attachments.
"""

from __future__ import annotations

from typing import Any

from hooks.nodes import index_summary, node_index
from hooks.observed import BadRequest, read_parent_name, read_request
from hooks.settings import Settings

CONFIG_MAP = "ConfigMap"
NAMESPACE = "Namespace"


def customize(body: Any, settings: Settings) -> dict[str, Any]:
    """The related objects of one parent: a ConfigMap's Node, or the summary's markers."""
    parent = _parent(body)
    if parent["kind"] == CONFIG_MAP:
        return {"relatedResources": node_index.customize_rules(parent, settings.ome_namespace)}
    return {"relatedResources": index_summary.customize_rules(parent, settings.ome_namespace)}


def sync(body: Any, settings: Settings) -> dict[str, Any]:
    """The parent's attachments, and a null status so the parent is never written."""
    parent = _parent(body)
    if parent["kind"] == CONFIG_MAP:
        attachments = node_index.attachments(parent, body, settings.ome_namespace)
    else:
        attachments = index_summary.attachments(parent, body, settings.ome_namespace)
    return {"status": None, "attachments": attachments}


def _parent(body: Any) -> dict[str, Any]:
    """Hook version v2 only: v1 drops a namespaced ConfigMap's cluster-scoped Node from
    ``related``, and an index built from that would declare every node gone."""
    if isinstance(body, dict) and "object" in body and "parent" not in body:
        raise BadRequest("the node index needs hook version v2 (this request has v1's 'object'); "
                         "set spec.hooks.*.version: v2 in the DecoratorController")
    parent = read_request(body)["parent"]
    if parent.get("kind") not in (CONFIG_MAP, NAMESPACE) or parent.get("apiVersion") != "v1":
        raise BadRequest(f"parent kind {parent.get('kind')!r} is not served by the node index; "
                         f"it serves v1 {CONFIG_MAP} and {NAMESPACE}")
    read_parent_name(parent, namespaced=parent["kind"] == CONFIG_MAP)
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
