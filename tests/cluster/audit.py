"""What the API server's audit log says a story cost: every write, by whom, about which model.

The tier's audit policy (``control_plane.AUDIT_POLICY``) records every request but reads and
leases at the Metadata level, one ``ResponseComplete`` event each, with the user, the verb,
the object (resource, subresource, namespace, name) and the HTTP code; Metacontroller's writes
of a model with their body too, to tell what each changed. A write belongs to a
story's model when it names the model itself, or one of the objects the hook made for it:
those live in the story's own namespace, or (cluster-scoped RBAC) carry the model's name.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from hooks.pvc.annotations import PREFIX as HOOK_PREFIX
from tests.metacontroller import identities

WRITES = ("create", "update", "patch", "delete", "deletecollection")
MODEL_RESOURCES = ("basemodels", "clusterbasemodels")
CHILD_RESOURCES = ("jobs", "serviceaccounts", "extractionrecords", "roles", "rolebindings", "clusterroles", "clusterrolebindings")
ACTORS = {
    identities.METACONTROLLER: "Metacontroller",
    identities.OME_MANAGER: "OME's manager",
    identities.KUBECTL: "user (kubectl)",
    "system:kube-scheduler": "scheduler (played)",
}


def actor(user: str) -> str:
    """A short name for a writer: kube-controller-manager's controllers and the Jobs' agents by their ServiceAccount."""
    if user in ACTORS:
        return ACTORS[user]
    if user.startswith("system:serviceaccount:kube-system:"):
        return user.rsplit(":", 1)[1]
    if user.startswith("system:node:"):
        return "kubelet (played)"
    if user.startswith("system:serviceaccount:"):
        return "agent (Job's ServiceAccount)"
    return user


@dataclass(frozen=True)
class Write:
    user: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    time: datetime

    @property
    def refused(self) -> bool:
        return self.code == 403

    @property
    def accepted(self) -> bool:
        return 200 <= self.code < 300


def _events(log: Path, since: datetime, until: datetime) -> Iterator[dict[str, Any]]:
    """The log's completed writes between ``since`` and ``until``, as it recorded them."""
    with open(log, encoding="utf-8") as lines:
        for line in lines:
            event: dict[str, Any] = json.loads(line)
            if event.get("stage") == "ResponseComplete" and event.get("verb") in WRITES and since <= _time(event) <= until:
                yield event


def _time(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00"))


def _write(event: dict[str, Any]) -> Write:
    target = event.get("objectRef") or {}
    return Write(event["user"]["username"], event["verb"], target.get("resource", ""), target.get("subresource", ""),
                 target.get("namespace", ""), target.get("name", ""), int((event.get("responseStatus") or {}).get("code", 0)),
                 _time(event))


def writes(log: Path, since: datetime, until: datetime) -> Iterator[Write]:
    """Every write the log recorded between ``since`` and ``until``."""
    return (_write(event) for event in _events(log, since, until))


@dataclass(frozen=True)
class Story:
    """The model a story is about and the namespace that holds its objects; ``elsewhere``, the
    (namespace, name) of objects made for it in other namespaces (OME's own PVC backend keeps
    its result ConfigMap and a RoleBinding in OME's namespace)."""

    kind: str
    name: str
    namespace: str
    elsewhere: frozenset[tuple[str, str]] = frozenset()

    def concerns(self, write: Write) -> bool:
        """The model's own writes, its namespace's, and (a ClusterBaseModel's grant being
        cluster-wide) the cluster-scoped ones named after it; a BaseModel has none of those."""
        if write.resource in MODEL_RESOURCES:
            return write.name == self.name and (self.kind == "ClusterBaseModel" or write.namespace == self.namespace)
        if (write.namespace, write.name) in self.elsewhere:
            return True
        if write.namespace:
            return write.namespace == self.namespace
        return self.kind == "ClusterBaseModel" and self.name in write.name


@dataclass(frozen=True)
class ModelWrite:
    """What one of Metacontroller's writes of a model set: the label keeper's labels and
    annotations (keys under the hook's prefix), and the finalizers (a CompositeController's
    own is how it holds a model it finalizes)."""

    why: dict[str, str]
    finalizers: tuple[str, ...]


def metacontroller_model_writes(log: Path, story: Story, since: datetime, until: datetime) -> list[ModelWrite]:
    """Metacontroller's writes of the story's model outside ``status`` that the API server
    took, in order; the policy keeps those writes' bodies (``AUDIT_POLICY``)."""
    found = []
    for event in _events(log, since, until):
        write = _write(event)
        if (write.user == identities.METACONTROLLER and write.resource in MODEL_RESOURCES and not write.subresource
                and write.accepted and story.concerns(write)):
            metadata = (event.get("requestObject") or {}).get("metadata") or {}
            why = {key: value for field in ("labels", "annotations") for key, value in (metadata.get(field) or {}).items()
                   if key.startswith(HOOK_PREFIX)}
            found.append(ModelWrite(why, tuple(metadata.get("finalizers") or ())))
    return found


def created(log: Path, story: Story, resource: str, since: datetime, until: datetime) -> list[str]:
    """The names of the objects of ``resource`` the API server created for the story, in order."""
    return [write.name for write in writes(log, since, until)
            if write.verb == "create" and write.resource == resource and write.accepted and story.concerns(write)]


def costs(log: Path, story: Story, since: datetime, until: datetime) -> dict[str, Counter[str]]:
    """Per actor: ``writes``, ``refused`` (403, the fence's answer), and the writes by what they
    are (``status write`` and ``model write``, each also counted as ``... accepted`` when the API
    server took it; ``create``, ``update``, ``delete`` of the hook's kinds of objects)."""
    found: dict[str, Counter[str]] = {}
    for write in writes(log, since, until):
        if not story.concerns(write):
            continue
        counts = found.setdefault(actor(write.user), Counter())
        counts["writes"] += 1
        counts["refused"] += write.refused
        if write.resource in MODEL_RESOURCES:
            written = "status write" if write.subresource == "status" else "model write"
            counts[written] += 1
            counts[f"{written} accepted"] += write.accepted
        elif write.resource in CHILD_RESOURCES:
            counts[{"patch": "update"}.get(write.verb, write.verb)] += 1
    return found
