"""Plan the metadata extraction in three steps: fold what the observed Jobs say into the
record, decide whether the next attempt starts, and choose the children to return.

A Job is the hook's by its name alone (derived from the model, the URI and the attempt),
and every observed Job of the current URI is returned exactly as it was built, until
Kubernetes removes it: Metacontroller deletes every child an answer leaves out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from hooks.conditions import format_time, parse_time
from hooks.pvc.job_outcome import POD_WAITING, JobOutcome, Result, has_finished, read_outcome
from hooks.pvc.metadata_job import Attempt, build_access, build_job, build_record, built_with, job_name, job_names, model_jobs
from hooks.pvc.observation import Observation
from hooks.pvc.record import ENDED, Record, Remembered, read_record
from hooks.pvc.storage_uri import PVCLocation
from hooks.request import Model
from hooks.settings import Settings

WAS_WAITING = "; before that its pod was waiting: "
POD_ENDED = "; its last pod ended: "
AGENT_LOG = "; the agent's log, until the Job's TTL removes it: "


class Newest(NamedTuple):
    """The newest observed Job of the current URI: its attempt, the Job, what it says."""

    attempt: int
    job: dict[str, Any]
    outcome: JobOutcome


class Folded(NamedTuple):
    """Step 1: where the Jobs run, the record as it was read and with the newest observed
    Job folded in, the observed Jobs of the current URI by attempt, what the newest one
    says, whether any of them has not finished, and the model they are for."""

    location: PVCLocation
    remembered: Remembered
    record: Record
    jobs: dict[int, dict[str, Any]]
    outcome: JobOutcome | None
    unfinished: bool
    model: Model


class Decided(NamedTuple):
    """Step 2: the record with the next attempt started, or not; whether a Job is wanted
    at all; when the attempt after a failed one may start; and when to be called back for
    a retry that is not due yet."""

    record: Record
    outcome: JobOutcome | None
    wanted: bool
    retry_at: datetime | None = None
    resync_after: float | None = None


class Plan(NamedTuple):
    """Step 3: the children to return, the record as it stands, what the latest Job said,
    the attempts allowed and when the next may start, and when to call back. A refused URI plans nothing and has no location."""

    location: PVCLocation | None
    children: list[dict[str, Any]]
    record: Record
    max_attempts: int
    outcome: JobOutcome | None = None
    retry_at: datetime | None = None
    resync_after: float | None = None

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
    that attempt stands. An attempt the record says was requested or running, whose Job
    is not observed, is requested again: its Job was deleted, or Metacontroller's view of
    it is behind (an informer that listed again from a lagging API server), and a request
    for a Job that exists changes nothing (its name is its attempt's)."""
    remembered = read_record(seen, location.namespace)
    attempts = {*range(1, settings.retry.max_attempts + 1), remembered.record.attempts}
    jobs = model_jobs(seen.model, seen.jobs, location.namespace, attempts)
    latest = max(jobs, default=0)
    outcome = None
    if latest and latest >= remembered.record.attempts:
        outcome = read_outcome(jobs[latest], seen.pods)
        record = _fold_newest(remembered.record, Newest(latest, jobs[latest], outcome), now)
    elif remembered.record.result in (Result.PENDING, Result.RUNNING):
        record = _requested_again(remembered.record, seen.model)
    else:
        record = remembered.record
    unfinished = any(not has_finished(job) for job in jobs.values())
    return Folded(location=location, remembered=remembered, record=record, jobs=jobs, outcome=outcome,
                  unfinished=unfinished, model=seen.model)


def _requested_again(record: Record, model: Model) -> Record:
    """An attempt whose Job is not observed, requested again under its Job's name: the one
    the record names if the hook derives it for that attempt (a Job release 0.1.0
    started keeps its name), else the one it derives now; never a name merely read."""
    derived = job_names(model, record.storage_uri, [record.attempts])
    name = record.job_name if record.job_name in derived else job_name(model, record.storage_uri, record.attempts)
    return record._replace(job_name=name, result=Result.PENDING, message="")


def decide_attempt(folded: Folded, wanted: bool, settings: Settings, now: datetime) -> Decided:
    """The next attempt starts when a Job is wanted, none is under way, attempts are left
    and the delay after a failure is over; a delay not over yet asks to be called back."""
    record = folded.record
    start = record.next_start(settings.retry)
    if not wanted or record.result not in (None, Result.FAILED) or record.attempts >= settings.retry.max_attempts:
        return Decided(record=record, outcome=folded.outcome, wanted=wanted, retry_at=start)
    if start is not None and now < start:
        resync_after = min(max((start - now).total_seconds(), 1.0), settings.retry.max_delay_seconds)
        return Decided(record=record, outcome=folded.outcome, wanted=wanted, retry_at=start, resync_after=resync_after)
    started = Record(
        storage_uri=record.storage_uri,
        attempts=record.attempts + 1,
        job_name=job_name(folded.model, folded.model.storage_uri, record.attempts + 1),
        result=Result.PENDING,
    )
    return Decided(record=started, outcome=None, wanted=wanted)


def choose_children(seen: Observation, folded: Folded, decided: Decided, settings: Settings) -> Plan:
    """Every observed Job of the URI as built; a requested Job once its own ServiceAccount
    and RBAC are observed (so its pod never starts without the permission to write the
    model); the access objects only while a Job is requested or has not finished (a
    finished pod's token is still valid, so the grant goes at once); and the record, as
    far as it says something worth keeping."""
    model, location = seen.model, folded.location
    access = build_access(model, location.namespace)
    missing = any((item["kind"], item["metadata"].get("namespace"), item["metadata"]["name"]) not in seen.access
                  for item in access)
    jobs = [
        build_job(model, Attempt(location, model.storage_uri, attempt), built_with(job, settings.job), job["metadata"]["name"])
        for attempt, job in sorted(folded.jobs.items())
    ]
    requested = decided.record.result is Result.PENDING and decided.record.attempts not in folded.jobs
    creating = decided.wanted and requested
    record = decided.record._replace(message=_request_says(seen, location, decided)) if requested else decided.record
    if creating and not missing:
        jobs.append(build_job(model, Attempt(location, model.storage_uri, record.attempts), settings.job, record.job_name))
    children = jobs + access if creating or folded.unfinished else jobs
    kept = _kept(record, folded)
    if kept is not None and not seen.finalizing:
        children.append(build_record(model, location.namespace, kept.render()))
    return Plan(
        location=location,
        children=children,
        record=record,
        max_attempts=settings.retry.max_attempts,
        outcome=decided.outcome,
        retry_at=decided.retry_at,
        resync_after=decided.resync_after,
    )


def _kept(record: Record, folded: Folded) -> Record | None:
    """The record the answer returns: this one when it says what no observed Job will say
    later (how an attempt ended, what its pod waited for) or when the stored one concerns
    this same attempt, still under way, and must stay true; else the attempt that just
    ended where the next one starts at once; otherwise the stored one as it is (None if
    there is none), so that an attempt under way costs no write."""
    stored = folded.remembered.record if folded.remembered.stored else None
    under_way = stored is not None and stored.attempts == record.attempts and stored.result not in ENDED
    if record.worth_writing or under_way:
        return record
    if folded.record.worth_writing:
        return folded.record
    return stored


def _request_says(seen: Observation, location: PVCLocation, decided: Decided) -> str:
    """What became of a requested Job, or why it is no longer created (it will be if the
    cause goes away). One text while its access objects and then the Job are created, so
    that the status does not change between the two."""
    where = f"Job {location.namespace}/{decided.record.job_name}"
    if decided.wanted:
        return f"{where} requested, after its ServiceAccount and RBAC"
    if seen.finalizing:
        return f"{where} not created: the model is being deleted"
    if seen.metadata_present:
        return f"{where} not created: the spec already holds the metadata"
    return f"{where} not created: the storage is not ready"


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
        failed_at="",
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
    namespace = job["metadata"].get("namespace")
    message = f"Job {namespace}/{name} failed: {outcome.detail or 'no reason given'}"
    if said:
        message += f"{POD_ENDED}{said}"
    elif waited:
        message += f"{WAS_WAITING}{waited}"
    else:
        message += f"{AGENT_LOG}kubectl logs -n {namespace} job/{name}"
    kept = remembered.failed_at if remembered.result is Result.FAILED and same_job else ""
    return remembered._replace(
        attempts=newest.attempt,
        job_name=name,
        result=Result.FAILED,
        failed_at=kept or _no_later(outcome.failed_at, now),
        failure_reason=outcome.failure_reason,
        message=message,
        pod_waiting=waited,
        pod_ended=said,
    )


def _no_later(moment: str | None, now: datetime) -> str:
    """A failure time from the Job, or now when it has none or lies ahead (a skewed clock
    there must not postpone the retry)."""
    parsed = parse_time(moment)
    return format_time(parsed if parsed is not None and parsed <= now else now)
