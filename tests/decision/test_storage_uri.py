"""Every pvc:// rule of CONTRACT §4, for both parent kinds."""

from __future__ import annotations

import pytest

from hooks.pvc.storage_uri import PVCLocation, StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.reasons import Reason

CLUSTER = None


@pytest.mark.parametrize(
    ("uri", "namespace", "expected"),
    [
        ("pvc://store/llama", "models", PVCLocation("models", "store", "llama")),
        ("pvc://store/path/to/llama-3.1-8b", "models", PVCLocation("models", "store", "path/to/llama-3.1-8b")),
        ("pvc://models:store/llama", "models", PVCLocation("models", "store", "llama")),
        ("pvc://store/llama/", "models", PVCLocation("models", "store", "llama")),
        ("pvc://my-pvc-123/path_with-special.chars", "models", PVCLocation("models", "my-pvc-123", "path_with-special.chars")),
        ("pvc://model.store.v2/llama", "models", PVCLocation("models", "model.store.v2", "llama")),
        ("pvc://shared:store/llama", CLUSTER, PVCLocation("shared", "store", "llama")),
        ("pvc://model-storage:shared-pvc/path/to/models/llama2-7b", CLUSTER, PVCLocation("model-storage", "shared-pvc", "path/to/models/llama2-7b")),
    ],
)
def test_valid_uri_resolves_namespace_pvc_and_sub_path(uri: str, namespace: str | None, expected: PVCLocation) -> None:
    assert parse_pvc_uri(uri, namespace) == expected


@pytest.mark.parametrize(
    ("uri", "namespace", "problem"),
    [
        ("pvc://", "models", "is empty after pvc://"),
        ("pvc://store", "models", "has no sub-path"),
        ("pvc://models:store", "models", "has no sub-path"),
        ("pvc://store/", "models", "has an empty sub-path"),
        ("pvc://store//", "models", "has an empty sub-path"),
        ("pvc:///llama", "models", "has an empty PVC name"),
        ("pvc://store//llama", "models", "has an absolute sub-path"),
        ("pvc://store/a//b", "models", "has an empty segment"),
        ("pvc://store/../secrets", "models", "has a '..' segment"),
        ("pvc://store/models/../../etc", "models", "has a '..' segment"),
        ("pvc://store/llama//", "models", "has an empty segment"),
        ("pvc://Store/llama", "models", "not a DNS-1123 subdomain"),
        ("pvc://store_1/llama", "models", "not a DNS-1123 subdomain"),
        ("pvc://-store/llama", "models", "not a DNS-1123 subdomain"),
        ("pvc://" + "s" * 254 + "/llama", "models", "not a DNS-1123 subdomain"),
        ("pvc://a:b:c/llama", "models", "more than one ':'"),
        ("pvc://:store/llama", "models", "empty namespace"),
        ("pvc://models:/llama", "models", "empty PVC name"),
        ("pvc://MyNamespace:store/llama", CLUSTER, "not a DNS-1123 label"),
        ("pvc://my_namespace:store/llama", CLUSTER, "not a DNS-1123 label"),
        ("pvc://-ns:store/llama", CLUSTER, "not a DNS-1123 label"),
        ("pvc://ns-:store/llama", CLUSTER, "not a DNS-1123 label"),
        ("pvc://" + "n" * 64 + ":store/llama", CLUSTER, "not a DNS-1123 label"),
        ("pvc://store/llama", CLUSTER, "has no namespace"),
        ("PVC://store/llama", "models", "does not start with pvc://"),
    ],
)
def test_invalid_uri_is_refused_with_what_was_wrong_and_the_right_form(uri: str, namespace: str | None, problem: str) -> None:
    with pytest.raises(StorageURIError) as refusal:
        parse_pvc_uri(uri, namespace)
    assert refusal.value.reason == Reason.INVALID_STORAGE_URI
    assert problem in refusal.value.message
    assert "expected pvc://" in refusal.value.message


def test_basemodel_pointing_at_another_namespace_is_refused_as_cross_namespace() -> None:
    with pytest.raises(StorageURIError) as refusal:
        parse_pvc_uri("pvc://team-b:store/llama", "models")
    assert refusal.value.reason == Reason.CROSS_NAMESPACE_PVC
    assert "'team-b'" in refusal.value.message and "'models'" in refusal.value.message
    assert "ClusterBaseModel" in refusal.value.message


def test_syntax_is_judged_before_namespace_policy() -> None:
    with pytest.raises(StorageURIError) as refusal:
        parse_pvc_uri("pvc://team-b:store/../llama", "models")
    assert refusal.value.reason == Reason.INVALID_STORAGE_URI


@pytest.mark.parametrize("uri", ["hf://meta-llama/Llama-3.1-8B", "oci://n/ns/b/bucket/o/llama", "s3://bucket/llama", "PVC://x/y", "", None, 7])
def test_only_the_exact_pvc_scheme_takes_the_pvc_flow(uri: object) -> None:
    assert not is_pvc_uri(uri)
