"""The pure core: a Metacontroller request and a clock in, the desired state out.

Reading order of a decision: whose model it is (``pvc://`` and still selected, or handed
back to OME), then storage, then the metadata Job, then the conditions and the state they
imply. Nothing here does I/O or
reads the clock, so the same request at the same ``now`` always gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hooks.conditions import FALSE, READY_CONDITION, TRUE, Condition, stamp
from hooks.hand_back import HANDED_BACK, hand_back
from hooks.observed import (
    CONFIG_MAPS,
    JOBS,
    PODS,
    PVCS,
    Model,
    has_children,
    kept_status,
    object_group,
    read_model,
    read_request,
)
from hooks.pvc.claim import STORAGE_READY, judge_pvc
from hooks.pvc.extraction import (
    FAILURE_REASONS,
    JobChildren,
    Situation,
    plan_extraction,
    read_access,
    refused_uri_condition,
)
from hooks.pvc.storage_uri import StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.settings import Settings
from hooks.states import FAILED, IN_TRANSIT, READY


@dataclass(frozen=True)
class Decision:
    """The answer to one sync or finalize call and the flow that gave it. What is worth
    counting and logging is read from the answer itself, so it cannot say otherwise."""

    response: dict[str, Any]
    flow: str

    @property
    def state(self) -> str:
        return str(self.response["status"]["state"])

    @property
    def reason(self) -> str:
        """The Ready condition's reason, the first thing a person looks at; a handed-back
        model's status has no conditions."""
        conditions = self.response["status"].get("conditions", [])
        return next((str(item["reason"]) for item in conditions if item["type"] == READY_CONDITION), HANDED_BACK)

    @property
    def job(self) -> str:
        """The metadata Job of the latest attempt, or "" (a handed-back model has none)."""
        return str(self.response["status"].get("metadataExtraction", {}).get("jobName", ""))


def sync(body: Any, settings: Settings, now: datetime, *, finalize: bool = False) -> Decision:
    """Answer a sync call, or a finalize call (``finalize``, or ``finalizing: true`` in the body).

    A finalize call for a model that is not being deleted means it left the controller's
    selector: it is handed back, whatever its URI still says."""
    request = read_request(body)
    model = read_model(request["parent"])
    finalizing = finalize or request.get("finalizing") is True
    if not is_pvc_uri(model.storage_uri) or (finalizing and not model.deleting):
        return Decision(hand_back(request, model, finalizing, settings), "hand-back")
    return _pvc_flow(request, model, settings, now, finalizing)


def _pvc_flow(
    request: dict[str, Any], model: Model, settings: Settings, now: datetime, finalizing: bool
) -> Decision:
    """URI, then PVC, then the metadata Job; while finalizing, no child is kept.

    The children are read before the URI is judged: a child the hook cannot read makes a
    400 whatever the URI, since a 200 would delete it."""
    observed_jobs = object_group(request, "children", JOBS, required=True)
    observed_access = read_access(request, model)
    observed_records = object_group(request, "children", CONFIG_MAPS, required=True)

    status: dict[str, Any] = {}
    children: list[dict[str, Any]] = []
    resync_after: float | None = None
    try:
        location = parse_pvc_uri(model.storage_uri, model.namespace)
    except StorageURIError as refusal:
        storage = Condition(STORAGE_READY, FALSE, refusal.reason, refusal.message)
        metadata = refused_uri_condition()
        storage_state = FAILED
    else:
        verdict = judge_pvc(location, object_group(request, "related", PVCS, required=True))
        pods = object_group(request, "related", PODS, required=False)
        observed = JobChildren(observed_jobs, observed_access, observed_records, pods)
        situation = Situation(model, location, verdict.condition.is_true, not finalizing, settings)
        extraction = plan_extraction(situation, observed, now)
        storage, metadata, storage_state = verdict.condition, extraction.condition, verdict.state
        status["storage"] = verdict.record
        if extraction.record is not None:
            status["metadataExtraction"] = extraction.record.render()
        children, resync_after = extraction.children, extraction.resync_after

    ready = _ready(storage, metadata)
    if not storage.is_true:
        state = storage_state
    elif metadata.is_true:
        state = READY
    else:
        state = FAILED if metadata.reason in FAILURE_REASONS else IN_TRANSIT

    status = {
        "state": state,
        **kept_status(model),
        "conditions": stamp((storage, metadata, ready), model.status.get("conditions"), now, model.generation),
        **status,
    }
    response: dict[str, Any] = {"status": status, "children": [] if finalizing else children}
    if finalizing:
        response["finalized"] = not has_children(request)
        if not response["finalized"]:
            resync_after = settings.finalize_resync_seconds
    if resync_after is not None:
        response["resyncAfterSeconds"] = resync_after
    return Decision(response, "pvc")


def _ready(storage: Condition, metadata: Condition) -> Condition:
    """Ready repeats the first blocker, so one condition tells a person what to fix."""
    if storage.is_true and metadata.is_true:
        return Condition(READY_CONDITION, TRUE, "Ready", f"{storage.message}; {metadata.message}")
    first = storage if not storage.is_true else metadata
    return Condition(READY_CONDITION, FALSE, first.reason, first.message)
