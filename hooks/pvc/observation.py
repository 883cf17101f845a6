"""Read a ``pvc://`` model's sync request, once, into the observation every step of the
decision reads: where the URI points, the model's observed children and the related PVCs
and Job pods.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hooks.pvc.storage_uri import PVCLocation, StorageURIError, parse_pvc_uri
from hooks.request import Model, has_children, object_group

# The types of the model's children and related objects, as Metacontroller keys them.
JOBS = "Job.batch/v1"
SERVICE_ACCOUNTS = "ServiceAccount.v1"
ROLES = "Role.rbac.authorization.k8s.io/v1"
ROLE_BINDINGS = "RoleBinding.rbac.authorization.k8s.io/v1"
CLUSTER_ROLES = "ClusterRole.rbac.authorization.k8s.io/v1"
CLUSTER_ROLE_BINDINGS = "ClusterRoleBinding.rbac.authorization.k8s.io/v1"
RECORD_API_VERSION = "ome-basemodel-hook.ome.io/v1alpha1"
RECORD_KIND = "ExtractionRecord"
RECORDS = f"{RECORD_KIND}.{RECORD_API_VERSION}"
PVCS = "PersistentVolumeClaim.v1"
PODS = "Pod.v1"
CHILD_TYPES = (JOBS, SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, RECORDS)
"""Every type a CompositeController of the hook's may return as a child."""

METADATA_FIELDS = ("modelType", "modelArchitecture", "modelParameterSize")

Access = frozenset[tuple[str, str | None, str]]


class Observation(NamedTuple):
    """Everything a ``pvc://`` model's sync is decided from: the model, whether it is being
    finalized, where its URI points (or why it cannot be used), its observed children (Jobs,
    the (kind, namespace, name) of its ServiceAccount and RBAC objects, its records)
    and the related PVCs and Job pods. Whether any child remains is read only while
    finalizing: it is what a deletion waits for. Whether the spec already holds the
    metadata decides whether a Job is wanted at all."""

    model: Model
    finalizing: bool
    location: PVCLocation | None
    uri_refusal: StorageURIError | None
    jobs: list[dict[str, Any]]
    access: Access
    records: list[dict[str, Any]]
    pvcs: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    remaining: bool
    metadata_present: bool


def observe(request: dict[str, Any], model: Model, finalizing: bool) -> Observation:
    """The URI is judged first, but a refusal only noted: the children are read whatever it
    says, since a child the hook cannot read makes a 400 (a 200 would delete it). The PVCs
    are read only for a URI that names one (the customize hook asked for nothing
    otherwise), the pods only if asked. The ServiceAccounts and RBAC objects are kept as
    (kind, namespace, name), as the hook names them, so a Job can wait for its own."""
    metadata_present = holds_metadata(model.spec)
    try:
        location, refusal = parse_pvc_uri(model.storage_uri, model.namespace), None
    except StorageURIError as error:
        location, refusal = None, error
    grants = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS) if model.cluster_scoped else (ROLES, ROLE_BINDINGS)
    jobs = object_group(request, "children", JOBS, required=True)
    access = [(type_key, object_group(request, "children", type_key, required=True)) for type_key in (SERVICE_ACCOUNTS, *grants)]
    records = object_group(request, "children", RECORDS, required=True)
    pvcs = object_group(request, "related", PVCS, required=True) if location else []
    pods = object_group(request, "related", PODS, required=False) if location else []
    return Observation(
        model=model,
        finalizing=finalizing,
        location=location,
        uri_refusal=refusal,
        jobs=jobs,
        access=frozenset(
            (type_key.split(".", 1)[0], item["metadata"].get("namespace") or None, item["metadata"]["name"])
            for type_key, group in access
            for item in group
        ),
        records=records,
        pvcs=pvcs,
        pods=pods,
        remaining=finalizing and has_children(request),
        metadata_present=metadata_present,
    )


def holds_metadata(spec: dict[str, Any]) -> bool:
    """The contract's test of metadata being present: without these three the model cannot
    be scheduled sensibly, and with them no Job is needed."""
    return all(isinstance(spec.get(key), str) and spec[key] for key in METADATA_FIELDS)
