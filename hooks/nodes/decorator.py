"""The DecoratorController's hooks (``/nodes/customize``, ``/nodes/sync``): the node index.

Two kinds of parent, told apart by ``kind``: each model-status ConfigMap (its node's part
of the index, ``node_index``) and the hook's own Namespace (the summary,
``index_summary``). Every answer leaves the parent alone (``status: null``, no labels or
annotations), so Metacontroller never writes the agents' ConfigMaps; it only manages the
attachments.
"""

from __future__ import annotations

from typing import Any

from hooks.names import is_dns_label, is_dns_subdomain
from hooks.nodes import index_summary, node_index
from hooks.observed import BadRequest, read_request
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
    if not isinstance(parent.get("metadata"), dict):
        raise BadRequest("parent has no metadata")
    if parent.get("kind") not in (CONFIG_MAP, NAMESPACE) or parent.get("apiVersion") != "v1":
        raise BadRequest(f"parent kind {parent.get('kind')!r} is not served by the node index; "
                         f"it serves v1 {CONFIG_MAP} and {NAMESPACE}")
    name = parent["metadata"].get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest("parent has no metadata.name")
    _check_readable(parent)
    return parent


def _check_readable(parent: dict[str, Any]) -> None:
    """Refuse a parent the API server could not have stored: its name, namespace, labels
    and data decide every attachment, and an answer about a misread parent would rewrite
    or drop a node's whole index (Metacontroller deletes what the answer leaves out)."""
    metadata = parent["metadata"]
    if not is_dns_subdomain(metadata["name"]):
        raise BadRequest(f"parent name {metadata['name'][:120]!r} is not a name Kubernetes can store")
    namespace = metadata.get("namespace")
    if parent["kind"] == CONFIG_MAP and not is_dns_label(namespace):
        raise BadRequest(f"ConfigMap parent has metadata.namespace {str(namespace)[:120]!r}, not a namespace name")
    if parent["kind"] == NAMESPACE and "namespace" in metadata:
        raise BadRequest("Namespace parent has a metadata.namespace; it is cluster-scoped")
    for where, holder, key in (("metadata.labels", metadata, "labels"), ("data", parent, "data")):
        value = holder.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
            raise BadRequest(f"parent {where} must be a map of strings")
