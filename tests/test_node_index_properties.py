"""Properties of the node index's hooks over generated requests, valid and damaged (CONTRACT §2).

Metacontroller applies a DecoratorController's answer as it is: it creates, updates and
deletes the attachments, so an attachment the API server refuses stalls the index and a
missing one takes a node's report away from a model. Every answer is therefore a 400
(``BadRequest``) or a 200 with only the decorator's response fields, no labels or
annotations, a null status but for a group's own (which its CRD accepts), and
attachments the index CRDs accept, in OME's namespace, whose names, namespaces and kinds
come from the hook's own rules: a ConfigMap's one ``NodeIndex`` named after its node, the
Namespace's 64 ``NodeGroup`` objects, a group's ``NodeModelStatus`` per model of its own
nodes. The same request gives the same answer whatever the order of its maps, and an
answer fed back as Metacontroller feeds it (the attachments as children, a group's status
on the group) is a fixed point after one round. Last, the two stages together, through
the Metacontroller simulator: the status a model gets through the index is the status
OME's controller computes from the ConfigMaps, on install (index or models first, objects
in any order) and after Nodes, ConfigMaps and entries change (sometimes while the hook is
down). Seeded and bounded: the same examples on every run, in a few seconds.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import event, example, given, settings as hypothesis_settings

from hooks.names import is_dns_label, is_dns_subdomain, is_label_value
from hooks.nodes import decorator
from hooks.nodes.index_objects import (
    API_VERSION as INDEX_API_VERSION,
    GROUP_LABEL,
    GROUP_NAMES,
    INDEXED,
    MAX_DEPARTED,
    MODEL_LABEL,
    NODE_GONE,
    NODE_GROUP,
    NODE_GROUPS,
    NODE_INDEX,
    NODE_INDEX_SUMMARIES,
    NODE_INDEX_SUMMARY,
    NODE_INDEXES,
    NODE_MODEL_STATUS,
    NODE_MODEL_STATUSES,
    RESOURCES,
    SUMMARY_NAME,
    entry_name,
    group_of,
    model_label,
    node_group,
    node_index,
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
from tests.schemas import errors_of, index_object_errors, index_schemas
from tests.strategies import BOUNDED

DECORATOR_RESPONSE = {"labels", "annotations", "status", "attachments", "resyncAfterSeconds"}
"""Metacontroller's decorator ``SyncHookResponse`` without ``finalized``: the index has no finalize hook."""
CHILD_TYPES = {NODE_INDEX: NODE_INDEXES, NODE_GROUP: NODE_GROUPS, NODE_MODEL_STATUS: NODE_MODEL_STATUSES,
               NODE_INDEX_SUMMARY: NODE_INDEX_SUMMARIES}


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
    namespace_ok = "namespace" not in metadata if parent["kind"] == "Namespace" else is_dns_label(metadata.get("namespace"))
    labels, data = metadata.get("labels", {}), parent.get("data", {})
    return (is_dns_subdomain(metadata["name"]) and namespace_ok
            and isinstance(labels, dict) and all(isinstance(value, str) for value in labels.values())
            and isinstance(data, dict) and all(isinstance(value, str) for value in data.values()))


def is_derived_group(group: dict[str, Any], settings: Settings) -> bool:
    return (group["metadata"]["namespace"], group["metadata"]["name"]) in {(settings.ome_namespace, name) for name in GROUP_NAMES}


def check_attachment(obj: dict[str, Any], settings: Settings) -> None:
    """What the API server checks of a node-index object: its CRD's schema, its name, its labels."""
    assert obj["apiVersion"] == INDEX_API_VERSION
    assert index_object_errors(obj) == []
    metadata = obj["metadata"]
    assert metadata["namespace"] == settings.ome_namespace
    assert is_dns_subdomain(metadata["name"]), metadata["name"]
    assert all(is_label_value(value) for value in metadata.get("labels", {}).values()), metadata


def check_configmap_answer(request: dict[str, Any], settings: Settings, response: dict[str, Any]) -> None:
    """One ``NodeIndex``, named after the node, of every model key of the data but those
    Deleted or that no model can have; ``NodeGone`` once the Node is gone; nothing for a
    ConfigMap OME does not read."""
    configmap, ome = request["parent"], settings.ome_namespace
    node, data = configmap["metadata"]["name"], configmap.get("data", {})
    labels = configmap["metadata"].get("labels", {})
    assert response["status"] is None
    if configmap["metadata"]["namespace"] != ome or labels.get(STATUS_LABEL) != "true":
        assert response["attachments"] == []
        return
    if not any(item["metadata"]["name"] == node for item in request["related"][NODES].values()):
        assert response["attachments"] == [node_index(ome, node, NODE_GONE, {})]
        return
    held = {key: entry_status(raw) for key, raw in data.items()
            if is_model_key(key) and is_label_value(model_label(key)) and entry_status(raw) != ENTRY_DELETED}
    assert response["attachments"] == [node_index(ome, node, INDEXED, held)], "the node's index is not its entries"
    assert response["attachments"][0]["metadata"]["labels"] == {GROUP_LABEL: group_of(node)}


def check_namespace_answer(request: dict[str, Any], settings: Settings, response: dict[str, Any]) -> None:
    """The 64 groups, metadata only, and the summary of the observed groups' statuses, in
    OME's namespace, held by the hook's Namespace only."""
    assert response["status"] is None
    labels = request["parent"]["metadata"].get("labels", {})
    if labels.get("ome-basemodel-hook.ome.io/node-groups") != "true":
        assert response["attachments"] == []
        return
    assert response["attachments"][:-1] == [node_group(settings.ome_namespace, name) for name in GROUP_NAMES]
    statuses = [obj.get("status") or {} for obj in request["children"][NODE_GROUPS].values()
                if obj["metadata"]["namespace"] == settings.ome_namespace and obj["metadata"]["name"] in GROUP_NAMES]
    spec = response["attachments"][-1]["spec"]
    assert response["attachments"][-1]["metadata"] == {"name": SUMMARY_NAME, "namespace": settings.ome_namespace}
    for key in ("indexed", "gone", "departed"):
        assert set(spec.get(key, [])) == {node for status in statuses for node in status.get(key, [])}, key
    assert spec["indexed"] == sorted(spec["indexed"]) and spec["gone"] == sorted(spec["gone"])


def own_indexes(request: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """The group's ``NodeIndex`` objects: OME's namespace, a node that hashes to the group."""
    name = request["parent"]["metadata"]["name"]
    return [obj for obj in request["related"][NODE_INDEXES].values()
            if obj["metadata"]["namespace"] == settings.ome_namespace and group_of(obj["spec"]["node"]) == name]


def statuses_by_label(objects: list[dict[str, Any]]) -> dict[tuple[str, str], str | None]:
    """(model label, node) -> status, from ``NodeModelStatus`` objects."""
    return {(obj["metadata"]["labels"][MODEL_LABEL], node): status
            for obj in objects for node, status in
            [*obj["spec"]["nodes"].items(), *((node, None) for node in obj["spec"].get("unreadable", []))]}


def check_group_answer(request: dict[str, Any], settings: Settings, response: dict[str, Any]) -> None:
    """Each model's statuses on the group's own nodes, one object per model; a status that
    lists a node indexed only once the observed objects hold all its statuses (or it was
    indexed already), gone as its index says, departed once its index is gone."""
    group = request["parent"]
    if not is_derived_group(group, settings):
        assert response == {"status": None, "attachments": []}
        return
    name, attachments, status = group["metadata"]["name"], response["attachments"], response["status"]
    assert errors_of(index_schemas()[NODE_GROUP]["properties"]["status"], status) == []
    indexes = own_indexes(request, settings)
    wanted = {(model_label(key), obj["spec"]["node"]): value for obj in indexes if obj["spec"]["state"] == INDEXED
              for key, value in [*obj["spec"].get("models", {}).items(), *((key, None) for key in obj["spec"].get("unreadable", []))]}
    assert all(obj["kind"] == NODE_MODEL_STATUS for obj in attachments)
    assert all(obj["metadata"]["name"] == entry_name(name, obj["metadata"]["labels"][MODEL_LABEL]) for obj in attachments)
    assert statuses_by_label(attachments) == wanted, "a model's status on a node of the group is lost or made up"
    observed = statuses_by_label([obj for obj in request["children"][NODE_MODEL_STATUSES].values()
                                  if obj["metadata"]["namespace"] == settings.ome_namespace])
    previous = {key: set(group.get("status", {}).get(key, [])) for key in ("indexed", "gone", "departed")}
    by_state = {state: {obj["spec"]["node"] for obj in indexes if obj["spec"]["state"] == state} for state in (INDEXED, NODE_GONE)}
    indexed, gone, departed = set(status["indexed"]), set(status["gone"]), status.get("departed", [])
    assert status["indexed"] == sorted(indexed) and status["gone"] == sorted(gone)
    assert indexed <= by_state[INDEXED] and by_state[NODE_GONE] <= gone <= by_state[NODE_GONE] | previous["gone"]
    for node in by_state[INDEXED]:
        reflected = all(observed.get(key, ...) == value for key, value in wanted.items() if key[1] == node)
        assert (node in indexed) == (node in previous["indexed"] or reflected), \
            f"{node} indexed before every status of it exists: models would read the missing ones as 'not held'"
        if node not in indexed:
            assert (node in gone) == (node in previous["gone"]), f"{node} flaps between gone and unknown"
    listed = by_state[INDEXED] | by_state[NODE_GONE]
    left = (previous["indexed"] | previous["gone"] | previous["departed"]) - listed
    assert len(set(departed)) == len(departed) <= MAX_DEPARTED and set(departed) <= left
    assert (previous["indexed"] | previous["gone"]) - listed <= set(departed), "a node whose ConfigMap went is forgotten"
    assert len(departed) == min(len(left), MAX_DEPARTED)


def _outcome(request: Any, response: dict[str, Any] | None) -> str:
    """How the examples spread, shown by ``--hypothesis-show-statistics``."""
    if response is None:
        return "400"
    kinds = sorted({obj["kind"] for obj in response["attachments"]})
    return f"200 {request['parent']['kind']}: {', '.join(kinds) or 'nothing'}{', a status' if response['status'] else ''}"


def reordered(request: dict[str, Any]) -> dict[str, Any]:
    """The same request with every object map in the reverse order (Metacontroller's maps
    have none); what is not a map (a damaged request) stays as it is."""
    turned = dict(request)
    for section in ("children", "related"):
        if isinstance(turned.get(section), dict):
            turned[section] = {type_key: dict(reversed(objects.items())) if isinstance(objects, dict) else objects
                               for type_key, objects in reversed(turned[section].items())}
    return turned


def fed_back(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The next request once Metacontroller applied the answer: the attachments are the
    children (an attached group keeps the status its own sync wrote: applying its metadata
    leaves the status subresource alone), a group's status is on the group."""
    again = dict(request)
    if response["status"] is not None:
        again["parent"] = {**request["parent"], "status": copy.deepcopy(response["status"])}
    again["children"] = {type_key: {} for type_key in CHILD_TYPES.values()}
    for obj in copy.deepcopy(response["attachments"]):
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        observed = request.get("children")
        group = observed.get(CHILD_TYPES[obj["kind"]]) if isinstance(observed, dict) else None
        earlier = group.get(key) if isinstance(group, dict) else None
        if obj["kind"] == NODE_GROUP and isinstance(earlier, dict) and "status" in earlier:
            obj["status"] = copy.deepcopy(earlier["status"])
        again["children"].setdefault(CHILD_TYPES[obj["kind"]], {})[key] = obj
    return again


@BOUNDED
@given(node_index_requests())
def test_node_index_sync_answers_what_the_hook_derives_or_a_400(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    response = answer(request, settings)
    event(_outcome(request, response))
    if response is None:
        return
    assert set(response) <= DECORATOR_RESPONSE
    assert not response.get("labels") and not response.get("annotations"), "the parent is written"
    assert storable(request["parent"]), "a 200 about a parent the API server could not have stored"
    attachments = response["attachments"]
    for obj in attachments:
        check_attachment(obj, settings)
    assert len({(obj["kind"], obj["metadata"]["name"]) for obj in attachments}) == len(attachments)
    {"ConfigMap": check_configmap_answer, "Namespace": check_namespace_answer, NODE_GROUP: check_group_answer}[
        request["parent"]["kind"]](request, settings, response)
    assert answer(request, settings) == response
    assert answer(reordered(request), settings) == response, "the answer depends on the order of a map"


@hypothesis_settings(BOUNDED, max_examples=200)
@given(node_index_requests())
def test_node_index_answer_fed_back_is_a_fixed_point(drawn: tuple[dict[str, Any], Settings]) -> None:
    """Fed back once, the answer keeps its attachments and indexes every node whose index
    is Indexed; fed back again, it is the same: no sync loop, and the index completes."""
    request, settings = drawn
    first = answer(request, settings)
    if first is None:
        return
    again = fed_back(request, first)
    second = answer(again, settings)
    assert second is not None and second["attachments"] == first["attachments"]
    assert answer(fed_back(again, second), settings) == second
    if request["parent"]["kind"] == NODE_GROUP and second["status"] is not None:
        nodes = {obj["spec"]["node"] for obj in own_indexes(request, settings) if obj["spec"]["state"] == INDEXED}
        assert set(second["status"]["indexed"]) == nodes, "a node's statuses are all there and it is still not indexed"
    else:
        assert second == first


@hypothesis_settings(BOUNDED, max_examples=150)
@given(node_index_requests())
def test_node_index_customize_asks_for_the_configmaps_node_or_the_groups_indexes(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    try:
        response = decorator.customize({key: request[key] for key in ("controller", "parent") if key in request}, settings)
    except BadRequest:
        return
    assert set(response) == {"relatedResources"}
    parent = request["parent"]
    rules = response["relatedResources"]
    if parent["kind"] == "ConfigMap":
        assert all(rule == {"apiVersion": "v1", "resource": "nodes", "names": [parent["metadata"]["name"]]} for rule in rules)
    elif parent["kind"] == NODE_GROUP and is_derived_group(parent, settings):
        assert rules == [{"apiVersion": INDEX_API_VERSION, "resource": RESOURCES[NODE_INDEX], "namespace": settings.ome_namespace,
                          "labelSelector": {"matchLabels": {GROUP_LABEL: parent["metadata"]["name"]}}}]
    else:
        assert rules == []


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
    """The cluster as the agents left it (its nodes in the world's order), OME's status on
    the models, then the hook's controllers installed (the index first, or the models'
    controllers first and the index a minute later) until the cluster settles."""
    sim = Simulator()
    for namespace in {"ome", *(namespace for _, namespace, _, _ in world.models if namespace)}:
        sim.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for node in world.order:
        if node in world.alive:
            node_object(sim.cluster, node)
        if node in world.configmaps:
            agent_configmap(sim.cluster, node, world.configmaps[node], "ome")
    for kind, namespace, name, earlier in world.models:
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        model = sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata,
                                    "spec": {"storage": {"storageUri": f"hf://org/{name[:40]}"}}})
        if earlier:
            sim.cluster.update_status({**model, "status": earlier}, manager="ome-manager")
    hook = Outage(core_hook(Settings(), sim.clock))
    if world.index_first:
        install_node_index(sim, hook)
    for manifest in manifests("compositecontrollers.yaml"):
        sim.add_controller(manifest, hook)
    if not world.index_first:
        sim.advance(60)
        install_node_index(sim, hook)
    settle(sim)
    return sim, hook


INDEX_KINDS = ("NodeIndex", "NodeGroup", "NodeModelStatus")


def held(sim: Simulator) -> list[Any]:
    """What the models and the index say: their statuses and specs."""
    objects = [obj for kind in ("BaseModel", "ClusterBaseModel") for obj in sim.cluster.list("ome.io/v1beta1", kind)]
    objects += [obj for kind in INDEX_KINDS for obj in sim.cluster.list(INDEX_API_VERSION, kind)]
    return [(obj["kind"], obj["metadata"]["name"], obj.get("spec"), obj.get("status")) for obj in objects]


def settle(sim: Simulator, most_minutes: int = 30) -> None:
    """Run a minute at a time until a minute changes nothing the models or the index say;
    an index or a status that keeps changing fails."""
    before = held(sim)
    for _ in range(most_minutes):
        sim.advance(60)
        now = held(sim)
        if now == before:
            return
        before = now
    raise AssertionError(f"the index or a model's status still changes after {most_minutes} minutes")


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


READY_ENTRY = '{"name":"mistral-7b","status":"Ready"}'
MISTRAL = configmap_key(None, "mistral-7b")
DEPARTED_WHILE_DOWN = AgentWorld(
    frozenset({"node-a", "node-b"}), {"node-a": {MISTRAL: READY_ENTRY}, "node-b": {MISTRAL: READY_ENTRY}},
    (("ClusterBaseModel", None, "mistral-7b", {"state": "Ready", "nodesReady": ["node-a", "node-b"]}),),
    (Change(CONFIGMAP_DELETED, "node-a"), Change(NODE_DELETED, "node-b")), outage=True, order=("node-b", "node-a"))
"""Both ways a node leaves, while the hook is down: the model never sees the moment, only
the groups' lists can tell it (a ConfigMap deleted leaves no NodeIndex to say NodeGone)."""


@hypothesis_settings(BOUNDED, max_examples=10)
@given(agent_worlds())
@example(DEPARTED_WHILE_DOWN)
@example(replace(DEPARTED_WHILE_DOWN, outage=False, index_first=False))
def test_status_through_the_index_is_omes_status_from_the_configmaps(world: AgentWorld) -> None:
    """Installed over models OME's controller already served, in any order, once the
    cluster settles every model's status is what OME's own rules give from the same
    ConfigMaps and Nodes; and again after Nodes, ConfigMaps and entries change, even while
    the hook is down."""
    sim, hook = install(world)
    check_statuses(sim, world)
    hook.down = world.outage
    for change in world.changes:
        apply(sim, change)
        sim.advance(5)
    hook.down = False
    settle(sim)
    check_statuses(sim, world.changed())
