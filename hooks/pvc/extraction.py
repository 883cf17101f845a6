"""Decide which metadata Jobs should exist and what ``MetadataReady`` says.

The hook's only memory is the record: which URI it concerns, how many attempts were
made, the last Job and its result. It is what keeps a finished Job from running again
after Kubernetes removed it, and what spaces retries. It lives in a ConfigMap the hook
owns (a child, so it comes back in every request), where no BaseModel CRD's status
schema can prune it; ``status.metadataExtraction`` shows the same fields to people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from hooks.conditions import FALSE, TRUE, Condition, format_time, normalized_time, parse_time
from hooks.observed import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    BadRequest,
    Model,
    field,
    object_group,
    text,
)
from hooks.pvc.job_outcome import (
    FAILED,
    JOB_DEADLINE_EXCEEDED,
    JOB_FAILED,
    JOB_RUNNING,
    JOB_SUSPENDED,
    METADATA_EXTRACTED,
    RUNNING,
    SUCCEEDED,
    JobOutcome,
    agent_said,
    pod_waiting,
    read_outcome,
)
from hooks.pvc.metadata_job import (
    ATTEMPT_LABEL,
    build_access,
    build_job,
    build_record,
    built_with,
    job_name,
    job_names,
    service_account_name,
)
from hooks.pvc.storage_uri import PVCLocation
from hooks.settings import Settings

METADATA_READY = "MetadataReady"
PENDING = "Pending"
METADATA_FIELDS = ("modelType", "modelArchitecture", "modelParameterSize")
METADATA_PRESENT = "MetadataPresent"
STORAGE_NOT_READY = "StorageNotReady"
JOB_PENDING = "JobPending"
FAILURE_REASONS = (JOB_FAILED, JOB_DEADLINE_EXCEEDED)
ATTEMPT_HINT = re.compile(r"[1-9][0-9]{0,8}")
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Record:
    """What was last attempted for which URI, and how it ended.

    What the Job's pod last said (what it waited for, how it ended) and the reason of a
    failure are kept in fields of their own: the pods go before the Job does, and a failure
    must still quote them and keep its reason."""

    storage_uri: str
    attempts: int = 0
    job_name: str = ""
    result: str = ""
    failed_at: str = ""
    failure_reason: str = ""
    message: str = ""
    pod_waiting: str = ""
    pod_ended: str = ""

    def render(self) -> dict[str, Any]:
        """The status form; optional fields appear only when they say something."""
        rendered: dict[str, Any] = {
            "storageUri": self.storage_uri,
            "attempts": self.attempts,
            "jobName": self.job_name,
        }
        for key, value in self._optional():
            if value:
                rendered[key] = value
        return rendered

    def data(self) -> dict[str, str]:
        """The record ConfigMap's data: the status form in strings."""
        return {key: str(value) for key, value in self.render().items()}

    def _optional(self) -> tuple[tuple[str, str], ...]:
        return (
            ("result", self.result),
            ("failedAt", self.failed_at),
            ("failureReason", self.failure_reason),
            ("message", self.message),
            ("podWaiting", self.pod_waiting),
            ("podEnded", self.pod_ended),
        )


@dataclass(frozen=True)
class Situation:
    """What every rule about the metadata Job weighs besides the record: the model, where
    its files are, whether the storage is ready, whether a Job may start at all (not while
    the model is being deleted), and the settings."""

    model: Model
    location: PVCLocation
    storage_ready: bool
    may_start: bool
    settings: Settings


@dataclass(frozen=True)
class JobChildren:
    """What Metacontroller sent about the model's metadata Jobs: the observed Jobs, the
    (kind, namespace, name) of the observed ServiceAccounts and RBAC objects, the observed
    record ConfigMaps, and the Job pods the customize hook asked for (whose messages
    explain a failure)."""

    jobs: list[dict[str, Any]]
    access: set[tuple[str, str | None, str]]
    records: list[dict[str, Any]]
    pods: list[dict[str, Any]]


@dataclass(frozen=True)
class Extraction:
    """The Jobs (and their access objects) to return, the condition, the record and when to call back."""

    children: list[dict[str, Any]]
    condition: Condition
    record: Record | None
    resync_after: float | None


def read_access(request: dict[str, Any], model: Model) -> set[tuple[str, str | None, str]]:
    """The observed ServiceAccounts and RBAC objects by (kind, namespace, name), as
    ``build_access`` names them, so a Job can wait for its own."""
    access_types = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS) if model.cluster_scoped else (ROLES, ROLE_BINDINGS)
    return {
        (type_key.split(".", 1)[0], item["metadata"].get("namespace") or None, item["metadata"]["name"])
        for type_key in (SERVICE_ACCOUNTS, *access_types)
        for item in object_group(request, "children", type_key, required=True)
    }


def metadata_present(spec: dict[str, Any]) -> bool:
    """The contract's test: without these three the model cannot be scheduled sensibly."""
    return all(isinstance(spec.get(key), str) and spec[key] for key in METADATA_FIELDS)


def retry_delay(attempt: int, settings: Settings) -> int:
    """Seconds to wait after ``attempt`` failed: doubling from the base, capped."""
    return min(settings.retry_base_delay_seconds << min(attempt - 1, 32), settings.retry_max_delay_seconds)


def read_record(model: Model, location: PVCLocation, records: list[dict[str, Any]]) -> Record:
    """The observed record ConfigMap, if it concerns the current URI; a new URI starts
    from nothing. A field that does not read as what the hook wrote reads as absent."""
    name = service_account_name(model)
    raw = next(
        (
            field(item, "data")
            for item in records
            if item["metadata"]["name"] == name and item["metadata"].get("namespace") == location.namespace
        ),
        {},
    )
    if raw.get("storageUri") != model.storage_uri:
        return Record(model.storage_uri)
    attempts = text(raw, "attempts")
    if not ATTEMPT_HINT.fullmatch(attempts) or int(attempts) > INT32_MAX:
        return Record(model.storage_uri)
    return Record(
        storage_uri=model.storage_uri,
        attempts=int(attempts),
        job_name=text(raw, "jobName"),
        result=text(raw, "result") if raw.get("result") in (PENDING, RUNNING, SUCCEEDED, FAILED) else "",
        failed_at=normalized_time(raw.get("failedAt")) or "",
        failure_reason=text(raw, "failureReason") if raw.get("failureReason") in FAILURE_REASONS else "",
        message=text(raw, "message"),
        pod_waiting=text(raw, "podWaiting"),
        pod_ended=text(raw, "podEnded"),
    )


def current_jobs(
    model: Model, location: PVCLocation, observed: list[dict[str, Any]], record: Record, settings: Settings
) -> dict[int, dict[str, Any]]:
    """Observed Jobs built for the current URI, by attempt.

    A Job is recognised by its name alone: the one this hook derives for the URI and an
    attempt, so nothing foreign is adopted and nothing of ours is missed. The attempts
    tried are every one the settings allow, the one the record remembers, and the one a
    Job's attempt label names (a hint, checked against the name), so a Job survives a
    lost status, a lowered maximum and a tampered label alike."""
    if not observed:
        return {}
    hinted = {_attempt_hint(job) for job in observed} - {None}
    attempts = {*range(1, settings.max_attempts + 1), record.attempts, *hinted} - {0}
    derived = job_names(model, model.storage_uri, attempts)
    found = {}
    for job in observed:
        attempt = derived.get(job["metadata"]["name"])
        if attempt is None:
            continue
        if job["metadata"]["namespace"] != location.namespace:
            raise BadRequest(
                f"observed Job {job['metadata']['namespace']}/{job['metadata']['name']} has the name this hook "
                f"gives attempt {attempt} for {model.storage_uri!r}, but that Job belongs in namespace "
                f"{location.namespace}; refusing to guess which is the model's"
            )
        found[attempt] = job
    return found


def _attempt_hint(job: dict[str, Any]) -> int | None:
    """The attempt a Job's label claims, if it reads as one."""
    raw = field(job["metadata"], "labels").get(ATTEMPT_LABEL)
    return int(raw) if isinstance(raw, str) and ATTEMPT_HINT.fullmatch(raw) else None


def plan_extraction(situation: Situation, observed: JobChildren, now: datetime) -> Extraction:
    """From the observed Jobs and the record, choose the children to return and the condition.

    A new Job is created only once its own ServiceAccount and RBAC are observed, so its
    pod never starts without the permission to write the model."""
    model, location, settings = situation.model, situation.location, situation.settings
    record = read_record(model, location, observed.records)
    jobs = current_jobs(model, location, observed.jobs, record, settings)
    outcome: JobOutcome | None = None

    if jobs and max(jobs) >= record.attempts:
        attempt = max(jobs)
        outcome = read_outcome(jobs[attempt])
        record = _observe(record, attempt, jobs[attempt], outcome, observed.pods, now)
    elif record.result == RUNNING:
        record = replace(
            record,
            result=FAILED,
            failed_at=format_time(now),
            failure_reason=JOB_FAILED,
            message=f"Job {location.namespace}/{record.job_name} disappeared before it finished (deleted by hand?)",
            pod_waiting="",
            pod_ended="",
        )

    wanted = situation.may_start and situation.storage_ready and not metadata_present(model.spec)
    resync_after: float | None = None
    if wanted and record.result in ("", FAILED) and record.attempts < settings.max_attempts:
        start = _next_start(record, settings)
        if start is None or now >= start:
            record = replace(
                record,
                attempts=record.attempts + 1,
                job_name=job_name(model, model.storage_uri, record.attempts + 1),
                result=PENDING,
                failed_at="",
                failure_reason="",
                pod_waiting="",
                pod_ended="",
            )
            outcome = None
        else:
            resync_after = min(max((start - now).total_seconds(), 1.0), settings.retry_max_delay_seconds)

    access = build_access(model, location.namespace)
    missing = [
        f"{item['kind']} {item['metadata']['name']}"
        for item in access
        if (item["kind"], item["metadata"].get("namespace"), item["metadata"]["name"]) not in observed.access
    ]
    returned = [
        build_job(model, location, model.storage_uri, attempt, built_with(job, settings))
        for attempt, job in sorted(jobs.items())
    ]
    requested = record.result == PENDING and record.attempts not in jobs
    creating = wanted and requested
    where = f"Job {location.namespace}/{record.job_name}"
    if creating and missing:
        record = replace(record, message=f"the ServiceAccount and RBAC of {where} requested; the Job follows once they exist")
    elif creating:
        record = replace(record, message=f"{where} requested")
        returned.append(build_job(model, location, model.storage_uri, record.attempts, settings))
    elif requested:
        record = replace(record, message=f"{where} not created: {_unwanted(situation)}")
    children = returned + access if returned or creating else []
    if record.attempts and situation.may_start:
        children.append(build_record(model, location.namespace, record.data()))
    condition = _condition(situation, record, outcome, missing)
    return Extraction(children, condition, record if record.attempts else None, resync_after)


WAITING = "; its pod is waiting: "
WAS_WAITING = "; before that its pod was waiting: "
POD_ENDED = "; its last pod ended: "


def refused_uri_condition() -> Condition:
    """MetadataReady while the storage URI is refused: without a location no Job can be planned."""
    return Condition(METADATA_READY, FALSE, STORAGE_NOT_READY, "no metadata Job until spec.storage.storageUri is valid")


def _unwanted(situation: Situation) -> str:
    """Why a requested Job is no longer created (it will be if the cause goes away)."""
    if not situation.may_start:
        return "the model is being deleted"
    if metadata_present(situation.model.spec):
        return "the spec already holds the metadata"
    return "the storage is not ready"


def _observe(
    record: Record, attempt: int, job: dict[str, Any], outcome: JobOutcome, pods: list[dict[str, Any]], now: datetime
) -> Record:
    """Fold what the newest observed Job (and its pods) say into the record."""
    name = job["metadata"]["name"]
    where = f"{job['metadata'].get('namespace')}/{name}"
    same_job = record.job_name == name
    if outcome.result == SUCCEEDED:
        return replace(
            record, attempts=attempt, job_name=name, result=SUCCEEDED, failure_reason="", message=f"Job {where} completed",
            pod_waiting="", pod_ended="",
        )
    if outcome.result == RUNNING:
        state = "is suspended" if outcome.reason == JOB_SUSPENDED else "is running"
        waiting = pod_waiting(job, pods)
        message = f"Job {where} {state}" + (f"{WAITING}{waiting}" if waiting else "")
        return replace(
            record, attempts=attempt, job_name=name, result=RUNNING, failure_reason="", message=message,
            pod_waiting=waiting, pod_ended="",
        )
    message = f"Job {where} failed: {outcome.detail or 'no reason given'}"
    said = agent_said(job, pods) or (record.pod_ended if same_job else "")
    waited = "" if said or not same_job else record.pod_waiting
    if said:
        message += f"{POD_ENDED}{said}"
    elif waited:
        message += f"{WAS_WAITING}{waited}"
    kept = record.failed_at if record.result == FAILED and same_job else ""
    return replace(
        record,
        attempts=attempt,
        job_name=name,
        result=FAILED,
        failed_at=kept or _no_later(outcome.failed_at, now),
        failure_reason=outcome.reason,
        message=message,
        pod_waiting=waited,
        pod_ended=said,
    )


def _no_later(moment: str | None, now: datetime) -> str:
    """A failure time from the Job, or now when it has none or lies ahead (a skewed clock
    there must not postpone the retry)."""
    parsed = parse_time(moment)
    return format_time(parsed if parsed is not None and parsed <= now else now)


def _next_start(record: Record, settings: Settings) -> datetime | None:
    """When the next attempt may start; None when nothing failed yet."""
    if record.result != FAILED:
        return None
    failed = parse_time(record.failed_at)
    if failed is None:
        return None
    try:
        return failed + timedelta(seconds=retry_delay(record.attempts, settings))
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)


def _condition(situation: Situation, record: Record, outcome: JobOutcome | None, missing_access: list[str]) -> Condition:
    """MetadataReady, from the most decisive fact first."""
    model, location, settings = situation.model, situation.location, situation.settings
    where = f"{location.namespace}/{record.job_name}"
    of = f"attempt {record.attempts} of {settings.max_attempts}"
    if record.result == SUCCEEDED:
        missing = [key for key in METADATA_FIELDS if not model.spec.get(key)]
        note = f"; the spec still lacks {', '.join(missing)}" if missing else ""
        return Condition(METADATA_READY, TRUE, METADATA_EXTRACTED, f"Job {where} extracted the model's metadata{note}")
    if metadata_present(model.spec):
        shown = ", ".join(f"{key}={model.spec[key]}" for key in METADATA_FIELDS)
        return Condition(METADATA_READY, TRUE, METADATA_PRESENT, f"spec already holds the metadata ({shown})")
    if record.result == RUNNING:
        return _running(record, where, of, outcome, situation.may_start)
    if record.result == FAILED:
        return _failed(situation, record, of, outcome)
    if not situation.storage_ready:
        return Condition(METADATA_READY, FALSE, STORAGE_NOT_READY, "waiting for the storage before reading the model's config")
    if not situation.may_start:
        return Condition(METADATA_READY, FALSE, JOB_PENDING, "no metadata Job: the model is being deleted")
    if missing_access:
        return Condition(
            METADATA_READY,
            FALSE,
            JOB_PENDING,
            f"creating the ServiceAccount and RBAC for Job {where} ({of}) first; still missing: "
            f"{', '.join(missing_access)}. If they do not appear, the model's events show why "
            "Metacontroller could not create them (SyncError; it must hold the verbs a Role grants)",
        )
    return Condition(
        METADATA_READY,
        FALSE,
        JOB_PENDING,
        f"waiting for Job {where} ({of}) to be created; if it does not appear, the model's "
        "events show why Metacontroller could not create it (SyncError)",
    )


def _running(record: Record, where: str, of: str, outcome: JobOutcome | None, may_start: bool) -> Condition:
    """A Job that exists and has not finished: suspended, waiting for its pod, or working."""
    reason = outcome.reason if outcome else JOB_RUNNING
    waiting = record.pod_waiting
    if reason == JOB_SUSPENDED:
        doing = "is suspended; resume it (spec.suspend: false) to extract"
    elif waiting:
        doing = f"has not started{WAITING}{waiting}"
    else:
        doing = "is extracting the metadata"
    deleting = "; it is deleted with the model" if not may_start else ""
    return Condition(METADATA_READY, FALSE, reason, f"Job {where} ({of}) {doing}{deleting}")


def _failed(situation: Situation, record: Record, of: str, outcome: JobOutcome | None) -> Condition:
    """A failed attempt: what failed, and when the next one starts or how to retry."""
    settings = situation.settings
    reason = outcome.reason if outcome and outcome.result == FAILED else record.failure_reason or JOB_FAILED
    message = f"{of} failed at {record.failed_at}: {record.message}"
    start = _next_start(record, settings)
    if not situation.may_start:
        message += ". No further attempt: the model is being deleted"
    elif record.attempts < settings.max_attempts and start is not None:
        following = f"Attempt {record.attempts + 1}"
        if situation.storage_ready:
            message += f". {following} starts at {format_time(start)}"
        else:
            message += f". {following} starts once the storage is ready, not before {format_time(start)}"
    else:
        message += (
            f". No attempts left ({settings.max_attempts} failed). Fix the model files or the PVC, then "
            "change spec.storage.storageUri to retry at once (the same location with or without a "
            "trailing '/' counts as a new URI), or write modelType, modelArchitecture and "
            "modelParameterSize into the spec yourself"
        )
    return Condition(METADATA_READY, FALSE, reason, message)
