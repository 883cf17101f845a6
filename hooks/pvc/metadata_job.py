"""Build the metadata Job, the ServiceAccount and RBAC it runs with, and the record.

Metacontroller's ``OnDelete`` strategy never updates an existing child, so the name of
every child but the record is derived from everything its content depends on: one name,
one content. The record (the ``ExtractionRecord`` that remembers the attempts) is the
exception: one name per model, updated in place (``InPlace``) when an attempt ends.

A model's ServiceAccount, Role and RoleBinding share one name, and its Jobs' names are
that name followed by a short hash of the URI and the attempt, so ``kubectl get`` shows
which grant belongs to which Job.

A model's names depend on nothing but its identity, its URI and the attempt, which are the
same on every sync of it: they are derived once and remembered (bounded, for the models
synced lately), as strings, which nothing can change. The Job and its access objects are
built afresh for each answer, which costs less than copying remembered ones would, and no
answer can then reach into another's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import replace
from typing import Any, Iterable, NamedTuple

from hooks.pvc.observation import RECORD_API_VERSION, RECORD_KIND
from hooks.pvc.storage_uri import PVCLocation
from hooks.request import API_GROUP, BadRequest, Model, field
from hooks.settings import JobSettings

CONTAINER = "model-metadata"
VOLUME = "model"
MANAGED_BY = "ome-basemodel-hook"
APP_NAME = "ome-model-metadata"

ATTEMPT_LABEL = "ome.io/metadata-attempt"
ATTEMPT_NUMBER = re.compile(r"[1-9][0-9]{0,8}")
STORAGE_URI_ANNOTATION = "ome.io/storage-uri"

RBAC_API = "rbac.authorization.k8s.io"


@functools.lru_cache(maxsize=4096)
def _digest(*parts: str) -> str:
    """A stable fingerprint of name parts, for names that must change with them.

    Remembered for the models synced lately: each sync derives a model's names again
    (its access objects', and its Job's for every attempt the settings allow)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _stem(name: str, limit: int) -> str:
    """A readable prefix of a model name that is also a DNS-1123 label fragment."""
    return name.replace(".", "-")[:limit].strip("-") or "model"


class Identity(NamedTuple):
    """What tells one model from every other, BaseModel and ClusterBaseModel alike, and
    all its children's names and contents are derived from ("" namespace: cluster-scoped)."""

    kind: str
    namespace: str
    name: str


class Attempt(NamedTuple):
    """One extraction attempt: where the model's files are, the URI it concerns, its number."""

    location: PVCLocation
    storage_uri: str
    number: int


def _identity(model: Model) -> Identity:
    return Identity(model.kind, model.namespace or "", model.name)


def label_value(text: str) -> str:
    """Label values hold at most 63 characters; longer names keep a prefix and a hash."""
    if len(text) <= 63:
        return text
    return f"{text[:54].rstrip('-.')}-{_digest(text)[:8]}"


def job_name(model: Model, storage_uri: str, attempt: int) -> str:
    """Changes with the URI and the attempt; distinct for BaseModel and ClusterBaseModel."""
    return _job_name(_identity(model), storage_uri, attempt)


def job_names(model: Model, storage_uri: str, attempts: Iterable[int]) -> dict[str, int]:
    """The attempts by the name of their Job, as named now and as release 0.1.0 named them
    (the ServiceAccount's stem and a hash of its own): observed Jobs are recognised by name,
    and one that runs across an upgrade of the hook is still the model's."""
    identity = _identity(model)
    return {
        name: attempt
        for attempt in attempts
        for name in (_job_name(identity, storage_uri, attempt), _release_010_job_name(identity, storage_uri, attempt))
    }


def model_jobs(model: Model, jobs: list[dict[str, Any]], namespace: str, attempts: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The observed Jobs built for the model's current URI, by attempt.

    A Job is recognised by its name alone: one this hook derives for the URI and an
    attempt, so nothing foreign is adopted and nothing of ours is missed. The attempts
    tried are ``attempts`` (every one the settings allow, and the one the record
    remembers) and the one a Job's attempt label names (a hint, checked against the name),
    so a Job survives a lost record, a lowered maximum and a tampered label alike. A Job
    of ours outside ``namespace``, where the model's Jobs run, is refused rather than
    guessed at."""
    if not jobs:
        return {}
    hinted = {_attempt_hint(job) for job in jobs} - {None}
    derived = job_names(model, model.storage_uri, {*attempts, *hinted} - {0})
    found = {}
    for job in jobs:
        attempt = derived.get(job["metadata"]["name"])
        if attempt is None:
            continue
        if job["metadata"]["namespace"] != namespace:
            raise BadRequest(
                f"observed Job {job['metadata']['namespace']}/{job['metadata']['name']} has the name this hook "
                f"gives attempt {attempt} for {model.storage_uri!r}, but that Job belongs in namespace "
                f"{namespace}; refusing to guess which is the model's"
            )
        found[attempt] = job
    return found


def _attempt_hint(job: dict[str, Any]) -> int | None:
    """The attempt a Job's label claims, if it reads as one."""
    raw = field(job["metadata"], "labels").get(ATTEMPT_LABEL)
    return int(raw) if isinstance(raw, str) and ATTEMPT_NUMBER.fullmatch(raw) else None


@functools.lru_cache(maxsize=4096)
def _job_name(identity: Identity, storage_uri: str, attempt: int) -> str:
    """The model's own name followed by the attempt's hash: at most 36 + 10 + 8 + 1 + 6 = 61
    characters. Remembered: each sync derives the name of every attempt the settings allow."""
    return f"{_own_name(identity)}-{_digest(*identity, storage_uri, str(attempt))[:6]}"


def _release_010_job_name(identity: Identity, storage_uri: str, attempt: int) -> str:
    """A Job's name as release 0.1.0 gave it."""
    return f"{_stem(identity.name, 36)}-metadata-{_digest(*identity, storage_uri, str(attempt))[:10]}"


def record_name(model: Model) -> str:
    """The name of the model's record."""
    return _own_name(_identity(model))


def _own_name(identity: Identity) -> str:
    """The name of each object a model has exactly one of: its record, its ServiceAccount
    and, for a BaseModel, the Role and RoleBinding that grant it (a cluster-wide grant's
    names start with ``ome-metadata-``). Distinct for a BaseModel and a ClusterBaseModel
    of the same name."""
    return f"{_stem(identity.name, 36)}-metadata-{_digest(*identity)[:8]}"


def model_labels(model: Model) -> dict[str, str]:
    """Labels every child and every Job pod carries; stable across attempts, so the
    customize hook (cached per parent generation) can select the pods of any attempt."""
    return _labels(_identity(model))


def _labels(identity: Identity) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "ome.io/model-kind": identity.kind,
    }
    if not identity.namespace:
        labels["ome.io/clusterbasemodel"] = label_value(identity.name)
    else:
        labels["ome.io/basemodel-namespace"] = identity.namespace
        labels["ome.io/basemodel"] = label_value(identity.name)
    return labels


def build_job(model: Model, attempt: Attempt, settings: JobSettings, name: str) -> dict[str, Any]:
    """The Job that mounts the PVC read-only and lets ``ome-agent`` fill the model's spec,
    under ``name``: the one ``job_names`` derives for the attempt (an observed Job keeps the
    one it was created with)."""
    return _job(_identity(model), attempt, settings, name)


def _job(identity: Identity, attempt: Attempt, settings: JobSettings, name: str) -> dict[str, Any]:
    location = attempt.location
    scope = ["--cluster-scoped"] if not identity.namespace else ["--basemodel-namespace", identity.namespace]
    resources = {
        "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
        "limits": {"cpu": settings.cpu_limit, "memory": settings.memory_limit},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": location.namespace,
            "labels": {**_labels(identity), ATTEMPT_LABEL: str(attempt.number)},
            "annotations": {STORAGE_URI_ANNOTATION: attempt.storage_uri},
        },
        "spec": {
            "backoffLimit": settings.backoff_limit,
            "activeDeadlineSeconds": settings.active_deadline_seconds,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": _labels(identity)},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": _own_name(identity),
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
                                identity.name,
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
    return _access(_identity(model), model.resource, namespace)


def _access(identity: Identity, resource: str, namespace: str) -> list[dict[str, Any]]:
    """The ServiceAccount and its grant: a Role in the model's namespace for a BaseModel,
    a ClusterRole for a ClusterBaseModel (which has no namespace to hold a Role)."""
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": _own_name(identity), "namespace": namespace, "labels": _labels(identity)},
    }
    grant = _namespaced_grant if identity.namespace else _cluster_grant
    return [service_account, *grant(identity, resource, namespace)]


def _rule(identity: Identity, resource: str) -> dict[str, Any]:
    return {
        "apiGroups": [API_GROUP],
        "resources": [resource],
        "resourceNames": [identity.name],
        "verbs": ["get", "update", "patch"],
    }


def _subject(identity: Identity, namespace: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": _own_name(identity), "namespace": namespace}


def _namespaced_grant(identity: Identity, resource: str, namespace: str) -> list[dict[str, Any]]:
    name = _own_name(identity)
    local = {"name": name, "namespace": namespace, "labels": _labels(identity)}
    return [
        {"apiVersion": f"{RBAC_API}/v1", "kind": "Role", "metadata": local, "rules": [_rule(identity, resource)]},
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "RoleBinding",
            "metadata": local,
            "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": name},
            "subjects": [_subject(identity, namespace)],
        },
    ]


def _cluster_grant(identity: Identity, resource: str, namespace: str) -> list[dict[str, Any]]:
    """Cluster-wide names of their own that say what they are for and share the model's hash
    with its ServiceAccount; the binding's also follows its subject's namespace, which its
    content depends on. At most 13 + 32 + 1 + 8 + 1 + 6 = 61 characters."""
    role = f"ome-metadata-{_stem(identity.name, 32)}-{_digest(*identity)[:8]}"
    binding = f"{role}-{_digest(*identity, namespace)[:6]}"
    return [
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": _labels(identity)},
            "rules": [_rule(identity, resource)],
        },
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding, "labels": _labels(identity)},
            "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": role},
            "subjects": [_subject(identity, namespace)],
        },
    ]


def build_record(model: Model, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The ``ExtractionRecord`` that remembers the model's extraction attempts.

    A kind of the hook's own, so no BaseModel CRD's status schema can prune it: whatever
    CRDs the cluster runs, a failed attempt stays counted and its retry spaced. It is
    updated in place (its CompositeController's strategy for it is InPlace)."""
    identity = _identity(model)
    return {
        "apiVersion": RECORD_API_VERSION,
        "kind": RECORD_KIND,
        "metadata": {"name": _own_name(identity), "namespace": namespace, "labels": _labels(identity)},
        "spec": spec,
    }


def built_with(job: dict[str, Any], settings: JobSettings) -> JobSettings:
    """The settings an observed Job was built with, read back from the fields they fill.

    An existing Job is returned exactly as it was built for its attempt, even after the
    settings changed, by building it again with its own settings. Everything else (its
    name, namespace, the PVC, the sub-path, the read-only mounts, the model it writes) is
    derived again, never copied, so an odd observed Job cannot move or widen what the
    hook asks for. A value of the wrong type or out of range keeps the current setting."""
    spec = field(job, "spec")
    pod = field(field(spec, "template"), "spec")
    container = _named(pod.get("containers"), CONTAINER)
    mount = _named(container.get("volumeMounts"), VOLUME)
    args = container.get("args")
    resources = field(container, "resources")
    security, requests, limits = field(pod, "securityContext"), field(resources, "requests"), field(resources, "limits")
    found: dict[str, Any] = {
        "backoff_limit": spec.get("backoffLimit"),
        "active_deadline_seconds": spec.get("activeDeadlineSeconds"),
        "ttl_seconds_after_finished": spec.get("ttlSecondsAfterFinished"),
        "run_as_user": security.get("runAsUser"),
        "run_as_group": security.get("runAsGroup"),
        "agent_image": container.get("image"),
        "agent_config": _flag_value(args, "--config"),
        "mount_path": mount.get("mountPath"),
        "cpu_request": requests.get("cpu"),
        "memory_request": requests.get("memory"),
        "cpu_limit": limits.get("cpu"),
        "memory_limit": limits.get("memory"),
    }
    differing = {
        key: value
        for key, value in found.items()
        if value != getattr(settings, key) and _fits(value, getattr(settings, key))
    }
    return replace(settings, **differing) if differing else settings


def _named(items: Any, name: str) -> dict[str, Any]:
    """The item of a Kubernetes list of objects with this name, or an empty one."""
    if not isinstance(items, list):
        return {}
    return next((item for item in items if isinstance(item, dict) and item.get("name") == name), {})


def _flag_value(args: Any, flag: str) -> Any:
    """The value after ``flag`` in a container's args, or None."""
    if not isinstance(args, list) or flag not in args[:-1]:
        return None
    return args[args.index(flag) + 1]


def _fits(value: Any, current: Any) -> bool:
    """Whether an observed value can stand for a setting: same type, and a sane one."""
    if isinstance(current, bool) or type(value) is not type(current):
        return False
    if isinstance(value, int):
        return 0 < value < 2**31
    return value != ""
