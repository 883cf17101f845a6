"""Compose a ``pvc://`` model's status: its conditions (``StorageReady`` as the storage was
judged, ``MetadataReady`` by the rules below, ``Ready`` repeating the first that is not
True), the state that reason means, what the URI resolved to and the record of the
attempts.

``MetadataReady`` is read from the extraction plan (``extraction.py``): the record of the
latest attempt, what its Job said, and whether the Job's access objects exist yet. Each of
its reasons is given by the rule beside it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from hooks.conditions import FALSE, TRUE, Condition, format_time, stamp
from hooks.pvc.extraction import Plan
from hooks.pvc.job_outcome import POD_WAITING, Result
from hooks.pvc.observation import METADATA_FIELDS, Observation
from hooks.pvc.storage import StorageVerdict
from hooks.reasons import STATE_OF, ConditionType, Reason


class Composed(NamedTuple):
    """The status, and its ``Ready`` condition (what a person reads first)."""

    status: dict[str, Any]
    ready: Condition


def compose_status(seen: Observation, storage: StorageVerdict, plan: Plan, now: datetime) -> Composed:
    """The conditions (``Ready`` repeating the first blocker), the state its reason means,
    then what the URI resolved to and the extraction's record."""
    model = seen.model
    metadata = metadata_ready(seen, plan, storage.ready)
    ready = _ready(storage.condition, metadata)
    status = {
        "state": STATE_OF[ready.reason],
        **model.kept_status,
        "conditions": stamp((storage.condition, metadata, ready), model.status.get("conditions"), now, model.generation),
        **({"storage": storage.fields} if storage.fields is not None else {}),
        **plan.status_fields(),
    }
    return Composed(status, ready)


def _ready(storage: Condition, metadata: Condition) -> Condition:
    """Ready repeats the first blocker, so one condition tells a person what to fix."""
    if storage.is_true and metadata.is_true:
        return Condition(type=ConditionType.READY, status=TRUE, reason=Reason.READY, message=f"{storage.message}; {metadata.message}")
    first = storage if not storage.is_true else metadata
    return Condition(type=ConditionType.READY, status=FALSE, reason=first.reason, message=first.message)


def metadata_ready(seen: Observation, plan: Plan, storage_ready: bool) -> Condition:
    """From the most decisive fact first: extracted, already present, the latest attempt's
    Job, then what it waits for."""
    if plan.location is None:
        return _false(Reason.STORAGE_NOT_READY, "no metadata Job until spec.storage.storageUri is valid")
    spec, record = seen.model.spec, plan.record
    where = f"{plan.location.namespace}/{record.job_name}"
    if record.result is Result.SUCCEEDED or (seen.metadata_present and record.result is Result.RUNNING):
        missing = [key for key in METADATA_FIELDS if not spec.get(key)]
        note = f"; the spec still lacks {', '.join(missing)}" if missing else ""
        return _true(Reason.METADATA_EXTRACTED, f"Job {where} extracted the model's metadata{note}")
    if seen.metadata_present:
        shown = ", ".join(f"{key}={spec[key]}" for key in METADATA_FIELDS)
        return _true(Reason.METADATA_PRESENT, f"spec already holds the metadata ({shown})")
    job = f"Job {where} ({_attempt_of(plan)})"
    if record.result is Result.RUNNING:
        return _running(plan, job, seen.finalizing)
    if record.result is Result.FAILED:
        return _failed(seen, plan, storage_ready)
    return _pending(seen, plan, job, storage_ready)


def _attempt_of(plan: Plan) -> str:
    return f"attempt {plan.record.attempts} of {plan.max_attempts}"


def _pending(seen: Observation, plan: Plan, job: str, storage_ready: bool) -> Condition:
    """No Job of the latest attempt yet: why not, or that it is being created. One text
    while its ServiceAccount and RBAC and then the Job itself are created, so that the
    status does not change between the two."""
    if not storage_ready:
        return _false(Reason.STORAGE_NOT_READY, "waiting for the storage before reading the model's config")
    if seen.finalizing:
        return _false(Reason.JOB_PENDING, "no metadata Job: the model is being deleted")
    return _false(
        Reason.JOB_PENDING,
        f"creating {job}, after its ServiceAccount and RBAC; if it does not appear, the model's events "
        "show why Metacontroller could not create them (SyncError; it must hold the verbs a Role grants)",
    )


def _running(plan: Plan, job: str, finalizing: bool) -> Condition:
    """A Job that exists and has not finished: suspended, waiting for its pod, or working."""
    suspended = plan.outcome is not None and plan.outcome.suspended
    if suspended:
        doing = "is suspended; resume it (spec.suspend: false) to extract"
    elif plan.record.pod_waiting:
        doing = f"has not started{POD_WAITING}{plan.record.pod_waiting}"
    else:
        doing = "is extracting the metadata"
    deleting = "; it is deleted with the model" if finalizing else ""
    return _false(Reason.JOB_SUSPENDED if suspended else Reason.JOB_RUNNING, f"{job} {doing}{deleting}")


def _failed(seen: Observation, plan: Plan, storage_ready: bool) -> Condition:
    """A failed attempt: what failed, and when the next one starts or how to retry. Its
    reason is the Job's while the Job is observed, then the record's."""
    record, outcome = plan.record, plan.outcome
    reason = outcome.failure_reason if outcome and outcome.result is Result.FAILED else record.failure_reason or Reason.JOB_FAILED
    failed = f"{_attempt_of(plan)} failed at {record.failed_at}: {record.message}"
    if seen.finalizing:
        return _false(reason, f"{failed}. No further attempt: the model is being deleted")
    return _false(reason, f"{failed}. {_next_attempt(plan, storage_ready)}")


def _next_attempt(plan: Plan, storage_ready: bool) -> str:
    """When the attempt after a failed one starts, or how to retry once none is left."""
    record, start = plan.record, plan.retry_at
    if record.attempts < plan.max_attempts and start is not None:
        following = f"Attempt {record.attempts + 1}"
        if storage_ready:
            return f"{following} starts at {format_time(start)}"
        return f"{following} starts once the storage is ready, not before {format_time(start)}"
    return (
        f"No attempts left ({plan.max_attempts} failed). Fix the model files or the PVC, then "
        "change spec.storage.storageUri to retry at once (the same location with or without a "
        "trailing '/' counts as a new URI), or write modelType, modelArchitecture and "
        "modelParameterSize into the spec yourself"
    )


def _true(reason: Reason, message: str) -> Condition:
    return Condition(type=ConditionType.METADATA_READY, status=TRUE, reason=reason, message=message)


def _false(reason: str, message: str) -> Condition:
    return Condition(type=ConditionType.METADATA_READY, status=FALSE, reason=reason, message=message)
