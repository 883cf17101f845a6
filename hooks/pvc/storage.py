"""Judge the storage a model names: its URI, then the PVC Metacontroller sent as a related
object (``StorageReady``).

The URI's refusals are judged in ``storage_uri.py``; the PVC's reasons are given here,
each by the rule beside it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hooks.conditions import FALSE, TRUE, Condition
from hooks.pvc.observation import Observation
from hooks.pvc.storage_uri import PVCLocation
from hooks.reasons import ConditionType, Reason
from hooks.request import field

ELSEWHERE = "point spec.storage.storageUri at another PVC"
BLOCK_MODE = "Block"
# Access modes that let pods on every node mount the claim at once.
SHARED_MODES = frozenset({"ReadOnlyMany", "ReadWriteMany"})


class StorageVerdict(NamedTuple):
    """The StorageReady condition and ``status.storage`` (what the URI resolved to; none
    for a refused URI)."""

    condition: Condition
    fields: dict[str, Any] | None = None

    @property
    def ready(self) -> bool:
        return self.condition.is_true


def judge_storage(seen: Observation) -> StorageVerdict:
    """A refused URI fails the model; otherwise the PVC decides."""
    if seen.location is None:
        assert seen.uri_refusal is not None
        refusal = seen.uri_refusal
        return StorageVerdict(Condition(type=ConditionType.STORAGE_READY, status=FALSE, reason=refusal.reason, message=refusal.message))
    return judge_pvc(seen.location, seen.pvcs)


def judge_pvc(location: PVCLocation, pvcs: list[dict[str, Any]]) -> StorageVerdict:
    """Find the PVC in its namespace and say whether a Job may mount it now."""
    fields: dict[str, Any] = {
        "type": "PVC",
        "namespace": location.namespace,
        "pvcName": location.pvc_name,
        "subPath": location.sub_path,
    }
    pvc = next(
        (
            item
            for item in pvcs
            if item["metadata"]["name"] == location.pvc_name and item["metadata"].get("namespace") == location.namespace
        ),
        None,
    )
    if pvc is None:
        message = (
            f"PVC {location.pvc_name} not found in namespace {location.namespace}; create it, "
            "or point spec.storage.storageUri at an existing PVC"
        )
        return StorageVerdict(Condition(type=ConditionType.STORAGE_READY, status=FALSE, reason=Reason.PVC_NOT_FOUND, message=message), fields)
    fields.update(_facts(pvc))
    reason, message = _pvc_says(f"{location.namespace}/{location.pvc_name}", pvc, fields)
    status = TRUE if reason is Reason.PVC_BOUND else FALSE
    return StorageVerdict(Condition(type=ConditionType.STORAGE_READY, status=status, reason=reason, message=message), fields)


def _pvc_says(where: str, pvc: dict[str, Any], fields: dict[str, Any]) -> tuple[Reason, str]:
    """The reason and message of an existing PVC: a block device, being deleted, Bound,
    Lost, or not bound yet (Pending, or no phase at all)."""
    deleted = pvc["metadata"].get("deletionTimestamp")
    phase = fields.get("phase")
    if field(pvc, "spec").get("volumeMode") == BLOCK_MODE:
        # volumeMode cannot change: whatever else the claim does, no Job could read it.
        return (
            Reason.PVC_BLOCK_MODE,
            f"PVC {where} has volumeMode Block: a raw block device, which a pod cannot mount as a directory "
            "of files, so no Job could read the model's config.json; copy the model onto a claim with "
            f"volumeMode Filesystem (the default) and {ELSEWHERE}",
        )
    if deleted:
        return (
            Reason.PVC_TERMINATING,
            f"PVC {where} is being deleted (since {deleted}); no new pod can mount it: restore it or {ELSEWHERE}",
        )
    if phase == "Bound":
        return Reason.PVC_BOUND, f"PVC {where} is Bound{_describe(fields)}{_reach(fields.get('accessModes', []))}"
    if phase == "Lost":
        return (
            Reason.PVC_LOST,
            f"PVC {where} is Lost: its PersistentVolume is gone and the data cannot be read; "
            f"restore the volume or {ELSEWHERE}",
        )
    return (
        Reason.PVC_PENDING,
        f"PVC {where} is {phase or 'without a phase yet'}: waiting for it to bind to a volume. A StorageClass with "
        "volumeBindingMode WaitForFirstConsumer binds only once a pod uses the claim; a model "
        "PVC should be pre-populated and Bound",
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


def _describe(fields: dict[str, Any]) -> str:
    """Volume, size and access modes: what someone checking a mount problem asks first."""
    details = [
        f"volume {fields['volumeName']}" if "volumeName" in fields else "",
        fields.get("capacity", ""),
        ", ".join(fields.get("accessModes", [])),
    ]
    shown = "; ".join(detail for detail in details if detail)
    return f" ({shown})" if shown else ""


def _reach(modes: list[str]) -> str:
    """What the access modes keep from mounting the claim, when they keep anyone: serving
    pods on other nodes than the one holding a ``ReadWriteOnce`` volume cannot start, and a
    ``ReadWriteOncePod`` volume takes one pod in the whole cluster. Not a failure: one
    node, or one pod, may be all a model needs."""
    if SHARED_MODES.intersection(modes):
        return ""
    if "ReadWriteOnce" in modes:
        return (
            ". ReadWriteOnce: only pods on one node at a time can mount it, so serving pods scheduled on other "
            "nodes cannot start; a ReadOnlyMany or ReadWriteMany claim serves every node"
        )
    if "ReadWriteOncePod" in modes:
        return (
            ". ReadWriteOncePod: only one pod in the cluster at a time can mount it, so the metadata Job and a "
            "serving pod take turns and a second serving pod cannot start; a ReadOnlyMany or ReadWriteMany claim "
            "serves every pod"
        )
    return ""
