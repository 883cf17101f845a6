"""The node index's DecoratorController hooks: a ConfigMap and its Node in, attachments out."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from hooks.nodes import decorator
from hooks.nodes.index_objects import (
    INDEXED,
    MAX_DEPARTED,
    MODEL_LABEL,
    NODE_GONE,
    NODE_INDEX_SUMMARIES,
    NODE_INDEXES,
    NODE_MODEL_STATUSES,
    SUMMARY_PARENT_LABEL,
    entry_name,
    model_label,
    node_index_marker,
    node_index_summary,
)
from hooks.nodes.ome_keys import STATUS_LABEL
from hooks.observed import BadRequest
from hooks.settings import Settings

SETTINGS = Settings()
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LLAMA = "models.basemodel.llama-3.1-8b-instruct"
QWEN = "models.basemodel.qwen2.5-7b-instruct"


def entry(status: str) -> str:
    return json.dumps({"name": "m", "status": status, "config": {"modelType": "llama"}})


def configmap(node: str = "10.0.10.105", data: dict[str, str] | None = None, namespace: str = "ome",
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": node, "namespace": namespace, "uid": f"uid-{node}",
                     "labels": {STATUS_LABEL: "true", "node": node} if labels is None else labels},
        "data": {LLAMA: entry("Ready"), QWEN: entry("Updating")} if data is None else data,
    }


def node(name: str = "10.0.10.105") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-node-{name}"}}


def keyed(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/"): o for o in objects}


def sync_configmap(cm: dict[str, Any], nodes: list[dict[str, Any]], observed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    children = {type_key: {} for type_key in (NODE_MODEL_STATUSES, NODE_INDEXES, NODE_INDEX_SUMMARIES)}
    for obj in observed:
        children[f"{obj['kind']}.{obj['apiVersion']}"].update(keyed([obj]))
    body = {"controller": {}, "parent": cm, "children": children, "related": {"Node.v1": keyed(nodes)}, "finalizing": False}
    return decorator.sync(body, SETTINGS)


def kinds(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in answer["attachments"]]


def test_configmap_asks_for_its_own_node_by_name_only() -> None:
    answer = decorator.customize({"controller": {}, "parent": configmap()}, SETTINGS)
    assert answer == {"relatedResources": [{"apiVersion": "v1", "resource": "nodes", "names": ["10.0.10.105"]}]}


@pytest.mark.parametrize("cm", [configmap(namespace="kube-system"), configmap(labels={"node": "10.0.10.105"})],
                         ids=["other-namespace", "unlabelled"])
def test_configmap_ome_would_not_read_gets_no_rule_and_no_attachment(cm: dict[str, Any]) -> None:
    """Metacontroller asks customize for every ConfigMap it caches, selected or not."""
    assert decorator.customize({"parent": cm}, SETTINGS) == {"relatedResources": []}
    assert decorator.sync({"parent": cm, "children": {}, "related": {}}, SETTINGS) == {"status": None, "attachments": []}


def test_first_sync_asks_for_the_entries_and_no_marker_yet() -> None:
    """A marker before the entries exist would tell models "indexed, holds nothing"."""
    answer = sync_configmap(configmap(), [node()])
    assert kinds(answer) == [("NodeModelStatus", entry_name("10.0.10.105", LLAMA)),
                             ("NodeModelStatus", entry_name("10.0.10.105", QWEN))]
    assert [o["spec"] for o in answer["attachments"]] == [{"node": "10.0.10.105", "status": "Ready"},
                                                          {"node": "10.0.10.105", "status": "Updating"}]
    assert [o["metadata"]["labels"] for o in answer["attachments"]] == [{MODEL_LABEL: LLAMA}, {MODEL_LABEL: QWEN}]


def test_marker_says_indexed_once_every_entry_is_observed() -> None:
    entries = sync_configmap(configmap(), [node()])["attachments"]
    answer = sync_configmap(configmap(), [node()], entries)
    assert answer["attachments"][:2] == entries
    assert answer["attachments"][2] == node_index_marker("ome", "10.0.10.105", INDEXED)


def test_indexed_node_stays_indexed_while_a_new_entry_is_created() -> None:
    """New entries reach their model by themselves; the marker (read by every model) keeps still."""
    first = sync_configmap(configmap(data={LLAMA: entry("Ready")}), [node()])["attachments"]
    observed = [*first, node_index_marker("ome", "10.0.10.105", INDEXED)]
    answer = sync_configmap(configmap(), [node()], observed)
    assert kinds(answer)[-1] == ("NodeIndex", "10.0.10.105")
    assert answer["attachments"][-1]["spec"]["state"] == INDEXED
    assert len(answer["attachments"]) == 3


def test_deleted_entries_and_keys_that_name_no_model_are_not_indexed() -> None:
    cm = configmap(data={LLAMA: entry("Deleted"), QWEN: entry("Failed"), "agent-version": "v0.1.5"})
    assert kinds(sync_configmap(cm, [node()])) == [("NodeModelStatus", entry_name("10.0.10.105", QWEN))]


@pytest.mark.parametrize("key", ["x.basemodel.y-", ".basemodel.z", "team-a.basemodel.draft_"])
def test_key_no_model_can_have_gets_no_entry_so_the_node_still_gets_indexed(key: str) -> None:
    """OME maps these to a model, but no BaseModel's DNS names give them; their entry's label
    would be refused by the API server and the node would never be marked Indexed."""
    cm = configmap(data={key: entry("Ready"), LLAMA: entry("Ready")})
    first = sync_configmap(cm, [node()])
    assert kinds(first) == [("NodeModelStatus", entry_name("10.0.10.105", LLAMA))]
    assert sync_configmap(cm, [node()], first["attachments"])["attachments"][-1] == node_index_marker("ome", "10.0.10.105", INDEXED)


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
    """Its name, namespace, labels and data decide every attachment: a 200 about a misread
    ConfigMap would drop or rewrite the node's whole index."""
    cm = configmap()
    cm["metadata"].update(metadata)
    cm.update(data)
    with pytest.raises(BadRequest, match=refusal):
        sync_configmap(cm, [node()])


def test_entry_that_does_not_parse_is_indexed_without_a_status() -> None:
    """OME counts such a node as holding the model (deletion waits) but neither ready nor failed."""
    (only,) = sync_configmap(configmap(data={LLAMA: "{not json"}), [node()])["attachments"]
    assert only["spec"] == {"node": "10.0.10.105"}


def test_node_gone_leaves_only_a_gone_marker() -> None:
    entries = sync_configmap(configmap(), [node()])["attachments"]
    observed = [*entries, node_index_marker("ome", "10.0.10.105", INDEXED)]
    answer = sync_configmap(configmap(), [node("10.0.10.14")], observed)
    assert answer["attachments"] == [node_index_marker("ome", "10.0.10.105", NODE_GONE)]


def test_node_back_stays_gone_until_its_entries_are_observed_again() -> None:
    gone = [node_index_marker("ome", "10.0.10.105", NODE_GONE)]
    first = sync_configmap(configmap(), [node()], gone)["attachments"]
    assert first[-1] == gone[0]
    second = sync_configmap(configmap(), [node()], first)["attachments"]
    assert second[-1] == node_index_marker("ome", "10.0.10.105", INDEXED)


def test_sync_never_writes_the_parent() -> None:
    answer = sync_configmap(configmap(), [node()])
    assert set(answer) == {"status", "attachments"} and answer["status"] is None


def test_missing_node_group_is_refused_rather_than_read_as_node_gone() -> None:
    body = {"parent": configmap(), "children": {t: {} for t in (NODE_MODEL_STATUSES, NODE_INDEXES, NODE_INDEX_SUMMARIES)},
            "related": {}}
    with pytest.raises(BadRequest, match="Node.v1"):
        decorator.sync(body, SETTINGS)


def test_hook_version_v1_is_refused() -> None:
    """v1 would drop the cluster-scoped Node and the index would call every node gone."""
    with pytest.raises(BadRequest, match="v2"):
        decorator.sync({"object": configmap(), "attachments": {}, "related": {}}, SETTINGS)


@pytest.mark.parametrize(
    ("body", "said"),
    [([], "JSON object"), ({"related": {}}, "no 'parent' object"), ({"parent": {"apiVersion": "v1", "kind": "ConfigMap"}}, "no metadata.name")],
)
def test_request_without_a_readable_parent_is_refused(body: Any, said: str) -> None:
    with pytest.raises(BadRequest, match=said):
        decorator.sync(body, SETTINGS)


def test_parent_of_another_kind_is_refused() -> None:
    with pytest.raises(BadRequest, match="not served"):
        decorator.customize({"parent": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}}, SETTINGS)


def namespace(labelled: bool = True) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": "ome-basemodel-hook"}
    if labelled:
        labels[SUMMARY_PARENT_LABEL] = "true"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ome-basemodel-hook", "uid": "ns", "labels": labels}}


def sync_summary(markers: list[dict[str, Any]], parent: dict[str, Any] | None = None,
                 previous: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"parent": parent or namespace(), "children": {NODE_INDEX_SUMMARIES: keyed([previous] if previous else [])},
            "related": {NODE_INDEXES: keyed(markers)}}
    return decorator.sync(body, SETTINGS)


def test_summary_namespace_asks_for_every_marker_in_omes_namespace() -> None:
    answer = decorator.customize({"parent": namespace()}, SETTINGS)
    assert answer == {"relatedResources": [
        {"apiVersion": "ome-basemodel-hook.ome.io/v1alpha1", "resource": "nodeindexes", "namespace": "ome"}]}
    assert decorator.customize({"parent": namespace(labelled=False)}, SETTINGS) == {"relatedResources": []}


def test_summary_lists_the_markers_nodes_by_state_sorted() -> None:
    markers = [node_index_marker("ome", "10.0.10.27", INDEXED), node_index_marker("ome", "10.0.10.212", NODE_GONE),
               node_index_marker("ome", "10.0.10.105", INDEXED), {**node_index_marker("elsewhere", "x", INDEXED)}]
    (summary,) = sync_summary(markers)["attachments"]
    assert summary["metadata"] == {"name": "nodes", "namespace": "ome"}
    assert summary["spec"] == {"indexed": ["10.0.10.105", "10.0.10.27"], "gone": ["10.0.10.212"]}


def test_summary_of_no_markers_is_empty_and_a_foreign_namespace_gets_none() -> None:
    assert sync_summary([])["attachments"][0]["spec"] == {"indexed": [], "gone": []}
    assert sync_summary([node_index_marker("ome", "a", INDEXED)], namespace(labelled=False))["attachments"] == []


def test_node_whose_marker_went_with_its_configmap_is_listed_departed_until_indexed_again() -> None:
    """Otherwise a model that missed the moment would keep that node's last report for good."""
    previous = node_index_summary("ome", ["10.0.10.105", "10.0.10.27"], ["10.0.10.212"])
    (summary,) = sync_summary([node_index_marker("ome", "10.0.10.27", INDEXED)], previous=previous)["attachments"]
    assert summary["spec"] == {"indexed": ["10.0.10.27"], "gone": [], "departed": ["10.0.10.105", "10.0.10.212"]}
    (again,) = sync_summary([node_index_marker("ome", "10.0.10.27", INDEXED), node_index_marker("ome", "10.0.10.105", INDEXED)],
                            previous=summary)["attachments"]
    assert again["spec"] == {"indexed": ["10.0.10.105", "10.0.10.27"], "gone": [], "departed": ["10.0.10.212"]}


def test_departed_keeps_the_newest_nodes_oldest_first() -> None:
    previous = node_index_summary("ome", ["new-node"], [], tuple(f"old-{number:04}" for number in range(MAX_DEPARTED)))
    (summary,) = sync_summary([], previous=previous)["attachments"]
    departed = summary["spec"]["departed"]
    assert len(departed) == MAX_DEPARTED and departed[0] == "old-0001" and departed[-1] == "new-node"


def test_summary_namespace_with_unreadable_labels_is_refused_rather_than_emptied() -> None:
    parent = namespace()
    parent["metadata"]["labels"] = None
    with pytest.raises(BadRequest, match="labels must be a map"):
        sync_summary([node_index_marker("ome", "a", INDEXED)], parent)


def test_marker_with_an_unknown_state_is_refused() -> None:
    marker = node_index_marker("ome", "10.0.10.105", INDEXED)
    marker["spec"]["state"] = "Maybe"
    with pytest.raises(BadRequest, match="Maybe"):
        sync_summary([marker])


@pytest.mark.parametrize("node_name", ["10.0.10.105", "oke-cq2m4xtnb5a-n7a5e81430-2", "n" * 250])
def test_entry_names_are_dns_subdomains_one_per_node_and_model(node_name: str) -> None:
    names = {entry_name(node_name, key) for key in (LLAMA, QWEN)}
    assert len(names) == 2
    assert all(DNS_SUBDOMAIN.match(name) and len(name) <= 253 for name in names)


@pytest.mark.parametrize("key", [LLAMA, "clusterbasemodel." + "m" * 236, "1a2b3c4d.basemodel." + "x" * 234])
def test_model_label_is_omes_key_or_its_hash_truncation_and_a_valid_label(key: str) -> None:
    label = model_label(key)
    assert LABEL_VALUE.match(label) and len(label) <= 63
    assert label == key if len(key) <= 63 else label.endswith(key[-54:])
