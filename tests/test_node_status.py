"""OME's ConfigMap key format (with its hash truncation of long names), and OME's status
rules applied to what the node index says about a model."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest

from hooks.nodes.index_objects import (
    API_VERSION,
    MODEL_LABEL,
    SUMMARY_NAME,
    NodeSet,
    group_of,
    model_label,
    node_index_summary,
    node_model_status,
)
from hooks.nodes.node_status import customize_rules, read_node_report
from hooks.nodes.ome_keys import configmap_key, truncate_with_hash
from hooks.observed import BadRequest, read_model


def _hash8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_short_names_are_kept_whole() -> None:
    assert configmap_key("models", "llama-3.1-8b") == "models.basemodel.llama-3.1-8b"
    assert configmap_key(None, "llama-3.1-8b") == "clusterbasemodel.llama-3.1-8b"


def test_truncation_keeps_the_tail_behind_a_hash() -> None:
    text = "x" * 20 + "tail"
    assert truncate_with_hash(text, 12) == f"{_hash8(text)}-" + text[-3:]
    assert truncate_with_hash(text, 8) == _hash8(text)
    assert truncate_with_hash("short", 8) == "short"


def test_long_cluster_model_name_is_truncated_to_236() -> None:
    name = "m" * 230 + "-final-part"
    key = configmap_key(None, name)
    assert key == f"clusterbasemodel.{_hash8(name)}-{name[-(236 - 9):]}"
    assert len(key) == 253


def test_long_namespace_is_replaced_by_its_hash() -> None:
    namespace, name = "team-research-models", "n" * 240
    key = configmap_key(namespace, name)
    assert key.startswith(f"{_hash8(namespace)}.basemodel.{_hash8(name)}-")
    assert len(key) <= 253


def test_short_namespace_is_kept_and_the_name_gets_the_rest() -> None:
    namespace, name = "ml", "n" * 245
    key = configmap_key(namespace, name)
    assert key == f"ml.basemodel.{_hash8(name)}-{name[-(240 - 9):]}"
    assert len(key) == 253


def test_exactly_at_the_budget_is_not_truncated() -> None:
    namespace, name = "models", "n" * (242 - len("models"))
    assert configmap_key(namespace, name) == f"models.basemodel.{name}"

KEY = "models.basemodel.llama-3.1-8b"
N1, N2, N3, N4 = "10.0.10.105", "10.0.10.212", "10.0.10.27", "10.0.10.51"


def model(status: dict[str, Any] | None = None, name: str = "llama-3.1-8b", namespace: str = "models") -> Any:
    return read_model({
        "apiVersion": "ome.io/v1beta1", "kind": "BaseModel",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"storage": {"storageUri": "hf://meta-llama/Llama-3.1-8B"}},
        "status": status or {},
    })


def statuses(entries: Sequence[tuple[str, str | None]], key: str = KEY, namespace: str = "ome") -> list[dict[str, Any]]:
    """The model's NodeModelStatus objects as the group syncs write them: one per group of nodes."""
    by_group: dict[str, dict[str, str | None]] = defaultdict(dict)
    for node_name, state in entries:
        by_group[group_of(node_name)][node_name] = state
    return [node_model_status(namespace, name, model_label(key), nodes) for name, nodes in sorted(by_group.items())]


def summary(indexed: Sequence[str] = (), gone: Sequence[str] = (), departed: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The summary of every group, as the hook's Namespace folds it."""
    return [node_index_summary("ome", NodeSet(frozenset(indexed), frozenset(gone), tuple(departed)))]


def report(entries: Sequence[tuple[str, str | None]], indexed: Sequence[str] | None, gone: Sequence[str] = (),
           status: dict[str, Any] | None = None, key: str = KEY, departed: Sequence[str] = ()) -> Any:
    known = [] if indexed is None else summary(indexed, gone, departed)
    return read_node_report(model(status), statuses(entries, key), known, "ome")


def test_model_asks_for_its_own_statuses_by_label_and_the_summary_by_name() -> None:
    """By label, so another model's entry never wakes it; the summary by name, so the nodes
    known (changing only when nodes are indexed, go or depart) are all it reads of the others."""
    assert customize_rules(model(), "ome") == [
        {"apiVersion": API_VERSION, "resource": "nodemodelstatuses", "namespace": "ome",
         "labelSelector": {"matchLabels": {MODEL_LABEL: KEY}}},
        {"apiVersion": API_VERSION, "resource": "nodeindexsummaries", "namespace": "ome", "names": [SUMMARY_NAME]},
    ]


def test_model_with_a_long_key_asks_for_the_hash_shortened_label() -> None:
    long_model = model(name="n" * 200, namespace="team-research-models")
    (by_label, _) = customize_rules(long_model, "ome")
    label = by_label["labelSelector"]["matchLabels"][MODEL_LABEL]
    assert label == model_label(configmap_key("team-research-models", "n" * 200)) and len(label) == 63


def test_indexed_nodes_report_their_entries_sorted() -> None:
    found = report([(N3, "Ready"), (N1, "Ready"), (N2, "Failed"), (N4, "Updating")], [N1, N2, N3, N4])
    assert (found.ready, found.failed, found.holding) == ((N1, N3), (N2,), (N1, N2, N3, N4))


def test_statuses_of_every_group_are_read_together() -> None:
    assert len({group_of(n) for n in (N1, N2, N3)}) == 3
    found = report([(N1, "Ready"), (N2, "Ready"), (N3, "Failed")], [N1, N2, N3])
    assert (found.ready, found.failed) == ((N1, N2), (N3,))


def test_indexed_node_without_an_entry_does_not_hold_the_model() -> None:
    found = report([], [N1], status={"state": "Ready", "nodesReady": [N1]})
    assert (found.ready, found.holding, found.state) == ((), (), "In_Transit")


def test_gone_node_is_ignored_even_while_its_entries_are_being_deleted() -> None:
    found = report([(N1, "Ready"), (N2, "Ready")], [N2], gone=[N1], status={"nodesReady": [N1, N2]})
    assert found.ready == (N2,)


def test_departed_node_is_ignored_although_the_status_listed_it() -> None:
    """Its ConfigMap is gone, so OME reads nothing from it; without an entry the node is not kept."""
    found = report([(N1, "Ready")], [N1], departed=[N2], status={"state": "Ready", "nodesReady": [N1, N2]})
    assert (found.ready, found.holding) == ((N1,), (N1,))


def test_first_install_keeps_a_ready_status_while_the_index_is_built() -> None:
    """No summary and no entry yet: the model keeps what OME's controller wrote, not In_Transit."""
    found = report([], [], status={"state": "Ready", "nodesReady": [N1, N2], "nodesFailed": [N3]})
    assert (found.ready, found.failed, found.state) == ((N1, N2), (N3,), "Ready")
    assert read_node_report(model({"nodesReady": [N1]}), [], [], "ome").ready == (N1,)


def test_node_not_indexed_yet_reports_its_entry_when_it_has_one() -> None:
    found = report([(N2, "Failed")], [N1], status={"nodesReady": [N1, N2]})
    assert (found.ready, found.failed) == ((), (N2,))


def test_entries_of_another_model_are_ignored() -> None:
    found = report([(N1, "Ready")], [N1], key="models.basemodel.other")
    assert found.holding == ()


def test_entries_outside_omes_namespace_are_ignored() -> None:
    """Only Metacontroller writes the index, and only in OME's namespace."""
    found = read_node_report(model(), statuses([(N1, "Ready")], namespace="default"), summary([N1]), "ome")
    assert found.holding == ()


@pytest.mark.parametrize(("name", "namespace"), [("nodes-00", "ome"), (SUMMARY_NAME, "default")],
                         ids=["other-name", "other-namespace"])
def test_summary_the_hook_does_not_derive_says_nothing_about_nodes(name: str, namespace: str) -> None:
    (stray,) = summary([N1], [N2], [N3])
    stray["metadata"].update(name=name, namespace=namespace)
    found = read_node_report(model({"nodesReady": [N1, N2, N3]}), statuses([(N2, "Ready")]), [stray], "ome")
    assert found.ready == (N1, N2, N3)


@pytest.mark.parametrize("spec", [None, [N1], {"indexed": N1, "gone": []}, {"indexed": [], "gone": [], "departed": [1]}],
                         ids=["no-spec", "spec-list", "indexed-text", "departed-not-names"])
def test_summary_that_cannot_be_read_is_refused_rather_than_forgotten(spec: Any) -> None:
    (bad,) = summary([N1])
    bad["spec"] = spec
    with pytest.raises(BadRequest, match="NodeIndexSummary 'nodes'"):
        read_node_report(model({"nodesReady": [N1]}), statuses([(N1, "Ready")]), [bad], "ome")


def test_entry_that_does_not_parse_holds_deletion_back() -> None:
    found = report([(N1, None)], [N1])
    assert (found.ready, found.failed, found.holding) == ((), (), (N1,))


def test_new_model_that_no_node_reports_is_in_transit() -> None:
    assert report([], [N1, N2]).state == "In_Transit"
