"""Judge the PVC a model points at, from the copy Metacontroller sent as a related object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hooks.conditions import FALSE, TRUE, Condition
from hooks.observed import field
from hooks.pvc.storage_uri import PVCLocation
from hooks.states import FAILED, IN_TRANSIT

STORAGE_READY = "StorageReady"

PVC_BOUND = "PVCBound"
PVC_NOT_FOUND = "PVCNotFound"
PVC_NOT_BOUND = "PVCNotBound"
PVC_TERMINATING = "PVCTerminating"


@dataclass(frozen=True)
class StorageVerdict:
    """The StorageReady condition, the model state it implies while not ready, and status.storage."""

    condition: Condition
    state: str
    record: dict[str, Any]


def judge_pvc(location: PVCLocation, pvcs: list[dict[str, Any]]) -> StorageVerdict:
    """Find the PVC in its namespace and say whether a Job may mount it now."""
    where = f"{location.namespace}/{location.pvc_name}"
    record: dict[str, Any] = {
        "type": "PVC",
        "namespace": location.namespace,
        "pvcName": location.pvc_name,
        "subPath": location.sub_path,
    }
    pvc = next(
        (
            item
            for item in pvcs
            if item["metadata"]["name"] == location.pvc_name
            and item["metadata"].get("namespace") == location.namespace
        ),
        None,
    )
    if pvc is None:
        return StorageVerdict(
            Condition(
                STORAGE_READY,
                FALSE,
                PVC_NOT_FOUND,
                f"PVC {location.pvc_name} not found in namespace {location.namespace}; create it, "
                "or point spec.storage.storageUri at an existing PVC",
            ),
            FAILED,
            record,
        )

    record.update(_facts(pvc))
    phase = record.get("phase")
    if pvc["metadata"].get("deletionTimestamp"):
        return StorageVerdict(
            Condition(
                STORAGE_READY,
                FALSE,
                PVC_TERMINATING,
                f"PVC {where} is being deleted (since {pvc['metadata']['deletionTimestamp']}); "
                "no new pod can mount it: restore it or point spec.storage.storageUri at another PVC",
            ),
            FAILED,
            record,
        )
    if phase == "Bound":
        return StorageVerdict(
            Condition(STORAGE_READY, TRUE, PVC_BOUND, f"PVC {where} is Bound{_describe(record)}"),
            IN_TRANSIT,
            record,
        )
    if phase == "Lost":
        return StorageVerdict(
            Condition(
                STORAGE_READY,
                FALSE,
                PVC_NOT_BOUND,
                f"PVC {where} is Lost: its PersistentVolume is gone and the data cannot be read; "
                "restore the volume or point spec.storage.storageUri at another PVC",
            ),
            FAILED,
            record,
        )
    shown = phase or "without a phase yet"
    return StorageVerdict(
        Condition(
            STORAGE_READY,
            FALSE,
            PVC_NOT_BOUND,
            f"PVC {where} is {shown}: waiting for it to bind to a volume. A StorageClass with "
            "volumeBindingMode WaitForFirstConsumer binds only once a pod uses the claim; a model "
            "PVC should be pre-populated and Bound",
        ),
        IN_TRANSIT,
        record,
    )


def _facts(pvc: dict[str, Any]) -> dict[str, Any]:
    """What the status keeps of the PVC: enough to see at a glance what was mounted."""
    spec = field(pvc, "spec")
    status = field(pvc, "status")
    facts: dict[str, Any] = {}
    if isinstance(status.get("phase"), str) and status["phase"]:
        facts["phase"] = status["phase"]
    modes = status.get("accessModes") or spec.get("accessModes")
    if isinstance(modes, list) and all(isinstance(mode, str) for mode in modes) and modes:
        facts["accessModes"] = list(modes)
    capacity = status.get("capacity")
    if isinstance(capacity, dict) and isinstance(capacity.get("storage"), str):
        facts["capacity"] = capacity["storage"]
    for key in ("storageClassName", "volumeName"):
        if isinstance(spec.get(key), str) and spec[key]:
            facts[key] = spec[key]
    return facts


def _describe(record: dict[str, Any]) -> str:
    """Volume, size and access modes: what someone checking a mount problem asks first."""
    details = [
        f"volume {record['volumeName']}" if "volumeName" in record else "",
        record.get("capacity", ""),
        ", ".join(record.get("accessModes", [])),
    ]
    shown = "; ".join(detail for detail in details if detail)
    return f" ({shown})" if shown else ""
