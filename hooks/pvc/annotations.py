"""The why of a ``pvc://`` model on the model itself: the annotations the label keeper writes.

OME's own CRDs prune every status field but ``state``, so under them the reason, the
message, the PVC's facts and the Job would be nowhere a person looks; annotations are
never pruned, whatever the CRD, and ``kubectl describe`` shows them. They come from the
same decision as the status and hold no clock, so they change only when what they say
changes: a steady state costs no write.
"""

from __future__ import annotations

from hooks.conditions import format_time
from hooks.pvc.decision import PVCDecision
from hooks.pvc.job_outcome import Result
from hooks.reasons import STATE_OF

PREFIX = "ome-basemodel-hook.ome.io/"
STATE = f"{PREFIX}state"
REASON = f"{PREFIX}reason"
MESSAGE = f"{PREFIX}message"
PVC = f"{PREFIX}pvc"
PVC_PHASE = f"{PREFIX}pvc-phase"
PVC_CAPACITY = f"{PREFIX}pvc-capacity"
PVC_ACCESS_MODES = f"{PREFIX}pvc-access-modes"
PVC_VOLUME = f"{PREFIX}pvc-volume"
JOB = f"{PREFIX}job"
ATTEMPT = f"{PREFIX}attempt"
NEXT_ATTEMPT = f"{PREFIX}next-attempt"
KEYS = (STATE, REASON, MESSAGE, PVC, PVC_PHASE, PVC_CAPACITY, PVC_ACCESS_MODES, PVC_VOLUME, JOB, ATTEMPT, NEXT_ATTEMPT)

Annotations = dict[str, "str | None"]
"""As a DecoratorController's answer merges them: a key answered ``None`` is removed."""


def removed() -> Annotations:
    """Every key removed: the answer for a model that is not the hook's (a new dict each time,
    as every answer is its own)."""
    return dict.fromkeys(KEYS)


def why(decision: PVCDecision) -> Annotations:
    """Every key, ``None`` where it has nothing to say: the state, the ``Ready`` reason and
    message, where the URI points with the PVC's facts, the latest attempt's Job and number,
    and when the next attempt starts after a failed one."""
    facts = decision.storage.fields or {}
    plan, record = decision.plan, decision.plan.record
    jobs_at = plan.location.namespace if plan.location is not None and record.attempts else None
    retry_at = plan.retry_at if record.result is Result.FAILED and record.attempts < plan.max_attempts else None
    return {
        STATE: str(STATE_OF[decision.ready.reason]),
        REASON: str(decision.ready.reason),
        MESSAGE: decision.ready.message,
        PVC: f"{facts['namespace']}/{facts['pvcName']}" if facts else None,
        PVC_PHASE: facts.get("phase"),
        PVC_CAPACITY: facts.get("capacity"),
        PVC_ACCESS_MODES: ",".join(facts.get("accessModes", ())) or None,
        PVC_VOLUME: facts.get("volumeName"),
        JOB: f"{jobs_at}/{record.job_name}" if jobs_at else None,
        ATTEMPT: f"{record.attempts} of {plan.max_attempts}" if jobs_at else None,
        NEXT_ATTEMPT: format_time(retry_at) if retry_at is not None else None,
    }
