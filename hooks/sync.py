"""The pure core: a Metacontroller request and a clock in, the desired state out.

A decision reads top to bottom: whose model it is (``pvc://`` and still selected, or
handed back to OME, as is a model whose status OME's own PVC backend stamped); then, for
the hook's own, observe the request, judge the storage, plan the extraction and compose
the status. Nothing here does I/O or reads the clock, so the same request at the same
``now`` always gives the same bytes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from hooks.hand_back import hand_back
from hooks.pvc.decision import PVCDecision, decide
from hooks.pvc.storage_uri import is_pvc_uri
from hooks.reasons import ConditionType, Reason
from hooks.request import read_model, read_request
from hooks.settings import Settings
from hooks.upstream_backend import Evidence, find_evidence


HAND_BACK = "hand-back"


class Decision(NamedTuple):
    """The answer to one sync or finalize call and the flow that gave it. What is worth
    counting and logging is read from the answer itself, so it cannot say otherwise."""

    response: dict[str, Any]
    flow: str
    stepped_aside: Evidence | None = None
    """Why a ``pvc://`` model was handed back: OME's own PVC backend stamped its status."""

    @property
    def state(self) -> str:
        return str(self.response["status"]["state"])

    @property
    def reason(self) -> str:
        """The Ready condition's reason, the first thing a person looks at; for a handed-back
        model ``HandedBack``, whatever conditions of OME's its status keeps."""
        conditions = [] if self.flow == HAND_BACK else self.response["status"].get("conditions", [])
        return next((str(item["reason"]) for item in conditions if item["type"] == ConditionType.READY), Reason.HANDED_BACK)

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
    pvc = is_pvc_uri(model.storage_uri)
    # The CompositeController's request holds no evidence but the model's status.
    evidence = find_evidence(request, model) if pvc else None
    if not pvc or evidence is not None or (finalizing and not model.deleting):
        return Decision(hand_back(request, model, finalizing, settings), HAND_BACK, evidence)
    return Decision(_answer(decide(request, model, finalizing, settings, now), settings), "pvc")


def _answer(decision: PVCDecision, settings: Settings) -> dict[str, Any]:
    """While finalizing no child is kept, and the answer says whether any is left."""
    seen, plan = decision.seen, decision.plan
    response: dict[str, Any] = {"status": decision.status, "children": [] if seen.finalizing else plan.children}
    resync_after = plan.resync_after
    if seen.finalizing:
        response["finalized"] = not seen.remaining
        if seen.remaining:
            resync_after = settings.sync.finalize_resync_seconds
    if resync_after is not None:
        response["resyncAfterSeconds"] = resync_after
    return response
