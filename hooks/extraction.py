"""Decide which metadata Jobs should exist and what ``MetadataReady`` says.

The hook's only memory is ``status.metadataExtraction`` (the record): which URI it
concerns, how many attempts were made, the last Job and its result. It is what keeps a
finished Job from running again after Kubernetes removed it, and what spaces retries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from hooks.conditions import FALSE, TRUE, Condition, format_time, parse_time
from hooks.metadata_job import (
    ATTEMPT_LABEL,
    FAILED,
    RUNNING,
    SUCCEEDED,
    JobOutcome,
    build_access,
    build_job,
    job_name,
    read_outcome,
    termination_message,
)
from hooks.observed import Model, text
from hooks.settings import Settings
from hooks.storage_uri import PVCLocation

METADATA_READY = "MetadataReady"
PENDING = "Pending"
METADATA_FIELDS = ("modelType", "modelArchitecture", "modelParameterSize")
FAILURE_REASONS = ("JobFailed", "JobDeadlineExceeded")


@dataclass(frozen=True)
class Record:
    """``status.metadataExtraction``: what was last attempted for which URI, and how it ended."""

    storage_uri: str
    attempts: int = 0
    job_name: str = ""
    result: str = ""
    failed_at: str = ""
    message: str = ""

    def render(self) -> dict[str, Any]:
        rendered: dict[str, Any] = {
            "storageUri": self.storage_uri,
            "attempts": self.attempts,
            "jobName": self.job_name,
            "result": self.result,
        }
        if self.failed_at:
            rendered["failedAt"] = self.failed_at
        if self.message:
            rendered["message"] = self.message
        return rendered


@dataclass(frozen=True)
class Extraction:
    """The Jobs (and their access objects) to return, the condition, the record and when to call back."""

    children: list[dict[str, Any]]
    condition: Condition
    record: Record | None
    resync_after: float | None


def metadata_present(spec: dict[str, Any]) -> bool:
    return all(isinstance(spec.get(key), str) and spec[key] for key in METADATA_FIELDS)


def retry_delay(attempt: int, settings: Settings) -> int:
    """Seconds to wait after ``attempt`` failed: doubling from the base, capped."""
    return min(settings.retry_base_delay_seconds << min(attempt - 1, 32), settings.retry_max_delay_seconds)


def read_record(model: Model) -> Record:
    """The observed record, if it concerns the current URI; a new URI starts from nothing."""
    raw = model.status.get("metadataExtraction")
    if not isinstance(raw, dict) or raw.get("storageUri") != model.storage_uri:
        return Record(model.storage_uri)
    attempts: Any = raw.get("attempts")
    failed_at = parse_time(raw.get("failedAt"))
    return Record(
        storage_uri=model.storage_uri,
        attempts=attempts if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 0 else 0,
        job_name=text(raw, "jobName"),
        result=text(raw, "result") if raw.get("result") in (PENDING, RUNNING, SUCCEEDED, FAILED) else "",
        failed_at=format_time(failed_at) if failed_at else "",
        message=text(raw, "message"),
    )


def current_jobs(model: Model, observed: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Observed Jobs built for the current URI, by attempt. A Job counts only if its name is
    exactly the one this hook derives for that attempt, so nothing foreign is adopted."""
    found = {}
    for job in observed:
        labels = job["metadata"].get("labels")
        raw = labels.get(ATTEMPT_LABEL) if isinstance(labels, dict) else None
        if isinstance(raw, str) and raw.isdigit() and 0 < int(raw) < 10**6:
            attempt = int(raw)
            if job["metadata"]["name"] == job_name(model, model.storage_uri, attempt):
                found[attempt] = job
    return found


def plan_extraction(
    model: Model,
    location: PVCLocation,
    storage_ready: bool,
    observed_jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    settings: Settings,
    now: datetime,
    may_start: bool = True,
) -> Extraction:
    """From the observed Jobs and the record, choose the Jobs to return and the condition.

    ``may_start`` is False while the model is being deleted: no new attempt then."""
    record = read_record(model)
    jobs = current_jobs(model, observed_jobs)
    outcome: JobOutcome | None = None

    if jobs and max(jobs) >= record.attempts:
        attempt = max(jobs)
        job = jobs[attempt]
        outcome = read_outcome(job)
        record = _observe(record, attempt, job, outcome, termination_message(job, pods), now)
    elif record.result in (PENDING, RUNNING) and record.attempts not in jobs:
        if record.result == RUNNING:
            record = replace(
                record,
                result=FAILED,
                failed_at=format_time(now),
                message=f"Job {location.namespace}/{record.job_name} disappeared before it finished (deleted by hand?)",
            )
        else:
            jobs[record.attempts] = {}

    resync_after: float | None = None
    wanted = may_start and storage_ready and not metadata_present(model.spec) and record.result != SUCCEEDED
    if wanted and record.result in ("", FAILED) and record.attempts < settings.max_attempts:
        start = _next_start(record, settings)
        if start is None or now >= start:
            attempt = record.attempts + 1
            name = job_name(model, model.storage_uri, attempt)
            record = replace(
                record,
                attempts=attempt,
                job_name=name,
                result=PENDING,
                failed_at="",
                message=f"Job {location.namespace}/{name} requested",
            )
            jobs[attempt] = {}
            outcome = None
        else:
            resync_after = max((start - now).total_seconds(), 1.0)

    built = [build_job(model, location, model.storage_uri, attempt, settings) for attempt in sorted(jobs)]
    children = built + build_access(model, location.namespace) if built else []
    condition = _condition(model, location, storage_ready, record, outcome, settings, may_start)
    return Extraction(children, condition, record if record.attempts else None, resync_after)


def _observe(
    record: Record, attempt: int, job: dict[str, Any], outcome: JobOutcome, agent_said: str, now: datetime
) -> Record:
    """Fold what the newest observed Job says into the record."""
    name = job["metadata"]["name"]
    where = f"{job['metadata'].get('namespace')}/{name}"
    if outcome.result == SUCCEEDED:
        return replace(record, attempts=attempt, job_name=name, result=SUCCEEDED, message=f"Job {where} completed")
    if outcome.result == RUNNING:
        state = "is suspended" if outcome.reason == "JobSuspended" else "is running"
        return replace(record, attempts=attempt, job_name=name, result=RUNNING, message=f"Job {where} {state}")
    kept = record.failed_at if record.result == FAILED and record.job_name == name else ""
    message = f"Job {where} failed: {outcome.detail or 'no reason given'}"
    if agent_said:
        message += f"; ome-agent said: {agent_said}"
    elif record.job_name == name and record.result == FAILED and "; ome-agent said: " in record.message:
        message = record.message
    return replace(
        record,
        attempts=attempt,
        job_name=name,
        result=FAILED,
        failed_at=kept or outcome.failed_at or format_time(now),
        message=message,
    )


def _next_start(record: Record, settings: Settings) -> datetime | None:
    """When the next attempt may start; None when nothing failed yet."""
    if record.result != FAILED:
        return None
    failed = parse_time(record.failed_at)
    if failed is None:
        return None
    return failed + timedelta(seconds=retry_delay(record.attempts, settings))


def _condition(
    model: Model,
    location: PVCLocation,
    storage_ready: bool,
    record: Record,
    outcome: JobOutcome | None,
    settings: Settings,
    may_start: bool,
) -> Condition:
    """MetadataReady, from the most decisive fact first."""
    where = f"{location.namespace}/{record.job_name}"
    of = f"attempt {record.attempts} of {settings.max_attempts}"
    if record.result == SUCCEEDED:
        missing = [key for key in METADATA_FIELDS if not model.spec.get(key)]
        note = f"; the spec still lacks {', '.join(missing)}" if missing else ""
        return Condition(METADATA_READY, TRUE, "MetadataExtracted", f"Job {where} extracted the model's metadata{note}")
    if metadata_present(model.spec):
        shown = ", ".join(f"{key}={model.spec[key]}" for key in METADATA_FIELDS)
        return Condition(METADATA_READY, TRUE, "MetadataPresent", f"spec already holds the metadata ({shown})")
    if record.result == PENDING:
        return Condition(METADATA_READY, FALSE, "JobPending", f"waiting for Job {where} ({of}) to be created")
    if record.result == RUNNING:
        reason = outcome.reason if outcome else "JobRunning"
        doing = "is suspended; resume it (spec.suspend: false) to extract" if reason == "JobSuspended" else "is extracting the metadata"
        return Condition(METADATA_READY, FALSE, reason, f"Job {where} ({of}) {doing}")
    if record.result == FAILED:
        reason = outcome.reason if outcome and outcome.result == FAILED else _remembered_failure(model)
        message = f"{of} failed at {record.failed_at}: {record.message}"
        start = _next_start(record, settings)
        if not may_start:
            message += ". No further attempt: the model is being deleted"
        elif record.attempts < settings.max_attempts and start is not None:
            following = f"Attempt {record.attempts + 1}"
            if storage_ready:
                message += f". {following} starts at {format_time(start)}"
            else:
                message += f". {following} starts once the storage is ready, not before {format_time(start)}"
        else:
            message += (
                f". No attempts left ({settings.max_attempts}); fix the model files or the PVC, then set "
                "spec.storage.storageUri to a new value (or fill modelType, modelArchitecture and "
                "modelParameterSize by hand) to retry at once"
            )
        return Condition(METADATA_READY, FALSE, reason, message)
    if not storage_ready:
        return Condition(METADATA_READY, FALSE, "StorageNotReady", "waiting for the storage before reading the model's config")
    return Condition(METADATA_READY, FALSE, "JobPending", "waiting for a metadata Job to be created")


def _remembered_failure(model: Model) -> str:
    """The failure reason survives its Job only in the previous MetadataReady condition."""
    for item in model.status.get("conditions") or []:
        if text(item, "type") == METADATA_READY and text(item, "reason") in FAILURE_REASONS:
            return text(item, "reason")
    return "JobFailed"
