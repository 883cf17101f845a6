"""OME's ConfigMap key format (with its hash truncation of long names), and OME's status
rules applied to what the node index says about a model."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from hooks.nodes.index_objects import node_index_summary, node_model_status
from hooks.nodes.node_status import read_node_report
from hooks.nodes.ome_keys import configmap_key, truncate_with_hash
from hooks.observed import read_model


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


def model(status: dict[str, Any] | None = None) -> Any:
    return read_model({
        "apiVersion": "ome.io/v1beta1", "kind": "BaseModel",
        "metadata": {"name": "llama-3.1-8b", "namespace": "models", "generation": 1},
        "spec": {"storage": {"storageUri": "hf://meta-llama/Llama-3.1-8B"}},
        "status": status or {},
    })


def report(entries: list[tuple[str, str | None]], indexed: list[str] | None, gone: Sequence[str] = (),
           status: dict[str, Any] | None = None, key: str = KEY) -> Any:
    objects = [node_model_status("ome", node, key, state) for node, state in entries]
    summaries = [] if indexed is None else [node_index_summary("ome", indexed, list(gone))]
    return read_node_report(model(status), objects, summaries, "ome")


def test_indexed_nodes_report_their_entries_sorted() -> None:
    found = report([("n3", "Ready"), ("n1", "Ready"), ("n2", "Failed"), ("n4", "Updating")], ["n1", "n2", "n3", "n4"])
    assert (found.ready, found.failed, found.holding) == (("n1", "n3"), ("n2",), ("n1", "n2", "n3", "n4"))


def test_indexed_node_without_an_entry_does_not_hold_the_model() -> None:
    found = report([], ["n1"], status={"state": "Ready", "nodesReady": ["n1"]})
    assert (found.ready, found.holding, found.state) == ((), (), "In_Transit")


def test_gone_node_is_ignored_even_while_its_entries_are_being_deleted() -> None:
    found = report([("n1", "Ready"), ("n2", "Ready")], ["n2"], gone=["n1"], status={"nodesReady": ["n1", "n2"]})
    assert found.ready == ("n2",)


def test_departed_node_is_ignored_although_the_status_listed_it() -> None:
    """Its ConfigMap is gone, so OME reads nothing from it; without an entry the node is not kept."""
    objects = [node_model_status("ome", "n1", KEY, "Ready")]
    summaries = [node_index_summary("ome", ["n1"], [], ("n2",))]
    found = read_node_report(model({"state": "Ready", "nodesReady": ["n1", "n2"]}), objects, summaries, "ome")
    assert (found.ready, found.holding) == (("n1",), ("n1",))


def test_first_install_keeps_a_ready_status_while_the_index_is_built() -> None:
    """No summary and no entry yet: the model keeps what OME's controller wrote, not In_Transit."""
    found = report([], None, status={"state": "Ready", "nodesReady": ["n1", "n2"], "nodesFailed": ["n3"]})
    assert (found.ready, found.failed, found.state) == (("n1", "n2"), ("n3",), "Ready")


def test_node_not_indexed_yet_reports_its_entry_when_it_has_one() -> None:
    found = report([("n2", "Failed")], ["n1"], status={"nodesReady": ["n1", "n2"]})
    assert (found.ready, found.failed) == ((), ("n2",))


def test_entries_of_another_model_are_ignored() -> None:
    found = report([("n1", "Ready")], ["n1"], key="models.basemodel.other")
    assert found.holding == ()


def test_entry_that_does_not_parse_holds_deletion_back() -> None:
    found = report([("n1", None)], ["n1"])
    assert (found.ready, found.failed, found.holding) == ((), (), ("n1",))


def test_new_model_that_no_node_reports_is_in_transit() -> None:
    assert report([], ["n1", "n2"]).state == "In_Transit"
