"""Build the metadata Job and its access objects, and read what an observed Job says.

Metacontroller's default ``OnDelete`` strategy never updates an existing child, so every
name here is derived from everything its content depends on: one name, one content.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hooks.conditions import format_time, parse_time
from hooks.observed import API_GROUP, Model, field
from hooks.settings import Settings
from hooks.storage_uri import PVCLocation

CONTAINER = "model-metadata"
VOLUME = "model"
MANAGED_BY = "ome-basemodel-hook"
APP_NAME = "ome-model-metadata"

ATTEMPT_LABEL = "ome.io/metadata-attempt"
STORAGE_URI_ANNOTATION = "ome.io/storage-uri"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")

RBAC_API = "rbac.authorization.k8s.io"
TERMINATION_MESSAGE_LIMIT = 1024


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _stem(name: str, limit: int) -> str:
    """A readable prefix of a model name that is also a DNS-1123 label fragment."""
    return name.replace(".", "-")[:limit].strip("-") or "model"


def _identity(model: Model) -> tuple[str, str, str]:
    return (model.kind, model.namespace or "", model.name)


def label_value(text: str) -> str:
    """Label values hold at most 63 characters; longer names keep a prefix and a hash."""
    if len(text) <= 63:
        return text
    return f"{text[:54].rstrip('-.')}-{_digest(text)[:8]}"


def job_name(model: Model, storage_uri: str, attempt: int) -> str:
    """Changes with the URI and the attempt; distinct for BaseModel and ClusterBaseModel."""
    return f"{_stem(model.name, 36)}-metadata-{_digest(*_identity(model), storage_uri, str(attempt))[:10]}"


def service_account_name(model: Model) -> str:
    """Also the Role and RoleBinding name: one set of access objects per model."""
    return f"{_stem(model.name, 40)}-metadata-{_digest(*_identity(model))[:8]}"


def model_labels(model: Model) -> dict[str, str]:
    """Labels every child and every Job pod carries; stable across attempts, so the
    customize hook (cached per parent generation) can select the pods of any attempt."""
    labels = {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "ome.io/model-kind": model.kind,
    }
    if model.cluster_scoped:
        labels["ome.io/clusterbasemodel"] = label_value(model.name)
    else:
        labels["ome.io/basemodel-namespace"] = model.namespace or ""
        labels["ome.io/basemodel"] = label_value(model.name)
    return labels


def build_job(
    model: Model, location: PVCLocation, storage_uri: str, attempt: int, settings: Settings
) -> dict[str, Any]:
    """The Job that mounts the PVC read-only and lets ``ome-agent`` fill the model's spec."""
    scope = ["--cluster-scoped"] if model.cluster_scoped else ["--basemodel-namespace", model.namespace or ""]
    resources = {
        "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
        "limits": {"cpu": settings.cpu_limit, "memory": settings.memory_limit},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(model, storage_uri, attempt),
            "namespace": location.namespace,
            "labels": {**model_labels(model), ATTEMPT_LABEL: str(attempt)},
            "annotations": {STORAGE_URI_ANNOTATION: storage_uri},
        },
        "spec": {
            "backoffLimit": settings.backoff_limit,
            "activeDeadlineSeconds": settings.active_deadline_seconds,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": model_labels(model)},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": service_account_name(model),
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": settings.run_as_user,
                        "runAsGroup": settings.run_as_group,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": settings.agent_image,
                            "args": [
                                "model-metadata",
                                "--config",
                                settings.agent_config,
                                "--model-path",
                                settings.mount_path,
                                "--basemodel-name",
                                model.name,
                                *scope,
                            ],
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                            "resources": resources,
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {
                                    "name": VOLUME,
                                    "mountPath": settings.mount_path,
                                    "subPath": location.sub_path,
                                    "readOnly": True,
                                },
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": VOLUME,
                            "persistentVolumeClaim": {"claimName": location.pvc_name, "readOnly": True},
                        },
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def build_access(model: Model, namespace: str) -> list[dict[str, Any]]:
    """ServiceAccount plus the narrowest grant the agent needs: get/update/patch on this model only."""
    labels = model_labels(model)
    account = service_account_name(model)
    rule = {
        "apiGroups": [API_GROUP],
        "resources": [model.resource],
        "resourceNames": [model.name],
        "verbs": ["get", "update", "patch"],
    }
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": namespace, "labels": labels},
    }
    if not model.cluster_scoped:
        local = {"name": account, "namespace": namespace, "labels": labels}
        return [
            service_account,
            {"apiVersion": f"{RBAC_API}/v1", "kind": "Role", "metadata": local, "rules": [rule]},
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "RoleBinding",
                "metadata": local,
                "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": account},
                "subjects": [subject],
            },
        ]
    role = f"ome-metadata-{_stem(model.name, 40)}-{_digest(*_identity(model))[:8]}"
    binding = f"ome-metadata-{_stem(model.name, 40)}-{_digest(*_identity(model), namespace)[:8]}"
    return [
        service_account,
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": labels},
            "rules": [rule],
        },
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding, "labels": labels},
            "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": role},
            "subjects": [subject],
        },
    ]


def pod_rule(model: Model, namespace: str) -> dict[str, Any]:
    """The customize rule for the model's Job pods, whose termination messages explain failures."""
    return {
        "apiVersion": "v1",
        "resource": "pods",
        "namespace": namespace,
        "labelSelector": {"matchLabels": model_labels(model)},
    }


SUCCEEDED = "Succeeded"
RUNNING = "Running"
FAILED = "Failed"


@dataclass(frozen=True)
class JobOutcome:
    """What one observed Job says: its result, the condition reason to report, and details."""

    result: str
    reason: str
    detail: str = ""
    failed_at: str | None = None


def read_outcome(job: dict[str, Any]) -> JobOutcome:
    """Map a Job's conditions onto the MetadataReady reasons of the contract."""
    status = field(job, "status")
    spec = field(job, "spec")
    true = {
        item["type"]: item
        for item in status.get("conditions") or []
        if isinstance(item, dict) and item.get("status") == "True" and isinstance(item.get("type"), str)
    }
    if "Complete" in true:
        return JobOutcome(SUCCEEDED, "MetadataExtracted")
    failure = true.get("FailureTarget") or true.get("Failed")
    if failure is not None:
        first = parse_time(failure.get("lastTransitionTime"))
        reason = "JobDeadlineExceeded" if failure.get("reason") == "DeadlineExceeded" else "JobFailed"
        detail = ": ".join(str(part) for part in (failure.get("reason"), failure.get("message")) if part)
        return JobOutcome(FAILED, reason, detail, format_time(first) if first else None)
    if spec.get("suspend") is True or "Suspended" in true:
        return JobOutcome(RUNNING, "JobSuspended")
    return JobOutcome(RUNNING, "JobRunning")


def termination_message(job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """The agent's last words from the Job's most recently finished pod, if the pods were sent."""
    name = job["metadata"]["name"]
    namespace = job["metadata"].get("namespace")
    finished: list[tuple[str, str, str]] = []
    for pod in pods:
        metadata = pod["metadata"]
        labels = field(metadata, "labels")
        if metadata.get("namespace") != namespace or all(labels.get(key) != name for key in JOB_NAME_LABELS):
            continue
        status = field(pod, "status")
        for container in status.get("containerStatuses") or []:
            if not isinstance(container, dict) or container.get("name") != CONTAINER:
                continue
            for state_key in ("state", "lastState"):
                state = container.get(state_key)
                terminated = state.get("terminated") if isinstance(state, dict) else None
                if isinstance(terminated, dict) and isinstance(terminated.get("message"), str):
                    text = terminated["message"].strip()
                    if text:
                        finished.append((str(terminated.get("finishedAt") or ""), metadata["name"], text))
    if not finished:
        return ""
    text = max(finished)[2]
    return text if len(text) <= TERMINATION_MESSAGE_LIMIT else "…" + text[-TERMINATION_MESSAGE_LIMIT:]
