"""What Metacontroller does with a 200 answer, enough to feed it back to the hook.

It creates desired children that are missing (as the API server would return them),
deletes observed children that are no longer desired, never updates an existing child
(the ``OnDelete`` strategy), and replaces the parent's status, injecting
``observedGeneration``. Keys follow hook version v2 (``namespace/name``).
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime
from typing import Any

from hooks.conditions import format_time

TYPE_KEYS = {
    ("batch/v1", "Job"): "Job.batch/v1",
    ("v1", "ServiceAccount"): "ServiceAccount.v1",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role.rbac.authorization.k8s.io/v1",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding.rbac.authorization.k8s.io/v1",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole.rbac.authorization.k8s.io/v1",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding.rbac.authorization.k8s.io/v1",
}


def object_key(obj: dict[str, Any]) -> str:
    namespace = obj["metadata"].get("namespace")
    return f"{namespace}/{obj['metadata']['name']}" if namespace else obj["metadata"]["name"]


def _uid(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def materialize(desired: dict[str, Any], parent: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A desired child as the API server returns it right after Metacontroller created it."""
    created = copy.deepcopy(desired)
    metadata = created["metadata"]
    metadata.setdefault("labels", {})["controller-uid"] = parent["metadata"]["uid"]
    metadata.update(
        {
            "uid": _uid(object_key(created) + created["kind"]),
            "resourceVersion": "900001",
            "creationTimestamp": format_time(now),
            "ownerReferences": [
                {
                    "apiVersion": parent["apiVersion"],
                    "kind": parent["kind"],
                    "name": parent["metadata"]["name"],
                    "uid": parent["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
    )
    if created["kind"] == "Job":
        created["status"] = {"active": 1, "ready": 0, "terminating": 0, "startTime": format_time(now),
                             "uncountedTerminatedPods": {}}
    return created


def apply(request: dict[str, Any], response: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The next request Metacontroller would send once the answer has been applied."""
    following = copy.deepcopy(request)
    parent = following["parent"]
    status = copy.deepcopy(response["status"])
    if "generation" in parent["metadata"]:
        status["observedGeneration"] = parent["metadata"]["generation"]
    parent["status"] = status
    observed = following.setdefault("children", {})
    desired: dict[str, dict[str, Any]] = {}
    for child in response.get("children", []):
        type_key = TYPE_KEYS[(child["apiVersion"], child["kind"])]
        desired.setdefault(type_key, {})[object_key(child)] = child
    for type_key, group in observed.items():
        wanted = desired.get(type_key, {})
        kept = {
            key: obj
            for key, obj in group.items()
            if any(obj["metadata"]["name"] == want["metadata"]["name"]
                   and obj["metadata"].get("namespace") == want["metadata"].get("namespace")
                   for want in wanted.values())
        }
        for key, want in wanted.items():
            if not any(obj["metadata"]["name"] == want["metadata"]["name"]
                       and obj["metadata"].get("namespace") == want["metadata"].get("namespace")
                       for obj in kept.values()):
                kept[key] = materialize(want, parent, now)
        observed[type_key] = kept
    return following
