"""The node flow: status of a model that OME's model agents download to each node.

The agents report per node in a ConfigMap (named after the node) holding one JSON entry
per model; OME's Go controller turns those into ``nodesReady``, ``nodesFailed`` and
``state``. This hook replaces that controller and reproduces its rules exactly, but it
does not read the ConfigMaps and Nodes themselves: at a thousand nodes they weigh
hundreds of megabytes per sync, and every Node heartbeat would wake every model. It reads
the node index instead (``hooks/nodes/index_objects.py``): its own ``NodeModelStatus``
objects, one per group of nodes holding it, and the ``NodeIndexSummary`` naming the
nodes whose ConfigMap is indexed, the nodes that are gone and those that departed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hooks.conditions import FALSE, READY_CONDITION, TRUE, Condition
from hooks.nodes.index_objects import (
    API_VERSION,
    MODEL_LABEL,
    NODE_INDEX_SUMMARY,
    NODE_MODEL_STATUS,
    RESOURCES,
    SUMMARY_NAME,
    model_label,
    read_node_model_status,
    read_summary,
)
from hooks.nodes.ome_keys import ENTRY_DELETED, ENTRY_FAILED, ENTRY_READY, configmap_key
from hooks.observed import Model
from hooks.states import FAILED, IN_TRANSIT, READY

SHOWN_NODES = 10


def customize_rules(model: Model, ome_namespace: str) -> list[dict[str, Any]]:
    """This model's statuses (by its label, so another model's entry never wakes it) and
    the summary (which changes only when nodes are indexed, go or depart)."""
    key = configmap_key(model.namespace, model.name)
    return [
        {
            "apiVersion": API_VERSION,
            "resource": RESOURCES[NODE_MODEL_STATUS],
            "namespace": ome_namespace,
            "labelSelector": {"matchLabels": {MODEL_LABEL: model_label(key)}},
        },
        {
            "apiVersion": API_VERSION,
            "resource": RESOURCES[NODE_INDEX_SUMMARY],
            "namespace": ome_namespace,
            "names": [SUMMARY_NAME],
        },
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
    model: Model, entries: list[dict[str, Any]], summaries: list[dict[str, Any]], ome_namespace: str
) -> NodeReport:
    """What the live nodes say about this model, node by node.

    - A node the summary lists as gone or departed is ignored, its entries too (they are
      being deleted): OME skips the ConfigMap of a deleted Node, and a deleted ConfigMap
      is not there to read.
    - A node with an entry for this model reports that entry's status, whether or not
      its index is complete: the entry is the agent's own word.
    - A node the summary lists as indexed, with no entry, does not hold the model.
    - A node the index does not know yet (first install, a new node, a ConfigMap still
      being indexed) keeps what this model's status already said about it. Without this
      a Ready model would pass through In_Transit while its index is built, because
      "no entry yet" would look like "no node holds it".

    Deletion waits for every node that holds the model (an entry that does not parse
    holds it too): OME's controller deleted the ConfigMaps of deleted nodes itself, and
    with that controller replaced nobody else will, so a gone node must not hold it.
    """
    label = model_label(configmap_key(model.namespace, model.name))
    known = read_summary(summaries, ome_namespace)
    reported: dict[str, str | None] = {}
    for obj in entries:
        if obj["metadata"].get("namespace") != ome_namespace:
            continue
        entry_label, statuses = read_node_model_status(obj)
        if entry_label == label:
            reported.update(statuses)
    previous_ready, previous_failed = _listed(model.status, "nodesReady"), _listed(model.status, "nodesFailed")
    ready, failed, holding = set(), set(), set()
    for node in reported.keys() | previous_ready | previous_failed:
        if node in known.ignored:
            continue
        if node in reported:
            status = reported[node]
        elif node in known.indexed:
            continue
        else:
            status = ENTRY_READY if node in previous_ready else ENTRY_FAILED
        if status != ENTRY_DELETED:
            holding.add(node)
        if status == ENTRY_READY:
            ready.add(node)
        elif status == ENTRY_FAILED:
            failed.add(node)
    return NodeReport(tuple(sorted(ready)), tuple(sorted(failed)), tuple(sorted(holding)))


def _listed(status: dict[str, Any], name: str) -> set[str]:
    """The node names a status field lists; anything else in it is ignored."""
    names = status.get(name)
    return {node for node in names if isinstance(node, str)} if isinstance(names, list) else set()


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
