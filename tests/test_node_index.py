"""The node index's DecoratorController hooks, parent by parent.

- a model-status ConfigMap and its Node in, the node's ``NodeIndex`` out;
- the hook's Namespace in, the 64 ``NodeGroup`` objects out;
- a ``NodeGroup`` and the ``NodeIndex`` objects of its nodes in, one ``NodeModelStatus``
  per model and the group's status out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from hooks.nodes import decorator
from hooks.nodes.index_objects import (
    API_VERSION,
    GROUP_COUNT,
    GROUP_LABEL,
    GROUP_NAMES,
    GROUPS_PARENT_LABEL,
    INDEXED,
    MAX_DEPARTED,
    MODEL_LABEL,
    NODE_GONE,
    NODE_GROUPS,
    NODE_INDEXES,
    NODE_INDEX_SUMMARIES,
    NODE_MODEL_STATUSES,
    entry_name,
    group_of,
    model_label,
    node_group_status,
    node_index,
    node_model_status,
)
from hooks.nodes.ome_keys import STATUS_LABEL
from hooks.observed import BadRequest
from hooks.settings import Settings
from tests import golden

SETTINGS = Settings()
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LLAMA = "models.basemodel.llama-3.1-8b-instruct"
QWEN = "models.basemodel.qwen2.5-7b-instruct"
MISTRAL = "clusterbasemodel.mistral-7b-instruct-v0.3"
ATTACHMENT_TYPES = (NODE_INDEXES, NODE_GROUPS, NODE_MODEL_STATUSES, NODE_INDEX_SUMMARIES)

# Four nodes of one group, and one of another: group_of is a hash, so these are found, not chosen.
GROUP = group_of("10.0.10.105")
A, B, C, D = (f"10.0.10.{n}" for n in (51, 90, 105, 250))
OTHER_GROUP_NODE = "10.0.10.212"


def entry(status: str) -> str:
    return json.dumps({"name": "m", "status": status, "config": {"modelType": "llama"}})


def keyed(objects: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/"): o for o in objects}


def children(observed: Sequence[dict[str, Any]] = ()) -> dict[str, dict[str, Any]]:
    """Every attachment type the DecoratorController declares, as Metacontroller sends them."""
    groups: dict[str, dict[str, Any]] = {type_key: {} for type_key in ATTACHMENT_TYPES}
    for obj in observed:
        groups[f"{obj['kind']}.{obj['apiVersion']}"].update(keyed([obj]))
    return groups


def kinds(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in answer["attachments"]]


# --------------------------------------------------------------------------
# Stage 1: a ConfigMap and its Node -> one NodeIndex
# --------------------------------------------------------------------------


def configmap(node: str = C, data: dict[str, str] | None = None, namespace: str = "ome",
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": node, "namespace": namespace, "uid": f"uid-{node}", "resourceVersion": "51918015",
                     "labels": {STATUS_LABEL: "true", "node": node} if labels is None else labels},
        "data": {LLAMA: entry("Ready"), QWEN: entry("Updating")} if data is None else data,
    }


def node(name: str = C) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-node-{name}"}}


def sync_configmap(cm: dict[str, Any], nodes: Sequence[dict[str, Any]] = (), observed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    body = {"controller": {}, "parent": cm, "children": children(observed), "related": {"Node.v1": keyed(nodes)},
            "finalizing": False}
    return decorator.sync(body, SETTINGS)


def test_configmap_asks_for_its_own_node_by_name_only() -> None:
    """By name, so a Node's heartbeat wakes its own ConfigMap's sync and no other."""
    answer = decorator.customize({"controller": {}, "parent": configmap()}, SETTINGS)
    assert answer == {"relatedResources": [{"apiVersion": "v1", "resource": "nodes", "names": [C]}]}


@pytest.mark.parametrize("cm", [configmap(namespace="kube-system"), configmap(labels={"node": C})],
                         ids=["other-namespace", "unlabelled"])
def test_configmap_ome_would_not_read_gets_no_rule_and_no_attachment(cm: dict[str, Any]) -> None:
    """Metacontroller asks customize for every ConfigMap it caches, selected or not."""
    assert decorator.customize({"parent": cm}, SETTINGS) == {"relatedResources": []}
    assert decorator.sync({"parent": cm, "children": {}, "related": {}}, SETTINGS) == {"status": None, "attachments": []}


def test_configmap_with_its_node_gives_one_nodeindex_of_each_models_status() -> None:
    answer = sync_configmap(configmap(), [node()])
    assert answer == {"status": None, "attachments": [{
        "apiVersion": API_VERSION,
        "kind": "NodeIndex",
        "metadata": {"name": C, "namespace": "ome", "labels": {GROUP_LABEL: GROUP}},
        "spec": {"node": C, "state": INDEXED, "models": {LLAMA: "Ready", QWEN: "Updating"}},
    }]}


def test_nodeindex_is_the_same_whatever_the_order_of_the_entries() -> None:
    """The same statuses give the same bytes, so Metacontroller writes nothing."""
    forward = configmap(data={LLAMA: entry("Ready"), QWEN: entry("Failed"), MISTRAL: "{"})
    backward = configmap(data=dict(reversed(forward["data"].items())))
    assert json.dumps(sync_configmap(forward, [node()])) == json.dumps(sync_configmap(backward, [node()]))


def test_node_gone_gives_a_nodegone_index_without_models() -> None:
    """OME ignores a deleted node's reports; the models drop it at once instead of waiting."""
    (index,) = sync_configmap(configmap(), [])["attachments"]
    assert index["spec"] == {"node": C, "state": NODE_GONE}
    assert index["metadata"]["labels"] == {GROUP_LABEL: GROUP}


def test_node_back_is_indexed_again_from_its_entries() -> None:
    """Stage 1 keeps no memory: the ConfigMap and its Node alone decide the NodeIndex."""
    gone = sync_configmap(configmap(), [])["attachments"]
    (index,) = sync_configmap(configmap(), [node()], gone)["attachments"]
    assert index["spec"]["state"] == INDEXED and index["spec"]["models"] == {LLAMA: "Ready", QWEN: "Updating"}


def test_deleted_entries_and_keys_that_name_no_model_are_left_out() -> None:
    cm = configmap(data={LLAMA: entry("Deleted"), QWEN: entry("Failed"), "agent-version": "v0.1.5"})
    (index,) = sync_configmap(cm, [node()])["attachments"]
    assert index["spec"] == {"node": C, "state": INDEXED, "models": {QWEN: "Failed"}}


@pytest.mark.parametrize("key", ["x.basemodel.y-", ".basemodel.z", "team-a.basemodel.draft_"])
def test_key_no_model_can_have_is_left_out(key: str) -> None:
    """OME maps these to a model, but no BaseModel's DNS names give them: their label would
    be refused by the API server, and the node's whole group with it."""
    (index,) = sync_configmap(configmap(data={key: entry("Ready"), LLAMA: entry("Ready")}), [node()])["attachments"]
    assert index["spec"]["models"] == {LLAMA: "Ready"} and "unreadable" not in index["spec"]


@pytest.mark.parametrize("raw", ["{not json", json.dumps({"name": "m"}), json.dumps({"status": 3}), "[]"],
                         ids=["not-json", "no-status", "status-not-text", "not-an-object"])
def test_entry_that_does_not_parse_is_listed_unreadable(raw: str) -> None:
    """OME counts such a node as holding the model (deletion waits), neither ready nor failed."""
    (index,) = sync_configmap(configmap(data={LLAMA: raw, QWEN: entry("Ready")}), [node()])["attachments"]
    assert index["spec"] == {"node": C, "state": INDEXED, "models": {QWEN: "Ready"}, "unreadable": [LLAMA]}


def test_configmap_without_model_entries_is_indexed_as_holding_nothing() -> None:
    (index,) = sync_configmap(configmap(data={}), [node()])["attachments"]
    assert index["spec"] == {"node": C, "state": INDEXED, "models": {}}


@pytest.mark.parametrize(("metadata", "data", "refusal"), [
    ({"name": "Node_A"}, {}, "not a name"),
    ({"namespace": None}, {}, "not a namespace"),
    ({"labels": None}, {}, "labels must be a map"),
    ({"labels": {STATUS_LABEL: True}}, {}, "labels must be a map"),
    ({}, {"data": [LLAMA]}, "data must be a map"),
    ({}, {"data": {LLAMA: {"status": "Ready"}}}, "data must be a map"),
], ids=["name", "namespace", "labels-null", "label-not-text", "data-list", "entry-not-text"])
def test_configmap_the_api_server_could_not_store_is_refused_rather_than_reindexed(
        metadata: dict[str, Any], data: dict[str, Any], refusal: str) -> None:
    """Its name, namespace, labels and data decide the NodeIndex: a 200 about a misread
    ConfigMap would drop or rewrite the node's index."""
    cm = configmap()
    cm["metadata"].update(metadata)
    cm.update(data)
    with pytest.raises(BadRequest, match=refusal):
        sync_configmap(cm, [node()])


def test_missing_node_group_is_refused_rather_than_read_as_node_gone() -> None:
    body = {"parent": configmap(), "children": children(), "related": {}}
    with pytest.raises(BadRequest, match="Node.v1"):
        decorator.sync(body, SETTINGS)


def test_missing_node_group_is_a_400_over_http_and_no_nodegone() -> None:
    reply = golden.client().post("/nodes/sync", json={"parent": configmap(), "children": children(), "related": {}})
    assert reply.status_code == 400
    assert "Node.v1" in reply.get_json()["error"]


def test_hook_version_v1_is_refused() -> None:
    """v1 would drop the cluster-scoped Node and the index would call every node gone."""
    with pytest.raises(BadRequest, match="v2"):
        decorator.sync({"object": configmap(), "attachments": {}, "related": {}}, SETTINGS)


@pytest.mark.parametrize(
    ("body", "said"),
    [([], "JSON object"), ({"related": {}}, "no 'parent' object"),
     ({"parent": {"apiVersion": "v1", "kind": "ConfigMap"}}, "no metadata.name")],
    ids=["not-an-object", "no-parent", "parent-without-name"],
)
def test_request_without_a_readable_parent_is_refused(body: Any, said: str) -> None:
    with pytest.raises(BadRequest, match=said):
        decorator.sync(body, SETTINGS)


@pytest.mark.parametrize("parent", [
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "ome"}},
    {"apiVersion": "v1", "kind": "NodeGroup", "metadata": {"name": "nodes-00", "namespace": "ome"}},
    {"apiVersion": "ome-basemodel-hook.ome.io/v1beta1", "kind": "NodeGroup", "metadata": {"name": "nodes-00", "namespace": "ome"}},
], ids=["other-kind", "kind-in-the-wrong-group", "other-version"])
def test_parent_the_index_does_not_serve_is_refused(parent: dict[str, Any]) -> None:
    for hook in (decorator.customize, decorator.sync):
        with pytest.raises(BadRequest, match="not served"):
            hook({"parent": parent, "children": {}, "related": {}}, SETTINGS)


# --------------------------------------------------------------------------
# The hook's Namespace -> the 64 NodeGroups
# --------------------------------------------------------------------------


def namespace(labelled: bool = True) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": "ome-basemodel-hook"}
    if labelled:
        labels[GROUPS_PARENT_LABEL] = "true"
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ome-basemodel-hook", "uid": "uid-ns", "labels": labels}}


def sync_namespace(parent: dict[str, Any], observed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return decorator.sync({"parent": parent, "children": children(observed), "related": {}}, SETTINGS)


def test_labelled_namespace_holds_the_64_groups_in_omes_namespace_without_spec() -> None:
    answer = sync_namespace(namespace())
    assert answer["status"] is None
    groups = answer["attachments"][:-1]
    assert [o["metadata"] for o in groups] == [{"name": f"nodes-{n:02d}", "namespace": "ome"} for n in range(64)]
    assert {(o["apiVersion"], o["kind"]) for o in groups} == {(API_VERSION, "NodeGroup")}
    assert all(set(o) == {"apiVersion", "kind", "metadata"} for o in groups)


def test_namespace_without_group_statuses_holds_an_empty_summary() -> None:
    """First install: no node is known yet, so every model keeps what its status says."""
    summary = sync_namespace(namespace())["attachments"][-1]
    assert summary == {"apiVersion": API_VERSION, "kind": "NodeIndexSummary",
                       "metadata": {"name": "nodes", "namespace": "ome"}, "spec": {"indexed": [], "gone": []}}


def stored_group(name: str, status: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "NodeGroup", "metadata": {"name": name, "namespace": "ome"}}
    return obj if status is None else {**obj, "status": status}


def test_summary_folds_every_groups_status_sorted_and_departed_group_by_group() -> None:
    observed = [
        stored_group(GROUP_NAMES[0], node_group_status([B], [], ("gone-1", "gone-0"))),
        stored_group(GROUP_NAMES[1], node_group_status([A], [C])),
        stored_group(GROUP_NAMES[2], None),
    ]
    spec = sync_namespace(namespace(), observed)["attachments"][-1]["spec"]
    assert spec["indexed"] == sorted([A, B]) and spec["gone"] == [C]
    assert spec["departed"] == ["gone-1", "gone-0"]


def test_summary_ignores_groups_the_hook_does_not_derive() -> None:
    stray = stored_group("nodes-64", node_group_status([A], [B]))
    other = {**stored_group("nodes-00", node_group_status([C], [])), "metadata": {"name": "nodes-00", "namespace": "default"}}
    assert sync_namespace(namespace(), [stray, other])["attachments"][-1]["spec"] == {"indexed": [], "gone": []}


def test_summary_of_a_group_status_that_cannot_be_read_is_refused() -> None:
    with pytest.raises(BadRequest, match="NodeGroup 'nodes-00'"):
        sync_namespace(namespace(), [stored_group("nodes-00", {"indexed": "10.0.10.105", "gone": []})])


def test_namespace_sync_without_its_groups_is_refused_rather_than_forgetting_every_node() -> None:
    """An empty summary would make every model forget which nodes departed."""
    observed = {type_key: {} for type_key in ATTACHMENT_TYPES if type_key != NODE_GROUPS}
    with pytest.raises(BadRequest, match=re.escape(NODE_GROUPS)):
        decorator.sync({"parent": namespace(), "children": observed, "related": {}}, SETTINGS)


def test_unlabelled_namespace_gets_no_groups() -> None:
    """Metacontroller asks about every Namespace it knows."""
    assert sync_namespace(namespace(labelled=False)) == {"status": None, "attachments": []}


def test_namespace_asks_for_no_related_objects() -> None:
    for labelled in (True, False):
        assert decorator.customize({"parent": namespace(labelled)}, SETTINGS) == {"relatedResources": []}


def test_namespace_with_unreadable_labels_is_refused_rather_than_emptied() -> None:
    """An empty answer would have Metacontroller delete every group, and every model's statuses with them."""
    parent = namespace()
    parent["metadata"]["labels"] = None
    with pytest.raises(BadRequest, match="labels must be a map"):
        sync_namespace(parent)


# --------------------------------------------------------------------------
# Stage 2: a NodeGroup and its NodeIndexes -> NodeModelStatus per model, and its status
# --------------------------------------------------------------------------


def group(name: str = GROUP, status: dict[str, Any] | None = None, namespace_: str = "ome") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "NodeGroup",
                           "metadata": {"name": name, "namespace": namespace_, "uid": f"uid-{name}", "generation": 1}}
    if status is not None:
        obj["status"] = status
    return obj


def indexed(node_name: str, models: dict[str, str | None]) -> dict[str, Any]:
    return node_index("ome", node_name, INDEXED, models)


def gone(node_name: str) -> dict[str, Any]:
    return node_index("ome", node_name, NODE_GONE, {})


def sync_group(parent: dict[str, Any], indexes: Sequence[dict[str, Any]], observed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    body = {"controller": {}, "parent": parent, "children": children(observed), "related": {NODE_INDEXES: keyed(indexes)},
            "finalizing": False}
    return decorator.sync(body, SETTINGS)


def fed_back(parent: dict[str, Any], indexes: Sequence[dict[str, Any]], rounds: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """The group after Metacontroller wrote ``rounds`` answers: status, then the attachments."""
    answer = sync_group(parent, indexes)
    for _ in range(rounds):
        parent = group(parent["metadata"]["name"], answer["status"])
        answer = sync_group(parent, indexes, answer["attachments"])
    return parent, answer


def test_group_asks_for_the_nodeindexes_labelled_with_its_name() -> None:
    answer = decorator.customize({"parent": group()}, SETTINGS)
    assert answer == {"relatedResources": [{
        "apiVersion": API_VERSION, "resource": "nodeindexes", "namespace": "ome",
        "labelSelector": {"matchLabels": {GROUP_LABEL: GROUP}},
    }]}


def test_group_gives_one_nodemodelstatus_per_model_with_each_nodes_status() -> None:
    answer = sync_group(group(), [indexed(C, {LLAMA: "Ready", QWEN: "Updating"}), indexed(A, {LLAMA: "Failed", MISTRAL: None})])
    assert answer["attachments"] == sorted([
        node_model_status("ome", GROUP, LLAMA, {A: "Failed", C: "Ready"}),
        node_model_status("ome", GROUP, QWEN, {C: "Updating"}),
        node_model_status("ome", GROUP, MISTRAL, {A: None}),
    ], key=lambda o: o["metadata"]["labels"][MODEL_LABEL])
    by_label = {o["metadata"]["labels"][MODEL_LABEL]: o for o in answer["attachments"]}
    assert by_label[LLAMA]["metadata"]["name"] == entry_name(GROUP, LLAMA)
    assert by_label[LLAMA]["spec"] == {"nodes": {A: "Failed", C: "Ready"}}
    assert by_label[MISTRAL]["spec"] == {"nodes": {}, "unreadable": [A]}


def test_group_answer_is_the_same_bytes_whatever_the_order_of_its_indexes() -> None:
    indexes = [indexed(C, {LLAMA: "Ready", QWEN: "Updating"}), indexed(A, {QWEN: "Failed"}), gone(D), indexed(B, {})]
    observed = sync_group(group(), indexes)["attachments"]
    first = sync_group(group(status=node_group_status([B], [D])), indexes, observed)
    again = sync_group(group(status=node_group_status([B], [D])), list(reversed(indexes)), list(reversed(observed)))
    assert json.dumps(first) == json.dumps(again)
    assert first["status"] == {"indexed": sorted([A, B, C]), "gone": [D]}


def test_first_sync_indexes_no_node_whose_statuses_are_not_yet_written() -> None:
    """Metacontroller writes the status before the attachments: "indexed" before its
    statuses exist would tell every model the node holds nothing."""
    answer = sync_group(group(), [indexed(C, {LLAMA: "Ready"}), indexed(A, {QWEN: "Failed"})])
    assert answer["status"] == {"indexed": [], "gone": []}


def test_node_without_any_model_is_indexed_at_once() -> None:
    """Nothing to wait for: it holds no model."""
    assert sync_group(group(), [indexed(B, {})])["status"] == {"indexed": [B], "gone": []}


def test_node_is_indexed_once_the_observed_children_reflect_every_status() -> None:
    indexes = [indexed(C, {LLAMA: "Ready", QWEN: "Updating"}), indexed(A, {LLAMA: "Failed"})]
    _, answer = fed_back(group(), indexes)
    assert answer["status"] == {"indexed": sorted([A, C]), "gone": []}


def test_node_with_one_status_not_yet_reflected_is_not_indexed() -> None:
    """A's statuses are all written; C's QWEN status is not (its object still says Ready)."""
    indexes = [indexed(C, {LLAMA: "Ready", QWEN: "Updating"}), indexed(A, {LLAMA: "Failed"})]
    observed = sync_group(group(), indexes)["attachments"]
    stale = [o if o["metadata"]["labels"][MODEL_LABEL] != QWEN else node_model_status("ome", GROUP, QWEN, {C: "Ready"})
             for o in observed]
    assert sync_group(group(status=node_group_status([], [])), indexes, stale)["status"]["indexed"] == [A]
    missing = [o for o in observed if o["metadata"]["labels"][MODEL_LABEL] != QWEN]
    assert sync_group(group(status=node_group_status([], [])), indexes, missing)["status"]["indexed"] == [A]


def test_indexed_node_stays_indexed_while_its_statuses_change() -> None:
    """The changes reach their models through the objects; the group status, read by
    every model, keeps still."""
    _, answer = fed_back(group(), [indexed(C, {LLAMA: "Updating"})])
    assert answer["status"]["indexed"] == [C]
    changed = sync_group(group(status=answer["status"]), [indexed(C, {LLAMA: "Ready", QWEN: "Updating"})], answer["attachments"])
    assert changed["status"] == {"indexed": [C], "gone": []}
    assert {o["metadata"]["labels"][MODEL_LABEL]: o["spec"] for o in changed["attachments"]} == {
        LLAMA: {"nodes": {C: "Ready"}}, QWEN: {"nodes": {C: "Updating"}}}


def test_nodegone_index_is_gone_and_gives_no_statuses() -> None:
    parent, answer = fed_back(group(), [indexed(C, {LLAMA: "Ready"}), indexed(A, {LLAMA: "Failed"})])
    after = sync_group(parent, [gone(C), indexed(A, {LLAMA: "Failed"})], answer["attachments"])
    assert after["status"] == {"indexed": [A], "gone": [C]}
    assert [o["spec"] for o in after["attachments"]] == [{"nodes": {A: "Failed"}}]


def test_node_back_stays_gone_until_its_statuses_are_reflected() -> None:
    """Until then a model would read "indexed, holds nothing" for a node that holds it."""
    parent = group(status=node_group_status([], [C]))
    back = sync_group(parent, [indexed(C, {LLAMA: "Ready"})])
    assert back["status"] == {"indexed": [], "gone": [C]}
    reflected = sync_group(group(status=back["status"]), [indexed(C, {LLAMA: "Ready"})], back["attachments"])
    assert reflected["status"] == {"indexed": [C], "gone": []}


def test_node_whose_index_went_with_its_configmap_is_departed_until_indexed_again() -> None:
    """Otherwise a model that missed the moment would keep that node's last report for good."""
    parent = group(status=node_group_status([A, C], [D]))
    answer = sync_group(parent, [indexed(A, {})])
    assert answer["status"] == {"indexed": [A], "gone": [], "departed": [C, D]}
    again = sync_group(group(status=answer["status"]), [indexed(A, {}), indexed(C, {})])
    assert again["status"] == {"indexed": sorted([A, C]), "gone": [], "departed": [D]}


def test_departed_keeps_the_newest_nodes_oldest_first() -> None:
    old = tuple(f"old-{number:04}" for number in range(MAX_DEPARTED))
    answer = sync_group(group(status=node_group_status([C], [], old)), [])
    departed = answer["status"]["departed"]
    assert len(departed) == MAX_DEPARTED
    assert departed == [*old[1:], C]


def test_departed_list_stays_as_it_is_while_nothing_departs() -> None:
    status = node_group_status([A], [], (C, D))
    assert sync_group(group(status=status), [indexed(A, {})])["status"] == status


@pytest.mark.parametrize("foreign", [
    indexed(OTHER_GROUP_NODE, {LLAMA: "Ready"}),
    node_index("elsewhere", B, INDEXED, {LLAMA: "Ready"}),
], ids=["node-of-another-group", "other-namespace"])
def test_nodeindex_of_another_group_or_namespace_is_ignored(foreign: dict[str, Any]) -> None:
    """A label edited by hand, or a copy in another namespace, must not put a node in two
    groups or let anyone write a model's statuses."""
    with_foreign = sync_group(group(), [indexed(A, {QWEN: "Failed"}), foreign])
    assert with_foreign == sync_group(group(), [indexed(A, {QWEN: "Failed"})])


def test_malformed_nodeindex_of_another_namespace_is_ignored_not_refused() -> None:
    foreign = node_index("elsewhere", B, INDEXED, {})
    foreign["spec"]["state"] = "Maybe"
    assert sync_group(group(), [foreign]) == sync_group(group(), [])


@pytest.mark.parametrize("parent", [group(name="nodes-64"), group(name="gpu-nodes"), group(namespace_="default")],
                         ids=["number-out-of-range", "other-name", "other-namespace"])
def test_group_the_hook_did_not_derive_gets_nothing_and_keeps_its_status(parent: dict[str, Any]) -> None:
    parent["status"] = {"indexed": ["someone-elses"], "gone": []}
    assert decorator.customize({"parent": parent}, SETTINGS) == {"relatedResources": []}
    assert sync_group(parent, [indexed(A, {LLAMA: "Ready"})]) == {"status": None, "attachments": []}


@pytest.mark.parametrize(("mutate", "said"), [
    (lambda spec: spec.pop("node"), "has no spec.node"),
    (lambda spec: spec.update(node=""), "has no spec.node"),
    (lambda spec: spec.update(state="Maybe"), "state 'Maybe'"),
    (lambda spec: spec.pop("state"), "state None"),
    (lambda spec: spec.update(models=["Ready"]), "spec.models must be a map of strings"),
    (lambda spec: spec.update(models={LLAMA: 1}), "spec.models must be a map of strings"),
    (lambda spec: spec.update(unreadable=LLAMA), "spec.unreadable must be a list of strings"),
], ids=["no-node", "empty-node", "unknown-state", "no-state", "models-list", "status-not-text", "unreadable-text"])
def test_malformed_nodeindex_is_refused_rather_than_dropped(mutate: Any, said: str) -> None:
    """Guessing would misplace the node's statuses or drop them from every model."""
    bad = indexed(A, {LLAMA: "Ready"})
    mutate(bad["spec"])
    with pytest.raises(BadRequest, match=re.escape(said)) as refused:
        sync_group(group(), [bad])
    assert f"NodeIndex '{A}'" in str(refused.value)


@pytest.mark.parametrize(("mutate", "said"), [
    (lambda obj: obj["metadata"].pop("labels"), f"has no {MODEL_LABEL} label"),
    (lambda obj: obj["spec"].update(nodes=[A]), "spec.nodes must be a map of strings"),
    (lambda obj: obj["spec"].update(unreadable={A: None}), "spec.unreadable must be a list of strings"),
    (lambda obj: obj["spec"].pop("nodes"), "has no spec.nodes"),
    (lambda obj: obj.update(spec=[A]), "has no spec.nodes"),
], ids=["no-model-label", "nodes-list", "unreadable-map", "no-nodes", "spec-list"])
def test_malformed_nodemodelstatus_child_is_refused(mutate: Any, said: str) -> None:
    """Its label and statuses decide whether the node is indexed."""
    child = node_model_status("ome", GROUP, LLAMA, {A: "Ready"})
    mutate(child)
    with pytest.raises(BadRequest, match=re.escape(said)):
        sync_group(group(status=node_group_status([], [])), [indexed(A, {LLAMA: "Ready"})], [child])


@pytest.mark.parametrize("status", [{"indexed": A, "gone": []}, {"indexed": [], "gone": [1]}, {"indexed": [], "gone": [], "departed": {}},
                                    [A], [], "indexed"],
                         ids=["indexed-text", "gone-not-names", "departed-map", "status-list", "status-empty-list", "status-text"])
def test_malformed_group_status_is_refused_rather_than_forgotten(status: dict[str, Any]) -> None:
    """Forgetting it would drop the departed nodes and un-index every node at once."""
    with pytest.raises(BadRequest, match="status.indexed, status.gone and status.departed must be lists of node names"):
        sync_group(group(status=status), [indexed(A, {})])


def test_group_without_a_status_yet_knows_no_node() -> None:
    """A new group, as the API server stores it (no status) or as a client may send it (null)."""
    for parent in (group(), {**group(), "status": None}):
        assert sync_group(parent, [indexed(A, {LLAMA: "Ready"})])["status"] == {"indexed": [], "gone": []}


def test_group_sync_without_its_nodeindexes_is_refused_rather_than_departing_every_node() -> None:
    body = {"parent": group(status=node_group_status([A], [])), "children": children(), "related": {}}
    with pytest.raises(BadRequest, match=re.escape(NODE_INDEXES)):
        decorator.sync(body, SETTINGS)


def test_group_sync_without_its_nodemodelstatuses_is_refused() -> None:
    body = {"parent": group(), "children": {NODE_INDEXES: {}, NODE_GROUPS: {}}, "related": {NODE_INDEXES: {}}}
    with pytest.raises(BadRequest, match=re.escape(NODE_MODEL_STATUSES)):
        decorator.sync(body, SETTINGS)


# --------------------------------------------------------------------------
# Names and labels
# --------------------------------------------------------------------------


@pytest.mark.parametrize("group_name", [GROUP_NAMES[0], GROUP_NAMES[-1]])
def test_nodemodelstatus_names_are_dns_subdomains_one_per_group_and_model(group_name: str) -> None:
    labels = [model_label(key) for key in (LLAMA, QWEN, MISTRAL, "clusterbasemodel." + "m" * 236)]
    names = {entry_name(group_name, label) for label in labels}
    assert len(names) == len(labels)
    assert all(DNS_SUBDOMAIN.match(name) and len(name) <= 253 for name in names)
    assert entry_name(GROUP_NAMES[0], model_label(LLAMA)) != entry_name(GROUP_NAMES[1], model_label(LLAMA))


@pytest.mark.parametrize("node_name", ["10.0.10.105", "oke-cq2m4xtnb5a-n7a5e81430-2", "n" * 253])
def test_nodeindex_is_named_after_its_node_and_labelled_with_a_group(node_name: str) -> None:
    index = node_index("ome", node_name, INDEXED, {})
    assert index["metadata"]["name"] == node_name
    assert index["metadata"]["labels"][GROUP_LABEL] in GROUP_NAMES
    assert all(DNS_SUBDOMAIN.match(name) for name in GROUP_NAMES)


@pytest.mark.parametrize("key", [LLAMA, "clusterbasemodel." + "m" * 236, "1a2b3c4d.basemodel." + "x" * 234])
def test_model_label_is_omes_key_or_its_hash_truncation_and_a_valid_label(key: str) -> None:
    label = model_label(key)
    assert LABEL_VALUE.match(label) and len(label) <= 63
    assert label == key if len(key) <= 63 else (label.endswith(key[-54:]) and label != key[-63:])


def test_group_of_is_stable_across_releases() -> None:
    """The groups of the NodeIndexes already stored must not move when the hook is upgraded."""
    assert [group_of(name) for name in ("10.0.10.105", "10.0.10.212", "10.0.10.27")] == ["nodes-12", "nodes-51", "nodes-41"]


def test_group_of_spreads_a_thousand_nodes_over_every_group() -> None:
    """A group's sync carries all its NodeIndexes: none may gather many times its share."""
    sizes = Counter(group_of(f"10.0.{n // 256}.{n % 256}") for n in range(1000))
    assert set(sizes) == set(GROUP_NAMES) and len(GROUP_NAMES) == GROUP_COUNT
    assert max(sizes.values()) <= 2 * 1000 / GROUP_COUNT
