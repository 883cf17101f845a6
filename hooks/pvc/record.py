"""The hook's memory of a model's extraction attempts: the record.

Which URI it concerns, how many attempts were made, the last Job and how it ended. It is
what keeps a finished Job from running again after Kubernetes removed it, and what spaces
retries. It lives in a ConfigMap the hook owns (a child, so it comes back in every
request), where no BaseModel CRD's status schema can prune it; ``status.metadataExtraction``
shows the same fields to people.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from hooks.conditions import normalized_time, parse_time
from hooks.pvc.job_outcome import FAILURE_REASONS, Result
from hooks.pvc.metadata_job import ATTEMPT_NUMBER, record_name
from hooks.pvc.observation import Observation
from hooks.request import field, text
from hooks.settings import RetrySettings

RESULTS = {result.value: result for result in Result}
INT32_MAX = 2**31 - 1


class Record(NamedTuple):
    """What was last attempted for which URI, and how it ended.

    What the Job's pod last said (what it waited for, how it ended) and the reason of a
    failure are kept in fields of their own: the pods go before the Job does, and a failure
    must still quote them and keep its reason. When the Job was created is kept too: a
    running attempt whose Job drops out of view counts as failed only once that Job could
    no longer be running."""

    storage_uri: str
    attempts: int = 0
    job_name: str = ""
    result: Result | None = None
    started_at: str = ""
    failed_at: str = ""
    failure_reason: str = ""
    message: str = ""
    pod_waiting: str = ""
    pod_ended: str = ""

    def render(self) -> dict[str, Any]:
        """The status form; optional fields appear only when they say something."""
        return _remembered_render(self) if _short(self) else _render(self)

    def data(self) -> dict[str, str]:
        """The record ConfigMap's data: the status form in strings."""
        return _remembered_data(self) if _short(self) else _data(self)

    def next_start(self, retry: RetrySettings) -> datetime | None:
        """When the attempt after a failed one may start; None when nothing failed."""
        failed = parse_time(self.failed_at) if self.result is Result.FAILED else None
        if failed is None:
            return None
        try:
            return failed + timedelta(seconds=retry_delay(self.attempts, retry))
        except OverflowError:
            return datetime.max.replace(tzinfo=timezone.utc)


def _render(record: Record) -> dict[str, Any]:
    rendered: dict[str, Any] = {"storageUri": record.storage_uri, "attempts": record.attempts, "jobName": record.job_name}
    optional = (
        ("result", record.result),
        ("startedAt", record.started_at),
        ("failedAt", record.failed_at),
        ("failureReason", record.failure_reason),
        ("message", record.message),
        ("podWaiting", record.pod_waiting),
        ("podEnded", record.pod_ended),
    )
    rendered.update((key, value) for key, value in optional if value)
    return rendered


def _data(record: Record) -> dict[str, str]:
    return {key: str(value) for key, value in record.render().items()}


# A steady state renders the same record on every sync, so its forms are remembered (shared
# between answers, never changed); only for records whose texts are short, as the hook
# writes them, so that no request can fill the memory.
REMEMBERED_TEXT_LENGTH = 4096
_remembered_render = functools.lru_cache(maxsize=1024)(_render)
_remembered_data = functools.lru_cache(maxsize=1024)(_data)


def _short(record: Record) -> bool:
    return len(record.message) + len(record.pod_waiting) + len(record.pod_ended) + len(record.storage_uri) <= REMEMBERED_TEXT_LENGTH


def retry_delay(attempt: int, retry: RetrySettings) -> int:
    """Seconds to wait after ``attempt`` failed: doubling from the base, capped."""
    return min(retry.base_delay_seconds << min(attempt - 1, 32), retry.max_delay_seconds)


def read_record(seen: Observation, namespace: str) -> Record:
    """The observed record ConfigMap in the Jobs' namespace, if it concerns the current
    URI; a new URI starts from nothing. A field that does not read as what the hook wrote
    reads as absent."""
    model = seen.model
    name = record_name(model)
    raw = next(
        (
            field(item, "data")
            for item in seen.records
            if item["metadata"]["name"] == name and item["metadata"].get("namespace") == namespace
        ),
        {},
    )
    attempts = text(raw, "attempts")
    if raw.get("storageUri") != model.storage_uri or not ATTEMPT_NUMBER.fullmatch(attempts) or int(attempts) > INT32_MAX:
        return Record(model.storage_uri)
    return Record(
        storage_uri=model.storage_uri,
        attempts=int(attempts),
        job_name=text(raw, "jobName"),
        result=RESULTS.get(text(raw, "result")),
        started_at=normalized_time(raw.get("startedAt")) or "",
        failed_at=normalized_time(raw.get("failedAt")) or "",
        failure_reason=text(raw, "failureReason") if raw.get("failureReason") in FAILURE_REASONS else "",
        message=text(raw, "message"),
        pod_waiting=text(raw, "podWaiting"),
        pod_ended=text(raw, "podEnded"),
    )
