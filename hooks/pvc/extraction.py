"""Plan the metadata extraction in three steps: fold what the observed Jobs say into the
record, decide whether the next attempt starts, and choose the children to return.

A Job is the hook's by its name alone (derived from the model, the URI and the attempt),
and every observed Job of the current URI is returned exactly as it was built, until
Kubernetes removes it: Metacontroller deletes every child an answer leaves out.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from hooks.conditions import format_time, normalized_time, parse_time
from hooks.pvc.job_outcome import POD_WAITING, JobOutcome, Result, read_outcome
from hooks.pvc.metadata_job import Attempt, build_access, build_job, build_record, built_with, job_name, model_jobs
from hooks.pvc.observation import Observation
from hooks.pvc.record import Record, read_record
from hooks.pvc.storage_uri import PVCLocation
from hooks.reasons import Reason
from hooks.request import Model
from hooks.settings import Settings

WAS_WAITING = "; before that its pod was waiting: "
POD_ENDED = "; its last pod ended: "
UNSEEN_GRACE_SECONDS = 60
"""Beyond a Job's deadline, the time its controller takes to fail it."""


class Newest(NamedTuple):
    """The newest observed Job of the current URI: its attempt, the Job, what it says."""

    attempt: int
    job: dict[str, Any]
    outcome: JobOutcome


class Folded(NamedTuple):
    """Step 1: where the Jobs run, the record with the newest observed Job folded in, the
    observed Jobs of the current URI by attempt, what the newest one says, the model they
    are for, and until when a running attempt's Job that is out of view may still run."""

    location: PVCLocation
    record: Record
    jobs: dict[int, dict[str, Any]]
    outcome: JobOutcome | None
    model: Model
    unseen_until: datetime | None = None


class Decided(NamedTuple):
    """Step 2: the record with the next attempt started, or not; whether a Job is wanted
    at all; when the attempt after a failed one may start; and when to be called back for
    a retry that is not due yet, or for a Job out of view that may still run."""

    record: Record
    outcome: JobOutcome | None
    wanted: bool
    retry_at: datetime | None = None
    resync_after: float | None = None


class Plan(NamedTuple):
    """Step 3: the children to return, the record to keep, what the latest Job said, the
    access objects still missing, the attempts allowed and when the next may start, and
    when to call back. A refused URI plans nothing and has no location."""

    location: PVCLocation | None
    children: list[dict[str, Any]]
    record: Record
    max_attempts: int
    outcome: JobOutcome | None = None
    missing_access: tuple[str, ...] = ()
    retry_at: datetime | None = None
    resync_after: float | None = None
    unseen_until: datetime | None = None

    def status_fields(self) -> dict[str, Any]:
        """``status.metadataExtraction``, once anything was attempted."""
        return {"metadataExtraction": self.record.render()} if self.record.attempts else {}


def plan_extraction(seen: Observation, storage_ready: bool, settings: Settings, now: datetime) -> Plan:
    """A Job is wanted while the storage is ready, the metadata is missing and the model
    is not being deleted."""
    if seen.location is None:
        return Plan(location=None, children=[], record=Record(seen.model.storage_uri), max_attempts=settings.retry.max_attempts)
    folded = fold_jobs(seen, seen.location, settings, now)
    wanted = storage_ready and not seen.finalizing and not seen.metadata_present
    decided = decide_attempt(folded, wanted, settings, now)
    return choose_children(seen, folded, decided, settings)


def fold_jobs(seen: Observation, location: PVCLocation, settings: Settings, now: datetime) -> Folded:
    """The newest observed Job of an attempt the record knows, or of a later one, says how
    that attempt stands. A running attempt whose Job is out of view failed once that Job
    could no longer be running: until then Metacontroller's view may only be behind (an
    informer that listed from a lagging API server), and the Job still running."""
    remembered = read_record(seen, location.namespace)
    jobs = model_jobs(seen.model, seen.jobs, location.namespace, settings.retry.max_attempts, remembered.attempts)
    latest = max(jobs, default=0)
    newest = Newest(latest, jobs[latest], read_outcome(jobs[latest], seen.pods)) if latest and latest >= remembered.attempts else None
    if newest is not None:
        record = _fold_newest(remembered, newest, now)
    elif remembered.result is Result.RUNNING:
        until = _may_run_until(remembered, settings)
        if until is not None and now < until:
            return Folded(location=location, record=remembered, jobs=jobs, outcome=None, model=seen.model, unseen_until=until)
        record = _vanished(remembered, location, now)
    else:
        record = remembered
    return Folded(location=location, record=record, jobs=jobs, outcome=newest.outcome if newest else None, model=seen.model)


def _may_run_until(record: Record, settings: Settings) -> datetime | None:
    """When the record's Job, created at ``started_at``, is past its deadline for certain."""
    created = parse_time(record.started_at)
    if created is None:
        return None
    return created + timedelta(seconds=settings.job.active_deadline_seconds + UNSEEN_GRACE_SECONDS)


def decide_attempt(folded: Folded, wanted: bool, settings: Settings, now: datetime) -> Decided:
    """The next attempt starts when a Job is wanted, none is under way, attempts are left
    and the delay after a failure is over; a delay not over yet asks to be called back."""
    record = folded.record
    start = record.next_start(settings.retry)
    if not wanted or record.result not in (None, Result.FAILED) or record.attempts >= settings.retry.max_attempts:
        unseen = None if folded.unseen_until is None else max((folded.unseen_until - now).total_seconds(), 1.0)
        return Decided(record=record, outcome=folded.outcome, wanted=wanted, retry_at=start, resync_after=unseen)
    if start is not None and now < start:
        resync_after = min(max((start - now).total_seconds(), 1.0), settings.retry.max_delay_seconds)
        return Decided(record=record, outcome=folded.outcome, wanted=wanted, retry_at=start, resync_after=resync_after)
    started = record._replace(
        attempts=record.attempts + 1,
        job_name=job_name(folded.model, folded.model.storage_uri, record.attempts + 1),
        result=Result.PENDING,
        started_at="",
        failed_at="",
        failure_reason="",
        pod_waiting="",
        pod_ended="",
    )
    return Decided(record=started, outcome=None, wanted=wanted)


def choose_children(seen: Observation, folded: Folded, decided: Decided, settings: Settings) -> Plan:
    """Every observed Job of the URI as built, a requested Job once its own ServiceAccount
    and RBAC are observed (so its pod never starts without the permission to write the
    model), the access objects while any Job exists, is requested or may run out of view,
    and the record."""
    model, location = seen.model, folded.location
    access = build_access(model, location.namespace)
    missing = tuple(
        f"{item['kind']} {item['metadata']['name']}"
        for item in access
        if (item["kind"], item["metadata"].get("namespace"), item["metadata"]["name"]) not in seen.access
    )
    jobs = [
        build_job(model, Attempt(location, model.storage_uri, attempt), built_with(job, settings.job))
        for attempt, job in sorted(folded.jobs.items())
    ]
    requested = decided.record.result is Result.PENDING and decided.record.attempts not in folded.jobs
    creating = decided.wanted and requested
    record = decided.record._replace(message=_request_says(seen, location, decided, missing)) if requested else decided.record
    if creating and not missing:
        jobs.append(build_job(model, Attempt(location, model.storage_uri, record.attempts), settings.job))
    children = jobs + access if jobs or creating or folded.unseen_until is not None else []
    if record.attempts and not seen.finalizing:
        children.append(build_record(model, location.namespace, record.data()))
    return Plan(
        location=location,
        children=children,
        record=record,
        max_attempts=settings.retry.max_attempts,
        outcome=decided.outcome,
        missing_access=missing,
        retry_at=decided.retry_at,
        resync_after=decided.resync_after,
        unseen_until=folded.unseen_until,
    )


def _request_says(seen: Observation, location: PVCLocation, decided: Decided, missing: tuple[str, ...]) -> str:
    """What became of a requested Job: its access objects first, the Job itself, or why it
    is no longer created (it will be if the cause goes away)."""
    where = f"Job {location.namespace}/{decided.record.job_name}"
    if decided.wanted:
        return f"the ServiceAccount and RBAC of {where} requested; the Job follows once they exist" if missing else f"{where} requested"
    if seen.finalizing:
        return f"{where} not created: the model is being deleted"
    if seen.metadata_present:
        return f"{where} not created: the spec already holds the metadata"
    return f"{where} not created: the storage is not ready"


def _vanished(remembered: Record, location: PVCLocation, now: datetime) -> Record:
    """A running attempt whose Job is gone before it finished has failed."""
    return remembered._replace(
        result=Result.FAILED,
        failed_at=format_time(now),
        failure_reason=Reason.JOB_FAILED,
        message=f"Job {location.namespace}/{remembered.job_name} disappeared before it finished (deleted by hand?)",
        pod_waiting="",
        pod_ended="",
    )


def _fold_newest(remembered: Record, newest: Newest, now: datetime) -> Record:
    """The record as the newest observed Job (and its pods) tell it."""
    job, outcome = newest.job, newest.outcome
    name = job["metadata"]["name"]
    where = f"{job['metadata'].get('namespace')}/{name}"
    if outcome.result is Result.SUCCEEDED:
        message, waiting = f"Job {where} completed", ""
    elif outcome.result is Result.RUNNING:
        waiting = outcome.pod_waiting
        doing = "is suspended" if outcome.suspended else "is running"
        message = f"Job {where} {doing}" + (f"{POD_WAITING}{waiting}" if waiting else "")
    else:
        return _fold_failure(remembered, newest, now)
    return remembered._replace(
        attempts=newest.attempt,
        job_name=name,
        result=outcome.result,
        started_at=_created(job),
        failure_reason="",
        message=message,
        pod_waiting=waiting,
        pod_ended="",
    )


def _fold_failure(remembered: Record, newest: Newest, now: datetime) -> Record:
    """A failed Job: its own words, how its pod ended (or, once the pods are gone, what the
    record kept of them), and when it failed (kept once recorded for this Job)."""
    job, outcome = newest.job, newest.outcome
    name = job["metadata"]["name"]
    same_job = remembered.job_name == name
    said = outcome.pod_ended or (remembered.pod_ended if same_job else "")
    waited = "" if said or not same_job else remembered.pod_waiting
    message = f"Job {job['metadata'].get('namespace')}/{name} failed: {outcome.detail or 'no reason given'}"
    if said:
        message += f"{POD_ENDED}{said}"
    elif waited:
        message += f"{WAS_WAITING}{waited}"
    kept = remembered.failed_at if remembered.result is Result.FAILED and same_job else ""
    return remembered._replace(
        attempts=newest.attempt,
        job_name=name,
        result=Result.FAILED,
        started_at=_created(job),
        failed_at=kept or _no_later(outcome.failed_at, now),
        failure_reason=outcome.failure_reason,
        message=message,
        pod_waiting=waited,
        pod_ended=said,
    )


def _created(job: dict[str, Any]) -> str:
    """When the Job was created, as the API server stamped it ("" if it reads as no time)."""
    return normalized_time(job["metadata"].get("creationTimestamp")) or ""


def _no_later(moment: str | None, now: datetime) -> str:
    """A failure time from the Job, or now when it has none or lies ahead (a skewed clock
    there must not postpone the retry)."""
    parsed = parse_time(moment)
    return format_time(parsed if parsed is not None and parsed <= now else now)
