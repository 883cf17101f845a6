"""The evidence that OME serves pvc:// models itself (hooks/upstream_backend.py): what the
keeper asks Metacontroller for, what it finds in the answer, and the status it hands back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks.request import BadRequest, Model, read_model
from hooks.upstream_backend import (
    CLUSTER_ROLES,
    JOBS,
    find_evidence,
    related_rules,
    status_left_to_ome,
    written_by_ome_backend,
)
from tests import golden
from tests.metacontroller.customize import RULE_FIELDS, selection_type

BASE_MODEL_REQUEST = golden.FIXTURES / "label" / "basemodel-pvc-new.request.json"
CLUSTER_MODEL_REQUEST = golden.FIXTURES / "label" / "clusterbasemodel-pvc.request.json"
# What OME v1.2.2's chart applies with its manager (templates/ome-controller/metadata-job-rbac.yaml).
OME_METADATA_CLUSTER_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "ome-model-metadata", "labels": {"app.kubernetes.io/component": "ome-model-metadata-job"}},
    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update", "patch"]}],
}
# OME v1.2.2's status for a model its backend made Ready, after the hook's own status.
OME_READY_STATUS = {
    "state": "Ready",
    "observedGeneration": 2,
    "lastReconcileTime": "2026-11-30T12:00:00Z",
    "conditions": [
        {"type": "StorageReady", "status": "True", "reason": "PVCBound", "message": "m", "lastTransitionTime": "2026-11-30T11:00:00Z"},
        {"type": "MetadataReady", "status": "True", "reason": "MetadataExtracted", "message": "m", "lastTransitionTime": "2026-11-30T11:00:00Z"},
        {"type": "Ready", "status": "True", "reason": "PVCMetadataReady", "message": "m", "lastTransitionTime": "2026-11-30T11:00:00Z"},
        {"type": "SourceReachable", "status": "True", "reason": "PVCValidated", "message": "m", "lastTransitionTime": "2026-11-30T12:00:00Z"},
    ],
}


def keeper_request(path: Any = BASE_MODEL_REQUEST, uri: str | None = None) -> dict[str, Any]:
    request = golden.load(path)
    if uri is not None:
        request["object"]["spec"]["storage"]["storageUri"] = uri
    return request


def model_of(request: dict[str, Any]) -> Model:
    return read_model(request["object"])


def ome_job(model: Model, namespace: str, **labels: str) -> dict[str, Any]:
    """A Job as OME's backend labels it for ``model``, labels overridden by ``labels``."""
    scope = "cluster" if model.cluster_scoped else "namespaced"
    chosen = {"models.ome/model-name": model.name, "models.ome/model-scope": scope, **labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{model.name}-metadata-1a2b3c4d", "namespace": namespace, "labels": chosen},
    }


def with_related(request: dict[str, Any], type_key: str, *objects: dict[str, Any]) -> dict[str, Any]:
    """The request as Metacontroller sends it once a customize rule selected ``objects`` (v2 keys)."""
    request = copy.deepcopy(request)
    group = request["related"].setdefault(type_key, {})
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        group[f"{namespace}/{obj['metadata']['name']}" if namespace else obj["metadata"]["name"]] = obj
    return request


def test_every_pvc_model_asks_for_omes_chart_clusterrole_by_its_fixed_label_even_with_a_bad_uri() -> None:
    for uri in ("pvc://model-storage/models/llama", "pvc://Bad_Name"):
        rules = related_rules(model_of(keeper_request(uri=uri)))
        assert rules[0] == {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "resource": "clusterroles",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "ome-model-metadata-job"}},
        }


def test_a_pvc_basemodel_also_asks_for_omes_job_in_its_own_namespace() -> None:
    model = model_of(keeper_request())
    assert related_rules(model)[1] == {
        "apiVersion": "batch/v1",
        "resource": "jobs",
        "namespace": "models",
        "labelSelector": {
            "matchLabels": {"models.ome/model-name": "llama-3.1-8b-instruct", "models.ome/model-scope": "namespaced"}
        },
    }


def test_a_pvc_clusterbasemodel_asks_for_omes_job_in_the_pvcs_namespace() -> None:
    request = keeper_request(CLUSTER_MODEL_REQUEST, uri="pvc://shared-models:model-storage/models/llama")
    job_rule = related_rules(model_of(request))[1]
    assert job_rule["namespace"] == "shared-models"
    assert job_rule["labelSelector"]["matchLabels"]["models.ome/model-scope"] == "cluster"


def test_no_job_rule_for_a_clusterbasemodel_whose_uri_names_no_namespace() -> None:
    """OME's backend makes no Job for it (PVCInvalid)."""
    request = keeper_request(CLUSTER_MODEL_REQUEST, "pvc://model-storage/models/llama")
    assert [rule["resource"] for rule in related_rules(model_of(request))] == ["clusterroles"]


@pytest.mark.parametrize(("path", "uri"), [(BASE_MODEL_REQUEST, "hf://meta-llama/Llama-3.1-8B"), (CLUSTER_MODEL_REQUEST, "s3://bucket/llama")])
def test_a_model_on_other_storage_asks_for_no_evidence(path: Any, uri: str) -> None:
    """It is OME's whatever OME's release, and a model that is not the hook's asks for nothing."""
    assert related_rules(model_of(keeper_request(path, uri))) == []


def test_no_job_rule_for_a_name_no_label_can_hold() -> None:
    """OME puts the model's name unshortened in a label: past 63 characters it can make no Job,
    and a selector holding such a value would fail every sync of the keeper."""
    request = keeper_request()
    request["object"]["metadata"]["name"] = "m" * 64
    assert [rule["resource"] for rule in related_rules(model_of(request))] == ["clusterroles"]
    request["object"]["metadata"]["name"] = "m" * 63
    assert [rule["resource"] for rule in related_rules(model_of(request))] == ["clusterroles", "jobs"]


def test_the_rules_are_ones_metacontroller_accepts_in_strict_mode() -> None:
    for path in (BASE_MODEL_REQUEST, CLUSTER_MODEL_REQUEST):
        for rule in related_rules(model_of(keeper_request(path))):
            assert set(rule) <= RULE_FIELDS
            assert selection_type(rule) in {"Labels", "NamespaceAndLabels"}


def test_nothing_is_evidence_in_a_request_that_holds_none() -> None:
    request = keeper_request()
    assert find_evidence(request, model_of(request)) is None


def test_omes_chart_clusterrole_is_evidence_for_every_model() -> None:
    for path, uri in ((BASE_MODEL_REQUEST, "pvc://model-storage/models/llama"), (CLUSTER_MODEL_REQUEST, "hf://x/y")):
        request = with_related(keeper_request(path, uri), CLUSTER_ROLES, OME_METADATA_CLUSTER_ROLE)
        evidence = find_evidence(request, model_of(request))
        assert evidence is not None
        assert evidence.describe() == "OME serves pvc:// models itself (its chart's ClusterRole ome-model-metadata)"


def test_a_clusterrole_without_omes_label_is_not_evidence() -> None:
    role = copy.deepcopy(OME_METADATA_CLUSTER_ROLE)
    role["metadata"]["labels"] = {"app.kubernetes.io/component": "something-else"}
    request = with_related(keeper_request(), CLUSTER_ROLES, role)
    assert find_evidence(request, model_of(request)) is None


def test_omes_job_for_this_model_is_evidence() -> None:
    request = keeper_request()
    model = model_of(request)
    evidence = find_evidence(with_related(request, JOBS, ome_job(model, "models")), model)
    assert evidence is not None
    assert evidence.found == "its Job models/llama-3.1-8b-instruct-metadata-1a2b3c4d"


@pytest.mark.parametrize(
    "labels",
    [
        {"models.ome/model-name": "another-model"},
        {"models.ome/model-scope": "cluster"},
    ],
)
def test_omes_job_for_another_model_or_scope_is_not_evidence(labels: dict[str, str]) -> None:
    """A BaseModel and a ClusterBaseModel of one name are told apart by OME's scope label."""
    request = keeper_request()
    model = model_of(request)
    assert find_evidence(with_related(request, JOBS, ome_job(model, "models", **labels)), model) is None


def test_a_status_omes_backend_wrote_is_evidence_and_one_the_hook_wrote_is_not() -> None:
    request = keeper_request()
    request["object"]["status"] = copy.deepcopy(OME_READY_STATUS)
    evidence = find_evidence(request, model_of(request))
    assert evidence is not None and "lastReconcileTime" in evidence.describe()
    assert written_by_ome_backend(OME_READY_STATUS)
    assert not written_by_ome_backend({"state": "Ready", "lastReconcileTime": None})


def test_the_hook_writes_the_stamp_that_marks_omes_backend_only_where_omes_backend_did() -> None:
    """The stamp is evidence only while no answer of the hook's carries it but a status OME
    stamped, handed back."""
    cases = [(golden.load(path), golden.load(golden.response_file(path))) for path in golden.cases()]
    stamped = [(golden.hands_omes_status_back(request), written_by_ome_backend(answer["status"]))
               for request, answer in cases if isinstance(answer.get("status"), dict)]
    assert (True, True) in stamped and (False, False) in stamped
    assert all(given == written for given, written in stamped)


def test_a_malformed_related_object_is_refused_not_guessed_at() -> None:
    request = with_related(keeper_request(), CLUSTER_ROLES, OME_METADATA_CLUSTER_ROLE)
    request["related"][CLUSTER_ROLES]["ome-model-metadata"]["metadata"]["namespace"] = "ome"
    with pytest.raises(BadRequest, match="cluster-scoped"):
        find_evidence(request, model_of(request))


def test_the_status_left_to_ome_is_omes_own_without_the_hooks_conditions_or_fields() -> None:
    status = {**copy.deepcopy(OME_READY_STATUS), "storage": {"type": "PVC"}, "metadataExtraction": {"attempts": 1}}
    assert status_left_to_ome(status) == {
        "state": "Ready",
        "observedGeneration": 2,
        "lastReconcileTime": "2026-11-30T12:00:00Z",
        "conditions": [OME_READY_STATUS["conditions"][2], OME_READY_STATUS["conditions"][3]],
    }


def test_the_status_left_to_ome_keeps_what_it_already_was() -> None:
    """Fed back, it is unchanged: the hand-back then costs Metacontroller no write."""
    once = status_left_to_ome(OME_READY_STATUS)
    assert status_left_to_ome(once) == once
    assert status_left_to_ome({"state": "In_Transit", "lifecycle": "Public"}) == {"state": "In_Transit", "lifecycle": "Public"}
