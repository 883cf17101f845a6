"""Properties of the node index's hooks over generated requests, valid and damaged (CONTRACT §2).

Metacontroller applies a DecoratorController's answer as it is: it creates, updates and
deletes the attachments, so an attachment the API server refuses stalls a node's index
and a missing one takes a node's report away from a model. Every answer is therefore a
400 (``BadRequest``) or a 200 with only the decorator's response fields, a null status
and attachments the index CRDs accept, in OME's namespace, naming only this ConfigMap's
node and models. Last, the two sides together, through the Metacontroller simulator: the
status a model gets through the index is the status OME's controller computes from the
ConfigMaps, on install and after Nodes, ConfigMaps and entries change (sometimes while
the hook is down). Seeded and bounded: the same examples on every run, in a few seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given, settings as hypothesis_settings

from hooks.names import is_dns_label, is_dns_subdomain, is_label_value
from hooks.nodes import decorator
from hooks.nodes.index_objects import (
    API_VERSION as INDEX_API_VERSION,
    INDEXED,
    MODEL_LABEL,
    NODE_GONE,
    NODE_INDEX,
    NODE_INDEX_SUMMARIES,
    NODE_INDEX_SUMMARY,
    NODE_INDEXES,
    NODE_MODEL_STATUS,
    NODE_MODEL_STATUSES,
    RESOURCES,
    SUMMARY_NAME,
    SUMMARY_PARENT_LABEL,
    entry_name,
    model_label,
    node_index_marker,
)
from hooks.nodes.ome_keys import ENTRY_DELETED, STATUS_LABEL, configmap_key, entry_status, is_model_key
from hooks.observed import NODES, BadRequest
from hooks.settings import Settings
from tests.lifecycle import install_node_index
from tests.metacontroller import Simulator, core_hook, manifests
from tests.metacontroller.webhook import Hook
from tests.node_index_strategies import (
    CONFIGMAP_DELETED,
    NODE_DELETED,
    REPORTED,
    AgentWorld,
    Change,
    agent_configmap,
    agent_worlds,
    node_index_requests,
    node_object,
)
from tests.schemas import index_object_errors
from tests.strategies import BOUNDED

DECORATOR_RESPONSE = {"labels", "annotations", "status", "attachments", "resyncAfterSeconds"}
"""Metacontroller's decorator ``SyncHookResponse`` without ``finalized``: the index has no finalize hook."""


def answer(request: Any, settings: Settings) -> dict[str, Any] | None:
    """The hook's answer, or None for a BadRequest; any other exception fails the test."""
    try:
        return decorator.sync(request, settings)
    except BadRequest as refusal:
        assert str(refusal)
        return None


def storable(parent: dict[str, Any]) -> bool:
    """Whether the API server could have stored the parent as the hook read it: a 200 about
    a parent it could not read with certainty would rewrite or drop a node's whole index."""
    metadata = parent["metadata"]
    namespace_ok = is_dns_label(metadata.get("namespace")) if parent["kind"] == "ConfigMap" else "namespace" not in metadata
    labels, data = metadata.get("labels", {}), parent.get("data", {})
    return (is_dns_subdomain(metadata["name"]) and namespace_ok
            and isinstance(labels, dict) and all(isinstance(value, str) for value in labels.values())
            and isinstance(data, dict) and all(isinstance(value, str) for value in data.values()))


def check_attachment(obj: dict[str, Any], settings: Settings) -> None:
    """What the API server checks of a node-index object: its CRD's schema, its name, its labels."""
    assert obj["apiVersion"] == INDEX_API_VERSION
    assert index_object_errors(obj) == []
    metadata = obj["metadata"]
    assert metadata["namespace"] == settings.ome_namespace
    assert is_dns_subdomain(metadata["name"]), metadata["name"]
    assert all(is_label_value(value) for value in metadata.get("labels", {}).values()), metadata


def check_configmap_answer(request: dict[str, Any], settings: Settings, attachments: list[dict[str, Any]]) -> None:
    """Entries name this node and a model key of its data; a node gone keeps only its marker."""
    configmap = request["parent"]
    node, data = configmap["metadata"]["name"], configmap.get("data", {})
    labels = configmap["metadata"].get("labels", {})
    if configmap["metadata"]["namespace"] != settings.ome_namespace or labels.get(STATUS_LABEL) != "true":
        assert attachments == []
        return
    if not any(item["metadata"]["name"] == node for item in request["related"][NODES].values()):
        assert attachments == [node_index_marker(settings.ome_namespace, node, NODE_GONE)]
        return
    held = {key for key, raw in data.items()
            if is_model_key(key) and is_label_value(model_label(key)) and entry_status(raw) != ENTRY_DELETED}
    entries = [obj for obj in attachments if obj["kind"] == NODE_MODEL_STATUS]
    markers = [obj for obj in attachments if obj["kind"] == NODE_INDEX]
    assert len(entries) + len(markers) == len(attachments)
    assert all(marker["metadata"]["name"] == marker["spec"]["node"] == node for marker in markers) and len(markers) <= 1
    assert all(entry["spec"]["node"] == node for entry in entries)
    by_name = {entry_name(node, key): key for key in held}
    assert sorted(entry["metadata"]["name"] for entry in entries) == sorted(by_name), "an entry of the data is missing"
    for entry in entries:
        key = by_name[entry["metadata"]["name"]]
        assert entry["metadata"]["labels"] == {MODEL_LABEL: model_label(key)}
        assert entry["spec"].get("status") == entry_status(data[key])
    if any(marker["spec"]["state"] == INDEXED for marker in markers):
        observed = request["children"][NODE_MODEL_STATUSES].values()
        was_indexed = any(marker["spec"]["state"] == INDEXED for marker in request["children"][NODE_INDEXES].values())
        assert was_indexed or set(by_name) <= {entry["metadata"]["name"] for entry in observed}, \
            "Indexed before every entry exists: models would read the missing ones as 'not held'"


def check_summary_answer(request: dict[str, Any], settings: Settings, attachments: list[dict[str, Any]]) -> None:
    """The one summary lists every marker's node by its state, sorted, and every node it
    listed before that no marker names any more as departed."""
    labels = request["parent"]["metadata"].get("labels", {})
    if labels.get(SUMMARY_PARENT_LABEL) != "true":
        assert attachments == []
        return
    (summary,) = attachments
    assert summary["kind"] == NODE_INDEX_SUMMARY
    markers = [obj for obj in request["related"][NODE_INDEXES].values() if obj["metadata"]["namespace"] == settings.ome_namespace]
    by_state = {state: sorted(obj["spec"]["node"] for obj in markers if obj["spec"]["state"] == state) for state in (INDEXED, NODE_GONE)}
    assert {key: summary["spec"][key] for key in ("indexed", "gone")} == {"indexed": by_state[INDEXED], "gone": by_state[NODE_GONE]}
    listed = {*by_state[INDEXED], *by_state[NODE_GONE]}
    before = {node for obj in request["children"][NODE_INDEX_SUMMARIES].values()
              if (obj["metadata"]["namespace"], obj["metadata"]["name"]) == (settings.ome_namespace, SUMMARY_NAME)
              for key in ("indexed", "gone", "departed") for node in obj["spec"].get(key, [])}
    departed = summary["spec"].get("departed", [])
    assert len(set(departed)) == len(departed) and set(departed) == before - listed, "a node whose ConfigMap went is forgotten"


def _outcome(request: Any, response: dict[str, Any] | None) -> str:
    """How the examples spread, shown by ``--hypothesis-show-statistics``."""
    if response is None:
        return "400"
    kinds = sorted({obj["kind"] for obj in response["attachments"]})
    return f"200 {request['parent']['kind']}: {', '.join(kinds) or 'nothing'}"


@BOUNDED
@given(node_index_requests())
def test_node_index_sync_answers_attachments_the_crds_accept_or_a_400(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    response = answer(request, settings)
    event(_outcome(request, response))
    if response is None:
        return
    assert set(response) <= DECORATOR_RESPONSE and response["status"] is None
    assert not response.get("labels") and not response.get("annotations")
    assert storable(request["parent"]), "a 200 about a parent the API server could not have stored"
    attachments = response["attachments"]
    for obj in attachments:
        check_attachment(obj, settings)
    assert len({(obj["kind"], obj["metadata"]["name"]) for obj in attachments}) == len(attachments)
    if request["parent"]["kind"] == "ConfigMap":
        check_configmap_answer(request, settings, attachments)
    else:
        check_summary_answer(request, settings, attachments)
    assert answer(request, settings) == response


@hypothesis_settings(BOUNDED, max_examples=150)
@given(node_index_requests())
def test_node_index_customize_asks_for_the_configmaps_node_or_the_markers(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    try:
        response = decorator.customize({key: request[key] for key in ("controller", "parent") if key in request}, settings)
    except BadRequest:
        return
    assert set(response) == {"relatedResources"}
    parent = request["parent"]
    for rule in response["relatedResources"]:
        if parent["kind"] == "ConfigMap":
            assert rule == {"apiVersion": "v1", "resource": "nodes", "names": [parent["metadata"]["name"]]}
        else:
            assert rule == {"apiVersion": INDEX_API_VERSION, "resource": RESOURCES[NODE_INDEX], "namespace": settings.ome_namespace}


def ome_status(world: AgentWorld, key: str) -> dict[str, Any]:
    """OME's ``processModelStatus``: the ConfigMaps of live nodes holding the key, Ready and
    Failed entries listed sorted, anything else (other statuses, unparsable) in neither."""
    ready, failed = [], []
    for node, data in world.configmaps.items():
        if node not in world.alive or key not in data:
            continue
        try:
            entry = json.loads(data[key])
        except ValueError:
            continue
        status = entry.get("status") if isinstance(entry, dict) else None
        if status == "Ready":
            ready.append(node)
        elif status == "Failed":
            failed.append(node)
    state = "Ready" if ready else "Failed" if failed else "In_Transit"
    return {"state": state, "nodesReady": sorted(ready), "nodesFailed": sorted(failed)}


def install(world: AgentWorld) -> tuple[Simulator, Outage]:
    """The cluster as the agents left it, OME's status on the models, then the hook's
    controllers installed and given a minute to build the index."""
    sim = Simulator()
    for namespace in {"ome", *(namespace for _, namespace, _, _ in world.models if namespace)}:
        sim.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for node in sorted(world.alive):
        node_object(sim.cluster, node)
    for node, data in sorted(world.configmaps.items()):
        agent_configmap(sim.cluster, node, data, "ome")
    for kind, namespace, name, earlier in world.models:
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        model = sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata,
                                    "spec": {"storage": {"storageUri": f"hf://org/{name[:40]}"}}})
        if earlier:
            sim.cluster.update_status({**model, "status": earlier}, manager="ome-manager")
    hook = Outage(core_hook(Settings(), sim.clock))
    install_node_index(sim, hook)
    for manifest in manifests("compositecontrollers.yaml"):
        sim.add_controller(manifest, hook)
    sim.advance(60)
    return sim, hook


@dataclass
class Outage:
    """The hook, answering 503 while ``down`` (a restart, a rollout)."""

    inner: Hook
    down: bool = False

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return (503, {"error": "restarting"}) if self.down else self.inner(path, body)


def apply(sim: Simulator, change: Change) -> None:
    """One change, made as the cluster makes it (an agent writes to its ConfigMap only while it exists)."""
    configmap = sim.cluster.find("v1", "ConfigMap", "ome", change.node)
    if change.what == NODE_DELETED and sim.cluster.find("v1", "Node", None, change.node) is not None:
        sim.cluster.delete("v1", "Node", None, change.node)
    elif change.what == CONFIGMAP_DELETED and configmap is not None:
        sim.cluster.delete("v1", "ConfigMap", "ome", change.node)
    elif change.what == REPORTED and configmap is not None:
        data = configmap.setdefault("data", {})
        if change.entry is None:
            data.pop(change.key, None)
        else:
            data[change.key] = change.entry
        sim.cluster.update(configmap, manager="model-agent")


def check_statuses(sim: Simulator, world: AgentWorld) -> None:
    """Every model's status is OME's, and no sync failed but for Metacontroller's first look at a new informer."""
    assert [error for error in sim.errors if "related informer not synced yet" not in error and "503" not in error] == []
    for kind, namespace, name, _ in world.models:
        status = sim.cluster.get("ome.io/v1beta1", kind, namespace, name)["status"]
        through_index = {"state": status["state"], "nodesReady": status.get("nodesReady", []),
                         "nodesFailed": status.get("nodesFailed", [])}
        expected = ome_status(world, configmap_key(namespace, name))
        event(f"{expected['state']}, {len(world.configmaps) - len(world.alive & world.configmaps.keys())} node(s) gone")
        assert through_index == expected, name


@hypothesis_settings(BOUNDED, max_examples=30)
@given(agent_worlds())
def test_status_through_the_index_is_omes_status_from_the_configmaps(world: AgentWorld) -> None:
    """Installed over models OME's controller already served, the index built, every
    model's status is what OME's own rules give from the same ConfigMaps and Nodes; and
    again after Nodes, ConfigMaps and entries change, even while the hook is down."""
    sim, hook = install(world)
    check_statuses(sim, world)
    hook.down = world.outage
    for change in world.changes:
        apply(sim, change)
        sim.advance(5)
    hook.down = False
    sim.advance(1200)
    check_statuses(sim, world.changed())
