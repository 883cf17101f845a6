"""What a ``pvc://`` model's controllers ask Metacontroller to send along with it (the
customize hooks' related objects).

The CompositeController gets the model's Jobs, their ServiceAccount and RBAC and its
record as children, and asks only for the PVC (and, with ``READ_JOB_PODS``, the Jobs'
pods). The label keeper, which writes the model's why as annotations from the same
decision, gets none of them as attachments and asks for them all; it also asks for the
evidence that OME serves ``pvc://`` models itself (``upstream_backend.py``), on which it
hands every model back.

What a rule costs is Metacontroller's: it keeps an informer, a cache of every object of
the rule's type in the cluster, whatever the rule selects, shared by every controller
that names the type. Each rule here names a type the CompositeController already names,
so the label keeper's rules cost no memory; Pods are the one type that would cost the
whole cluster's pods, which is why ``READ_JOB_PODS`` is off by default.
"""

from __future__ import annotations

from typing import Any

from hooks.pvc.metadata_job import build_access, model_labels, record_name
from hooks.pvc.observation import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    JOBS,
    PODS,
    PVCS,
    RECORD_API_VERSION,
    RECORDS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
)
from hooks.pvc.storage_uri import StorageURIError, parse_pvc_uri
from hooks.request import Model
from hooks.settings import SyncSettings
from hooks.upstream_backend import related_rules

RBAC = "rbac.authorization.k8s.io/v1"
# Each type a rule names, by the type key Metacontroller groups its objects under.
RESOURCES = {
    PVCS: ("v1", "persistentvolumeclaims"),
    PODS: ("v1", "pods"),
    JOBS: ("batch/v1", "jobs"),
    SERVICE_ACCOUNTS: ("v1", "serviceaccounts"),
    ROLES: (RBAC, "roles"),
    ROLE_BINDINGS: (RBAC, "rolebindings"),
    CLUSTER_ROLES: (RBAC, "clusterroles"),
    CLUSTER_ROLE_BINDINGS: (RBAC, "clusterrolebindings"),
    RECORDS: (RECORD_API_VERSION, "extractionrecords"),
}
KIND_TYPES = {type_key.split(".", 1)[0]: type_key for type_key in RESOURCES}

Rules = dict[str, dict[str, Any]]
"""Customize rules by the type key their objects arrive under."""


def _rule(type_key: str, **selection: Any) -> dict[str, Any]:
    api_version, resource = RESOURCES[type_key]
    return {"apiVersion": api_version, "resource": resource, **selection}


def composite_rules(model: Model, settings: SyncSettings) -> Rules:
    """The PVC by name and, with ``READ_JOB_PODS``, the model's Job pods (whose messages
    explain failures); nothing for a URI that does not parse."""
    try:
        location = parse_pvc_uri(model.storage_uri, model.namespace)
    except StorageURIError:
        return {}
    rules = {PVCS: _rule(PVCS, namespace=location.namespace, names=[location.pvc_name])}
    if settings.read_job_pods:
        rules[PODS] = _rule(PODS, namespace=location.namespace, labelSelector={"matchLabels": model_labels(model)})
    return rules


def keeper_rules(model: Model, settings: SyncSettings) -> list[dict[str, Any]]:
    """The label keeper's rules: what the decision reads, then the evidence of OME's own
    PVC backend. Those may name a type twice (the Jobs by the hook's labels and by OME's);
    Metacontroller sends the objects of every rule of a type in the one map."""
    return [*decision_rules(model, settings).values(), *related_rules(model)]


def decision_rules(model: Model, settings: SyncSettings) -> Rules:
    """What the CompositeController's decision reads, its children included: the Jobs by
    the model's labels, the ServiceAccount, the grant and the record by their names."""
    rules = composite_rules(model, settings)
    if not rules:
        return {}
    namespace = rules[PVCS]["namespace"]
    rules[JOBS] = _rule(JOBS, namespace=namespace, labelSelector={"matchLabels": model_labels(model)})
    for item in build_access(model, namespace):
        where = {"namespace": namespace} if item["metadata"].get("namespace") else {}
        rules[KIND_TYPES[item["kind"]]] = _rule(KIND_TYPES[item["kind"]], **where, names=[item["metadata"]["name"]])
    rules[RECORDS] = _rule(RECORDS, namespace=namespace, names=[record_name(model)])
    return rules
