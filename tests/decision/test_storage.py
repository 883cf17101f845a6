"""The checks the PVC gets before any Job (hooks/pvc/storage.py): a block device is refused
up front, and access modes that keep serving pods from mounting the claim are said, not failed."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.conditions import FALSE, TRUE
from hooks.pvc.storage import judge_pvc
from hooks.pvc.storage_uri import PVCLocation
from hooks.reasons import Reason
from hooks.states import State

LOCATION = PVCLocation("models", "model-storage", "models/llama")


def claim(*, modes: list[str], phase: str | None = "Bound", volume_mode: str | None = None, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "model-storage", "namespace": "models"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T11:00:00Z"
    spec: dict[str, Any] = {"accessModes": modes, "volumeName": "pv-1"}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    status: dict[str, Any] = {"accessModes": modes, "capacity": {"storage": "1Ti"}}
    if phase is not None:
        status["phase"] = phase
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("phase", "deleting"),
    [("Bound", False), ("Pending", False), (None, False), ("Lost", False), ("Bound", True)],
)
def test_a_block_claim_fails_whatever_else_it_does(phase: str | None, deleting: bool) -> None:
    """volumeMode cannot change, so no wait or repair of the claim would let a Job read it."""
    verdict = judge_pvc(LOCATION, [claim(modes=["ReadOnlyMany"], phase=phase, volume_mode="Block", deleting=deleting)])
    assert (verdict.condition.status, verdict.condition.reason) == (FALSE, Reason.PVC_BLOCK_MODE)
    assert Reason.PVC_BLOCK_MODE.state is State.FAILED
    assert "volumeMode Block" in verdict.condition.message and "Filesystem" in verdict.condition.message
    assert not verdict.ready


def test_a_filesystem_claim_is_judged_as_before() -> None:
    verdict = judge_pvc(LOCATION, [claim(modes=["ReadOnlyMany"], volume_mode="Filesystem")])
    assert verdict.condition.reason is Reason.PVC_BOUND
    assert verdict.condition.message == "PVC models/model-storage is Bound (volume pv-1; 1Ti; ReadOnlyMany)"


@pytest.mark.parametrize(
    ("modes", "note"),
    [
        (["ReadWriteOnce"], "ReadWriteOnce: only pods on one node at a time can mount it"),
        (["ReadWriteOncePod"], "ReadWriteOncePod: only one pod in the cluster at a time can mount it"),
    ],
)
def test_access_modes_that_keep_serving_pods_out_are_said_in_the_message_not_failed(modes: list[str], note: str) -> None:
    verdict = judge_pvc(LOCATION, [claim(modes=modes)])
    assert (verdict.condition.status, verdict.condition.reason) == (TRUE, Reason.PVC_BOUND)
    assert verdict.ready
    assert note in verdict.condition.message
    assert "a ReadOnlyMany or ReadWriteMany claim serves every" in verdict.condition.message


@pytest.mark.parametrize("modes", [["ReadOnlyMany"], ["ReadWriteMany"], ["ReadWriteOnce", "ReadOnlyMany"], []])
def test_modes_that_let_every_node_mount_the_claim_add_no_note(modes: list[str]) -> None:
    """A claim that also offers a shared mode is mounted by every node in that mode."""
    verdict = judge_pvc(LOCATION, [claim(modes=modes)])
    assert verdict.condition.reason is Reason.PVC_BOUND
    assert "only" not in verdict.condition.message


def test_the_note_is_only_for_a_bound_claim_whose_modes_are_known() -> None:
    """Pending, the claim's message is about binding; the note waits for the volume's modes."""
    verdict = judge_pvc(LOCATION, [claim(modes=["ReadWriteOnce"], phase="Pending")])
    assert verdict.condition.reason is Reason.PVC_PENDING
    assert "ReadWriteOnce:" not in verdict.condition.message
