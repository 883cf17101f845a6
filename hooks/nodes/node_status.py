"""The node flow: status of a model that OME's model agents download to each node.

The agents report per node in a ConfigMap (named after the node) holding one JSON entry
per model; OME's Go controller turns those into ``nodesReady``, ``nodesFailed`` and
``state``. This hook replaces that controller, so it reproduces its rules exactly,
including the key format with its hash truncation of long names.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from hooks.conditions import FALSE, READY_CONDITION, TRUE, Condition
from hooks.observed import Model, field
from hooks.states import FAILED, IN_TRANSIT, READY

STATUS_LABEL = "models.ome/basemodel-status"
MAX_KEY_LENGTH = 253
SHOWN_NODES = 10

ENTRY_READY = "Ready"
ENTRY_FAILED = "Failed"
ENTRY_DELETED = "Deleted"


def truncate_with_hash(text: str, limit: int) -> str:
    """OME's truncation: keep the end of the text behind an 8-hex SHA-256 prefix."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    keep = limit - len(digest) - 1
    if keep <= 0:
        return digest[:limit]
    return f"{digest}-{text[-keep:]}"


def configmap_key(namespace: str | None, name: str) -> str:
    """The data key of a model in a node's ConfigMap (OME's GetModelConfigMapKey)."""
    if namespace is None:
        prefix = "clusterbasemodel"
        return f"{prefix}.{truncate_with_hash(name, MAX_KEY_LENGTH - len(prefix) - 1)}"
    budget = MAX_KEY_LENGTH - len("basemodel.") - 1
    if len(namespace) + len(name) > budget:
        if len(namespace) > 8:
            namespace, name_budget = truncate_with_hash(namespace, 8), budget - 8
        else:
            name_budget = budget - len(namespace)
        name = truncate_with_hash(name, name_budget)
    return f"{namespace}.basemodel.{name}"


def customize_rules(ome_namespace: str) -> list[dict[str, Any]]:
    """The agents' ConfigMaps, and the Nodes, so reports of deleted nodes can be ignored."""
    return [
        {
            "apiVersion": "v1",
            "resource": "configmaps",
            "namespace": ome_namespace,
            "labelSelector": {"matchLabels": {STATUS_LABEL: "true"}},
        },
        {"apiVersion": "v1", "resource": "nodes", "labelSelector": {}},
    ]


@dataclass(frozen=True)
class NodeReport:
    """What the live nodes say about one model."""

    ready: tuple[str, ...]
    failed: tuple[str, ...]
    holding: tuple[str, ...]

    @property
    def state(self) -> str:
        """OME's rule: Ready if any node is ready, else Failed if any failed, else In_Transit."""
        if self.ready:
            return READY
        return FAILED if self.failed else IN_TRANSIT


def read_node_report(
    model: Model, configmaps: list[dict[str, Any]], nodes: list[dict[str, Any]], ome_namespace: str
) -> NodeReport:
    """Collect this model's entries from the ConfigMaps of nodes that still exist.

    A ConfigMap of a deleted node is skipped for deletion too: OME's controller deleted
    such ConfigMaps itself, and with that controller replaced nobody else will, so waiting
    on one would hold the model's deletion forever.
    """
    key = configmap_key(model.namespace, model.name)
    live = {node["metadata"]["name"] for node in nodes}
    ready, failed, holding = set(), set(), set()
    for configmap in configmaps:
        metadata = configmap["metadata"]
        node = metadata["name"]
        labels = field(metadata, "labels")
        data = field(configmap, "data")
        if metadata.get("namespace") != ome_namespace or labels.get(STATUS_LABEL) != "true":
            continue
        if node not in live or key not in data:
            continue
        status = _entry_status(data[key])
        if status != ENTRY_DELETED:
            holding.add(node)
        if status == ENTRY_READY:
            ready.add(node)
        elif status == ENTRY_FAILED:
            failed.add(node)
    return NodeReport(tuple(sorted(ready)), tuple(sorted(failed)), tuple(sorted(holding)))


def _entry_status(raw: Any) -> str | None:
    """An entry's status, or None when it does not parse (it still holds deletion back)."""
    try:
        entry = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    status = entry.get("status") if isinstance(entry, dict) else None
    return status if isinstance(status, str) else None


def name_nodes(nodes: tuple[str, ...]) -> str:
    """A readable list that stays short on clusters with hundreds of nodes."""
    shown = ", ".join(nodes[:SHOWN_NODES])
    more = len(nodes) - SHOWN_NODES
    return f"{shown} and {more} more" if more > 0 else shown


def node_condition(report: NodeReport, finalizing: bool) -> Condition:
    """A Ready condition so a person sees why a node-flow model is not Ready."""
    if finalizing:
        if report.holding:
            return Condition(
                READY_CONDITION,
                FALSE,
                "WaitingForNodes",
                f"deleting: waiting for nodes {name_nodes(report.holding)} to delete the model",
            )
        return Condition(READY_CONDITION, FALSE, "Deleted", "deleting: no node holds the model any more")
    if report.ready:
        return Condition(READY_CONDITION, TRUE, "NodesReady", f"ready on {len(report.ready)} node(s): {name_nodes(report.ready)}")
    if report.failed:
        return Condition(
            READY_CONDITION,
            FALSE,
            "NodesFailed",
            f"failed on {len(report.failed)} node(s): {name_nodes(report.failed)}; "
            "see the model agent's logs on those nodes",
        )
    return Condition(
        READY_CONDITION,
        FALSE,
        "WaitingForNodes",
        "no node has reported the model ready yet; OME's model agents download it to the "
        "nodes matching spec.storage.nodeSelector and nodeAffinity",
    )
