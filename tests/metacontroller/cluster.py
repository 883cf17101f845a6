"""A small API server: objects, their bookkeeping, admission, watches and garbage collection.

It does what the Kubernetes API server does to the objects Metacontroller and the hook
deal with, and nothing more: uid, resourceVersion, creationTimestamp and generation on
create; a new resourceVersion (and a generation bump on a spec change) only when an
update really changes the object, so a no-op write sends no watch event; status only
through the status subresource of a CRD, pruned by its structural schema and checked
against it; strict schema validation of built-in objects; validating admission by the
ValidatingAdmissionPolicies and bindings it stores (``tests/admission.py``), for every
write, by the user who makes it; graceful deletion with finalizers (a deletionTimestamp
and, for objects with a generation, the generation bump ``BeforeDelete`` makes);
background garbage collection of dependents by ownerReference.

The watch is synchronous: a watcher sees every change as it happens, which is what
informers converge to. Every change is numbered and kept (``history``), so a lagging
informer's view can be rebuilt (``list_as_of``); and every write passes ``before_write``
first, where a perturbation (``tests/metacontroller/perturbation.py``) may let another
writer's update land between the writer's read and its write.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import yaml

from hooks.conditions import format_time
from tests.admission import BINDING, POLICY, Admission, Attributes
from tests.metacontroller.identities import GARBAGE_COLLECTOR, KUBECTL
from tests.metacontroller.selection import Obj, clone, controller_of
from tests.schemas import CRD_FILES, KUBERNETES_VERSIONS, errors_of, kubernetes_errors, record_errors

Watcher = Callable[[str, "Obj | None", "Obj | None"], None]
Key = tuple[str, str, "str | None", str]
BeforeWrite = Callable[[str, str, "Obj"], None]
"""``(user, verb, object)``, called as a write arrives, before the server reads anything;
``verb`` is ``create``, ``update``, ``update status`` or ``delete``."""


@dataclass(frozen=True)
class Change:
    """One stored change: its number, the object's key, the object before and after
    (None before a create, after a removal)."""

    sequence: int
    key: Key
    old: "Obj | None"
    new: "Obj | None"


@dataclass(frozen=True)
class Resource:
    """What discovery says about one resource: its kind, scope and bookkeeping."""

    api_version: str
    resource: str
    kind: str
    namespaced: bool
    generation: bool = False
    status_subresource: bool = False
    validated: bool = True

    @property
    def type_key(self) -> str:
        """How Metacontroller names the type in ``children`` and ``related`` (``Kind.apiVersion``)."""
        return f"{self.kind}.{self.api_version}"


RESOURCES = [
    Resource("ome.io/v1beta1", "basemodels", "BaseModel", True, True, True, False),
    Resource("ome.io/v1beta1", "clusterbasemodels", "ClusterBaseModel", False, True, True, False),
    Resource("batch/v1", "jobs", "Job", True, True),
    Resource("v1", "pods", "Pod", True),
    Resource("v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    Resource("v1", "serviceaccounts", "ServiceAccount", True),
    Resource("v1", "configmaps", "ConfigMap", True),
    Resource("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords", "ExtractionRecord", True, True, False, False),
    Resource("v1", "nodes", "Node", False),
    Resource("v1", "namespaces", "Namespace", False),
    Resource("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
    Resource("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Resource("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", POLICY, False, True),
    Resource("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", BINDING, False, True),
]
WITHOUT_STATUS = {"ConfigMap", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
"""Kinds with no status field: an update's ``status`` is dropped (field validation "Warn", the server default)."""
BY_RESOURCE = {(item.api_version, item.resource): item for item in RESOURCES}
BY_KIND = {(item.api_version, item.kind): item for item in RESOURCES}
POLICY_TYPE = ("admissionregistration.k8s.io/v1", POLICY)
BINDING_TYPE = ("admissionregistration.k8s.io/v1", BINDING)


def group_of(api_version: str) -> str:
    """``schema.ParseGroupVersion(...).Group``: ``""`` for the core group's ``v1``."""
    return api_version.rpartition("/")[0]


def resource_of(api_version: str, resource: str) -> Resource:
    """Discovery by plural name, as a CompositeController or a customize rule names a type."""
    try:
        return BY_RESOURCE[(api_version, resource)]
    except KeyError:
        raise ApiError(404, f"the server could not find the requested resource {resource!r} in {api_version}") from None


def kind_of(obj: Obj) -> Resource:
    """Discovery by kind, as the API server routes an object it is sent."""
    try:
        return BY_KIND[(str(obj.get("apiVersion")), str(obj.get("kind")))]
    except KeyError:
        raise ApiError(404, f"no kind {obj.get('kind')!r} is registered for version {obj.get('apiVersion')!r}") from None


class ApiError(Exception):
    """An API server refusal, with its HTTP code (404 NotFound, 409 Conflict/AlreadyExists, 422 Invalid,
    and the code of an admission policy's reason: 403 Forbidden for the fence)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class Clock:
    """The cluster's time; only the simulator moves it."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def ref(obj: Obj) -> tuple[str, str, str | None, str]:
    """The identity of an object in the store."""
    metadata = obj["metadata"]
    return obj["apiVersion"], obj["kind"], metadata.get("namespace") or None, metadata["name"]


def _uid(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class Cluster:
    """The store behind the API, with watchers called on every real change."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.status_schemas: dict[str, dict[str, Any]] = {}
        """A model kind's status schema where another CRD than the shipped one is installed."""
        self.objects: dict[Key, Obj] = {}
        self.watchers: list[Watcher] = []
        self.history: list[Change] = []
        self.before_write: BeforeWrite = _nothing
        self._version = 1000
        self._created = 0
        self._admission: Admission | None = None

    # --- reading -----------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj:
        try:
            return clone(self.objects[(api_version, kind, namespace or None, name)])
        except KeyError:
            raise ApiError(404, f"{kind} {namespace or ''}/{name} not found") from None

    def find(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        stored = self.objects.get((api_version, kind, namespace or None, name))
        return clone(stored) if stored is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None, controller_uid: str | None = None) -> list[Obj]:
        """Every object of a kind (in one namespace when given; whose controllerRef has
        ``controller_uid`` when given), sorted as a lister would be. Only the matches are
        copied: a decorator lists its attachments of every parent once per sync."""
        matching = [
            (key, obj) for key, obj in self.objects.items()
            if key[0] == api_version and key[1] == kind and (namespace is None or key[2] == namespace)
            and (controller_uid is None or (controller_of(obj) or {}).get("uid") == controller_uid)
        ]
        return [clone(obj) for _, obj in sorted(matching, key=lambda item: str(item[0]))]

    @property
    def sequence(self) -> int:
        """The number of the latest change (0 before any)."""
        return self.history[-1].sequence if self.history else 0

    def list_as_of(self, sequence: int, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        """``list`` as it answered right after change ``sequence``: what an informer that has
        seen no later change holds."""
        stored = {key: obj for key, obj in self.objects.items() if key[0] == api_version and key[1] == kind}
        for change in reversed(self.history):
            if change.sequence <= sequence:
                break
            if change.key[0] == api_version and change.key[1] == kind:
                if change.old is None:
                    stored.pop(change.key, None)
                else:
                    stored[change.key] = change.old
        return [clone(obj) for key, obj in sorted(stored.items(), key=lambda item: str(item[0]))
                if namespace is None or key[2] == namespace]

    def changes_since(self, sequence: int) -> list[Change]:
        """The changes after ``sequence``, oldest first."""
        index = len(self.history)
        while index > 0 and self.history[index - 1].sequence > sequence:
            index -= 1
        return self.history[index:]

    # --- writing -----------------------------------------------------------------------

    def create(self, obj: Obj, manager: str = "kubectl-client-side-apply", user: str = KUBECTL) -> Obj:
        """Validate, default, admit and store a new object, as the API server returns it."""
        self.before_write(user, "create", obj)
        resource = kind_of(obj)
        created = clone(obj)
        metadata = created.setdefault("metadata", {})
        if resource.namespaced and not metadata.get("namespace"):
            raise ApiError(422, f"{resource.kind} {metadata.get('name')}: metadata.namespace is required")
        if not resource.namespaced:
            metadata.pop("namespace", None)
        if ref(created) in self.objects:
            raise ApiError(409, f"{resource.kind} {metadata.get('namespace', '')}/{metadata['name']} already exists")
        _check(resource, created)
        if resource.status_subresource:
            created.pop("status", None)
        self._created += 1
        metadata.update(uid=_uid(f"{ref(created)}#{self._created}"), creationTimestamp=format_time(self.clock.now))
        if resource.generation:
            metadata["generation"] = 1
        if resource.kind == "Job":
            _default_job(created)
        self._admit("CREATE", resource, user, created, None)
        metadata["resourceVersion"] = self._next_version()
        _record_manager(created, manager, None, self.clock.now)
        self.objects[ref(created)] = created
        self._notify("ADDED", None, created)
        return clone(created)

    def update(self, obj: Obj, manager: str = "kubectl-edit", user: str = KUBECTL) -> Obj:
        """Replace an object (not its status where a status subresource exists)."""
        self.before_write(user, "update", obj)
        current = self.objects.get(ref(obj))
        if current is None:
            raise ApiError(404, f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']} not found")
        resource = kind_of(obj)
        self._check_preconditions(obj, current)
        updated = clone(obj)
        if resource.status_subresource:
            keep_field(updated, current, "status")
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation", "resourceVersion", "managedFields"):
            keep_field(updated["metadata"], current["metadata"], key)
        if resource.validated and resource.kind in WITHOUT_STATUS:
            updated.pop("status", None)
        _check(resource, updated)
        if resource.generation and updated.get("spec") != current.get("spec"):
            updated["metadata"]["generation"] = current["metadata"]["generation"] + 1
        self._admit("UPDATE", resource, user, updated, current)
        return self._store(current, updated, manager, None)

    def update_status(self, obj: Obj, manager: str = "kubectl-edit", user: str = KUBECTL) -> Obj:
        """The status subresource: only ``.status`` changes, pruned and checked by the CRD's schema.
        Admission sees the stored object with the new status (the status strategy keeps the
        stored spec and metadata), and a no-op write is admitted, or refused, all the same."""
        self.before_write(user, "update status", obj)
        current = self.objects.get(ref(obj))
        if current is None or current["metadata"]["uid"] != obj["metadata"].get("uid", current["metadata"]["uid"]):
            raise ApiError(404, f"{obj['kind']} {obj['metadata']['name']} not found")
        self._check_preconditions(obj, current)
        updated = clone(current)
        schema = self.status_schemas.get(obj["kind"]) or crd_status_schema(obj["kind"])
        status = prune(schema, clone(obj.get("status")))
        problems = _status_problems(schema, status)
        if problems:
            raise ApiError(422, f"{obj['kind']} {obj['metadata']['name']} is invalid: {'; '.join(problems)}")
        updated["status"] = status
        self._admit("UPDATE", kind_of(obj), user, updated, current, "status")
        return self._store(current, updated, manager, "status")

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str, uid: str | None = None,
               user: str = KUBECTL) -> None:
        """Graceful deletion: finalizers hold the object with a deletionTimestamp; without any it goes,
        and its dependents follow (background propagation)."""
        key = (api_version, kind, namespace or None, name)
        current = self.objects.get(key)
        if current is not None:
            self.before_write(user, "delete", current)
            current = self.objects.get(key)
        if current is None or (uid is not None and current["metadata"]["uid"] != uid):
            raise ApiError(404 if current is None else 409, f"{kind} {namespace or ''}/{name}: not found or not uid {uid}")
        self._admit("DELETE", kind_of(current), user, None, current)
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return
            updated = clone(current)
            updated["metadata"]["deletionTimestamp"] = format_time(self.clock.now)
            if "generation" in updated["metadata"]:
                updated["metadata"]["generation"] += 1
            self._store(current, updated, None, None)
            return
        self._remove(key)

    def restore(self, obj: Obj) -> None:
        """Put an object saved from a real cluster back as it was (uid, resourceVersion and all), silently."""
        self.objects[ref(obj)] = clone(obj)
        self._forget_policies(obj)
        version = obj["metadata"].get("resourceVersion", "")
        if version.isdigit():
            self._version = max(self._version, int(version))

    # --- internals ---------------------------------------------------------------------

    def _admit(self, operation: str, resource: Resource, user: str, obj: Obj | None, old: Obj | None,
               subresource: str = "") -> None:
        """Validating admission where ``registry/generic/registry/store.go`` runs it: after the
        strategy's validation, before anything is stored. A refusal raises the API server's
        code and message."""
        if self._admission is None:
            self._admission = Admission([*self.list(*POLICY_TYPE), *self.list(*BINDING_TYPE)])
        if not self._admission.policies:
            return
        metadata = (old if obj is None else obj)["metadata"]
        refusal = self._admission.review(Attributes(
            operation, resource.api_version, resource.resource, resource.kind, metadata["name"],
            metadata.get("namespace") or "", subresource, user, obj, old))
        if refusal is not None:
            raise ApiError(refusal.code, refusal.message)

    def _forget_policies(self, obj: Obj | None) -> None:
        """A policy or binding changed: the next write reads them again."""
        if obj is not None and obj.get("kind") in (POLICY, BINDING):
            self._admission = None

    def _check_preconditions(self, obj: Obj, current: Obj) -> None:
        sent = obj["metadata"].get("resourceVersion")
        if sent is not None and sent != current["metadata"]["resourceVersion"]:
            raise ApiError(409, f"Operation cannot be fulfilled on {obj['kind']} {obj['metadata']['name']}: "
                                "the object has been modified")

    def _store(self, current: Obj, updated: Obj, manager: str | None, subresource: str | None) -> Obj:
        """Write only a real change (its writer then noted in ``managedFields``); an object
        losing its last finalizer while deleted goes."""
        updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if updated == current:
            return clone(current)
        if manager is not None:
            _record_manager(updated, manager, subresource, self.clock.now)
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            self.objects[ref(updated)] = updated
            self._remove(ref(updated))
            return clone(updated)
        updated["metadata"]["resourceVersion"] = self._next_version()
        self.objects[ref(updated)] = updated
        self._notify("MODIFIED", current, updated)
        return clone(updated)

    def _remove(self, key: Key) -> None:
        gone = self.objects.pop(key)
        self._notify("DELETED", gone, None)
        uid = gone["metadata"]["uid"]
        for dependent in [obj for obj in self.objects.values()
                          if any(owner.get("uid") == uid for owner in obj["metadata"].get("ownerReferences") or [])]:
            if ref(dependent) in self.objects:
                self.delete(*ref(dependent), user=GARBAGE_COLLECTOR)

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _notify(self, event: str, old: Obj | None, new: Obj | None) -> None:
        changed = new if new is not None else old
        assert changed is not None
        self.history.append(Change(self.sequence + 1, ref(changed), old, new))
        self._forget_policies(new or old)
        for watcher in list(self.watchers):
            watcher(event, clone(old), clone(new))


def _nothing(user: str, verb: str, obj: Obj) -> None:
    """No perturbation: a write goes straight on."""


SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp", "managedFields")


def _fields(value: Any) -> dict[str, Any]:
    """A ``FieldsV1`` set: every map key as ``f:<key>``, lists and values as leaves."""
    if isinstance(value, dict):
        return {f"f:{key}": _fields(item) for key, item in value.items()}
    return {}


def _record_manager(obj: Obj, manager: str, subresource: str | None, now: datetime) -> None:
    """The writer's ``managedFields`` entry, as server-side field tracking keeps it after an Update."""
    if subresource:
        owned = {"status": obj.get("status", {})}
    else:
        owned = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "metadata", "status")}
        owned["metadata"] = {key: value for key, value in obj["metadata"].items() if key not in SERVER_METADATA}
    entry: dict[str, Any] = {"manager": manager, "operation": "Update", "apiVersion": obj["apiVersion"],
                             "time": format_time(now), "fieldsType": "FieldsV1", "fieldsV1": _fields(owned)}
    if subresource:
        entry["subresource"] = subresource
    kept = [item for item in obj["metadata"].get("managedFields") or []
            if (item.get("manager"), item.get("subresource")) != (manager, subresource)]
    obj["metadata"]["managedFields"] = [*kept, entry]


def keep_field(target: Obj, source: Obj, key: str) -> None:
    """Carry a server-owned field over from the stored object (or keep it absent)."""
    if key in source:
        target[key] = clone(source[key])
    else:
        target.pop(key, None)


@lru_cache(maxsize=4096)
def _built_in_problems(serialized: str) -> tuple[str, ...]:
    """Strict validation is the slow part of a create; the same object is judged once."""
    return tuple(kubernetes_errors(json.loads(serialized), KUBERNETES_VERSIONS[-1]))


def _check(resource: Resource, obj: Obj) -> None:
    """What the API server checks of an object it is sent: a built-in one strictly, the
    hook's record by its CRD's schema (the models' spec is OME's, and not checked here)."""
    if resource.validated:
        _check_built_in(obj)
    elif resource.kind == "ExtractionRecord":
        problems = record_errors(obj)
        if problems:
            raise ApiError(422, f"{obj['kind']} {obj['metadata'].get('name')} is invalid: {'; '.join(problems)}")


def _check_built_in(obj: Obj) -> None:
    """The API server refuses a built-in object with an unknown or ill-typed field (strict field validation)."""
    problems = _built_in_problems(json.dumps(obj, sort_keys=True))
    if problems:
        raise ApiError(422, f"{obj['kind']} {obj['metadata'].get('name')} is invalid: {'; '.join(problems)}")


@lru_cache(maxsize=4096)
def _status_problems_cached(schema: str, serialized: str) -> tuple[str, ...]:
    return tuple(errors_of(json.loads(schema), json.loads(serialized)))


def _status_problems(schema: dict[str, Any], status: Any) -> tuple[str, ...]:
    return _status_problems_cached(json.dumps(schema, sort_keys=True), json.dumps(status, sort_keys=True))


OME_STATUS_FIELDS = ("lifecycle", "nodesFailed", "nodesReady", "state")


def ome_status_schema(kind: str) -> dict[str, Any]:
    """The status schema of OME's own CRD (its ``ome-crd`` chart): the shipped one's fields
    OME knows, nothing else, so the API server prunes the hook's conditions, storage and
    metadataExtraction (checked against OME's CRD in ``tests/install/test_crds.py``)."""
    ours = crd_status_schema(kind)
    return {"properties": {key: ours["properties"][key] for key in OME_STATUS_FIELDS}, "required": ["state"], "type": "object"}


@lru_cache(maxsize=None)
def crd_status_schema(kind: str) -> dict[str, Any]:
    """The status schema of the CRD shipped in ``metacontroller/crds/``, which the API server applies."""
    crd = yaml.safe_load(Path(CRD_FILES[kind]).read_text(encoding="utf-8"))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


def prune(schema: dict[str, Any], value: Any) -> Any:
    """Structural pruning: drop every object field the schema does not name, unless it
    preserves unknown fields or types them through ``additionalProperties``."""
    if isinstance(value, dict) and schema.get("type") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return value
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        pruned = {}
        for key, item in value.items():
            if key in properties:
                pruned[key] = prune(properties[key], item)
            elif isinstance(extra, dict):
                pruned[key] = prune(extra, item)
            elif extra is True:
                pruned[key] = item
        return pruned
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(schema["items"], item) for item in value]
    return value


def _default_job(job: Obj) -> None:
    """What the Job API's defaulting and PrepareForCreate add (batch/v1, Kubernetes 1.31)."""
    uid, name = job["metadata"]["uid"], job["metadata"]["name"]
    spec = job.setdefault("spec", {})
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
    spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    spec.setdefault("completions", 1)
    spec.setdefault("parallelism", 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {}).setdefault("labels", {}).update(generated)
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("dnsPolicy", "ClusterFirst")
    pod_spec.setdefault("schedulerName", "default-scheduler")
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in pod_spec.get("containers", []):
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
