"""Whether OME serves ``pvc://`` models itself, read from what Metacontroller sends.

OME's manager gained a PVC backend of its own after v0.1.5 (v1.2.2 ships it): for every
``pvc://`` model it creates its own metadata Job and writes the status, and nothing turns
that off. Once it runs, the hook must stand aside for every model, or a model gets two Jobs
and two writers of one status (docs/upstream-v1.2.2-notes.md).

The hook makes no API call, so the evidence must arrive in a request. The label keeper asks
for it with ``related_rules``; both rules name kinds Metacontroller already caches whole for
the CompositeControllers (ClusterRoles and Jobs are their children), so asking costs no
informer and no memory, where a CRD or ConfigMap rule would cache every object of its kind.
Three things are evidence, earliest first:

- OME's chart's ClusterRole for its metadata Job (label
  ``app.kubernetes.io/component: ome-model-metadata-job``), which Helm applies in the
  manager's release before the Deployment: it arrives before the new manager acts, and as
  every ``pvc://`` model asks for it, its arrival re-syncs them all through the keeper at once;
- a Job of OME's for this model: its manager has acted (any install, chart or not);
- a status that OME's PVC backend wrote: it stamps ``lastReconcileTime`` on every status
  write, a field that neither OME's older reconcilers nor the hook ever write.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hooks.pvc.storage_uri import StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.reasons import ConditionType
from hooks.request import Model, field, items, object_group

COMPONENT_LABEL = "app.kubernetes.io/component"
METADATA_JOB_COMPONENT = "ome-model-metadata-job"
# The labels OME's backend puts on its Job (pkg/constants/pvc.go); the name goes in unshortened.
MODEL_NAME_LABEL = "models.ome/model-name"
MODEL_SCOPE_LABEL = "models.ome/model-scope"
RECONCILE_STAMP = "lastReconcileTime"
# The status fields of OME's own Go type (ModelStatusSpec, v1.2.2); the rest are the hook's.
OME_STATUS_FIELDS = ("lifecycle", "state", "observedGeneration", RECONCILE_STAMP, "nodesReady", "nodesFailed", "conditions")
# The condition types only the hook writes; ``Ready`` is OME's too, and OME's once it wrote last.
HOOK_ONLY_CONDITIONS = frozenset({ConditionType.STORAGE_READY, ConditionType.METADATA_READY})
CLUSTER_ROLES = "ClusterRole.rbac.authorization.k8s.io/v1"
JOBS = "Job.batch/v1"
# A label value holds at most 63 characters: OME cannot label a Job for a longer model name.
LABEL_VALUE_MAX = 63


class Evidence(NamedTuple):
    """What showed that OME serves ``pvc://`` models itself, for the log and the model; the
    same words for as long as the evidence stands, so saying it costs no write twice."""

    found: str

    def describe(self) -> str:
        return f"OME serves pvc:// models itself ({self.found})"


def related_rules(model: Model) -> list[dict[str, Any]]:
    """The keeper's customize rules for a ``pvc://`` model: OME's chart's ClusterRole and,
    where OME could make a Job for the model, that Job where OME would put it. A model on
    other storage asks for nothing: it is OME's whatever OME's release."""
    if not is_pvc_uri(model.storage_uri):
        return []
    rules: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "resource": "clusterroles",
            "labelSelector": {"matchLabels": {COMPONENT_LABEL: METADATA_JOB_COMPONENT}},
        }
    ]
    namespace = _job_namespace(model)
    if namespace is not None and len(model.name) <= LABEL_VALUE_MAX:
        rules.append(
            {
                "apiVersion": "batch/v1",
                "resource": "jobs",
                "namespace": namespace,
                "labelSelector": {"matchLabels": _job_labels(model)},
            }
        )
    return rules


def find_evidence(request: dict[str, Any], model: Model) -> Evidence | None:
    """The first evidence in a keeper's request that OME's own PVC backend runs, or None.

    The labels are checked here again, so the answer does not rest on the rules alone."""
    for role in object_group(request, "related", CLUSTER_ROLES, required=False):
        if field(role["metadata"], "labels").get(COMPONENT_LABEL) == METADATA_JOB_COMPONENT:
            return Evidence(f"its chart's ClusterRole {role['metadata']['name']}")
    wanted = _job_labels(model)
    for job in object_group(request, "related", JOBS, required=False):
        labels = field(job["metadata"], "labels")
        if all(labels.get(key) == value for key, value in wanted.items()):
            return Evidence(f"its Job {job['metadata']['namespace']}/{job['metadata']['name']}")
    if written_by_ome_backend(model.status):
        return Evidence(f"its PVC backend wrote the status: status.{RECONCILE_STAMP}")
    return None


def written_by_ome_backend(status: dict[str, Any]) -> bool:
    """Whether OME's own PVC backend wrote this status last (it stamps every write; a write
    by anyone else replaces the whole status without the stamp)."""
    return isinstance(status.get(RECONCILE_STAMP), str)


def status_left_to_ome(status: dict[str, Any]) -> dict[str, Any]:
    """The status to hand back when OME's backend wrote it last: OME's own fields as they
    stand, without the hook's condition types its typed write carried over, so the last
    write of Metacontroller's takes nothing from OME and leaves nothing of the hook's."""
    kept = {key: status[key] for key in OME_STATUS_FIELDS if key in status and key != "conditions"}
    conditions = [
        condition
        for condition in items(status, "conditions")
        if not (isinstance(condition, dict) and condition.get("type") in HOOK_ONLY_CONDITIONS)
    ]
    return {**kept, "conditions": conditions} if conditions else kept


def _job_labels(model: Model) -> dict[str, str]:
    return {MODEL_NAME_LABEL: model.name, MODEL_SCOPE_LABEL: "cluster" if model.cluster_scoped else "namespaced"}


def _job_namespace(model: Model) -> str | None:
    """Where OME puts a ``pvc://`` model's Job: a BaseModel's namespace, a ClusterBaseModel's
    PVC's (None when the URI names no namespace the hook can read)."""
    if not model.cluster_scoped:
        return model.namespace
    try:
        return parse_pvc_uri(model.storage_uri, None).namespace
    except StorageURIError:
        return None
