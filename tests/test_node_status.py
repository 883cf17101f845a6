"""OME's ConfigMap key format, including its hash truncation of long names."""

from __future__ import annotations

import hashlib

from hooks.nodes.node_status import configmap_key, truncate_with_hash


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
