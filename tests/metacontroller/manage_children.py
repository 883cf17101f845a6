"""Applying the desired children (``pkg/controller/common/manage_children.go``, dynamic apply).

``ManageChildren`` first deletes every observed child that is not desired (skipping those
already being deleted; background propagation, uid precondition), then creates each
missing desired child (last-applied annotation first, then the controllerRef) and, for
an existing one, computes the ``kubectl apply``-style 3-way merge: no change, or a child
being deleted, does nothing; otherwise ``OnDelete`` does nothing, ``Recreate`` deletes
(to recreate on a later sync) and ``InPlace`` updates. Failures are collected and the
others go on; NotFound on delete and AlreadyExists on create are swallowed.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tests.metacontroller.cluster import ApiError, Cluster, group_of, keep_field
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.selection import Obj, ObjectMap, clone

MANAGER = "metacontroller"
"""The field manager of every write Metacontroller makes (each one as ``METACONTROLLER``)."""
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
SYSTEM_FIELDS = ("selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "deletionGracePeriodSeconds")
MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")


def controller_ref(parent: Obj) -> dict[str, Any]:
    """``MakeControllerRef``."""
    return {
        "apiVersion": parent["apiVersion"],
        "kind": parent["kind"],
        "name": parent["metadata"]["name"],
        "uid": parent["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def manage_children(
    cluster: Cluster, strategies: dict[str, str], parent: Obj, observed: ObjectMap, desired: ObjectMap, counts: Counter[str]
) -> list[str]:
    """Delete, then create or update; ``strategies`` maps ``Kind.group`` to an update method."""
    errors: list[str] = []
    for type_key, group in observed.items():
        wanted = desired.get(type_key, {})
        for key, obj in group.items():
            if obj["metadata"].get("deletionTimestamp") or key in wanted:
                continue
            _delete(cluster, obj, counts, errors)
    for type_key, group in desired.items():
        seen = observed.get(type_key, {})
        for key, obj in group.items():
            if key in seen:
                _update(cluster, strategies, seen[key], obj, counts, errors)
            else:
                _create(cluster, parent, obj, counts, errors)
    return errors


def _delete(cluster: Cluster, obj: Obj, counts: Counter[str], errors: list[str]) -> None:
    metadata = obj["metadata"]
    counts["delete"] += 1
    counts[f"delete {obj['kind']}"] += 1
    try:
        cluster.delete(obj["apiVersion"], obj["kind"], metadata.get("namespace"), metadata["name"], uid=metadata["uid"],
                       user=METACONTROLLER)
    except ApiError as error:
        if error.code != 404:
            errors.append(f"can't delete {obj['kind']} {metadata.get('namespace')}/{metadata['name']}: {error}")


def _create(cluster: Cluster, parent: Obj, desired: Obj, counts: Counter[str], errors: list[str]) -> None:
    obj = clone(desired)
    metadata = obj["metadata"]
    metadata.setdefault("annotations", {})[LAST_APPLIED] = json.dumps(desired, sort_keys=True, separators=(",", ":"))
    metadata["ownerReferences"] = [*(metadata.get("ownerReferences") or []), controller_ref(parent)]
    counts["create"] += 1
    counts[f"create {obj['kind']}"] += 1
    try:
        cluster.create(obj, manager=MANAGER, user=METACONTROLLER)
    except ApiError as error:
        if error.code != 409:
            counts["create refused"] += 1
            errors.append(str(error))


def _update(cluster: Cluster, strategies: dict[str, str], observed: Obj, desired: Obj,
            counts: Counter[str], errors: list[str]) -> None:
    merged = apply_update(observed, desired)
    if merged == observed or observed["metadata"].get("deletionTimestamp"):
        return
    method = strategies.get(f"{observed['kind']}.{group_of(observed['apiVersion'])}", "OnDelete")
    if method in ("Recreate", "RollingRecreate"):
        _delete(cluster, observed, counts, errors)
    elif method in ("InPlace", "RollingInPlace"):
        counts["update"] += 1
        counts[f"update {observed['kind']}"] += 1
        try:
            cluster.update(merged, manager=MANAGER, user=METACONTROLLER)
        except ApiError as error:
            if error.code not in (404, 409):
                errors.append(str(error))


def apply_update(observed: Obj, desired: Obj) -> Obj:
    """``ApplyUpdate``: the 3-way merge of observed, last-applied and desired, with system
    metadata and status reverted to the observed ones and the new last-applied recorded."""
    annotations = observed["metadata"].get("annotations") or {}
    last_applied = json.loads(annotations[LAST_APPLIED]) if LAST_APPLIED in annotations else {}
    update = clone(desired)
    (update["metadata"].get("annotations") or {}).pop(LAST_APPLIED, None)
    merged = _merge(observed, last_applied, update)
    for key in SYSTEM_FIELDS:
        keep_field(merged["metadata"], observed["metadata"], key)
    keep_field(merged, observed, "status")
    merged["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(update, sort_keys=True, separators=(",", ":"))
    return merged


def _merge(observed: Any, last: Any, desired: Any) -> Any:
    """Maps merge field by field (a field applied before and no longer desired goes); lists
    of objects merge by their first common conventional key; anything else is replaced."""
    if isinstance(desired, dict) and isinstance(observed, dict):
        last = last if isinstance(last, dict) else {}
        merged = {key: clone(value) for key, value in observed.items() if not (key in last and key not in desired)}
        for key, value in desired.items():
            merged[key] = _merge(observed.get(key), last.get(key), value)
        return merged
    if isinstance(desired, list) and isinstance(observed, list):
        key = next((k for k in MERGE_KEYS if desired and all(isinstance(i, dict) and k in i for i in desired + observed)), None)
        if key is not None:
            by_key = {item[key]: item for item in observed}
            last_by_key = {item[key]: item for item in last or [] if isinstance(item, dict) and key in item}
            return [_merge(by_key.get(item[key]), last_by_key.get(item[key]), item) for item in desired]
    return clone(desired)
