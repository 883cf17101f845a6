"""What the API server's audit log says a story cost: every write, by whom, about which model.

The tier's audit policy (``control_plane.AUDIT_POLICY``) records every request but reads and
leases at the Metadata level, one ``ResponseComplete`` event each, with the user, the verb,
the object (resource, subresource, namespace, name) and the HTTP code. A write belongs to a
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

from tests.metacontroller import identities

WRITES = ("create", "update", "patch", "delete", "deletecollection")
MODEL_RESOURCES = ("basemodels", "clusterbasemodels")
CHILD_RESOURCES = ("jobs", "serviceaccounts", "configmaps", "roles", "rolebindings", "clusterroles", "clusterrolebindings")
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


def writes(log: Path, since: datetime, until: datetime) -> Iterator[Write]:
    """Every write the log recorded between ``since`` and ``until``."""
    with open(log, encoding="utf-8") as lines:
        for line in lines:
            event: dict[str, Any] = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITES:
                continue
            when = datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00"))
            if not since <= when <= until:
                continue
            target = event.get("objectRef") or {}
            yield Write(event["user"]["username"], event["verb"], target.get("resource", ""), target.get("subresource", ""),
                        target.get("namespace", ""), target.get("name", ""), int((event.get("responseStatus") or {}).get("code", 0)),
                        when)


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
        if write.resource in MODEL_RESOURCES:
            return write.name == self.name and (self.kind == "ClusterBaseModel" or write.namespace == self.namespace)
        if (write.namespace, write.name) in self.elsewhere:
            return True
        if write.namespace:
            return write.namespace == self.namespace
        return self.name in write.name


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
