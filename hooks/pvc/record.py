"""The hook's memory of a model's extraction attempts: the record.

Which URI it concerns, how many attempts were made, the last Job and how it ended. It is
what keeps a finished Job from running again after Kubernetes removed it, and what spaces
retries. It lives in an ``ExtractionRecord``, a kind of the hook's own (a child, so it
comes back in every request), where no BaseModel CRD's status schema can prune it;
``status.metadataExtraction`` shows the same fields to people.

It is written only when there is something to remember that nothing else will say: an
attempt that ended, or what a running attempt's pod was seen waiting for (the pods may go
before the Job fails). While an attempt's Job exists, the Job says how it stands.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from hooks.conditions import normalized_time, parse_time
from hooks.pvc.job_outcome import FAILURE_REASONS, Result
from hooks.pvc.metadata_job import record_name
from hooks.pvc.observation import Observation
from hooks.request import field, is_count, text
from hooks.settings import RetrySettings

RESULTS = {result.value: result for result in Result}
INT32_MAX = 2**31 - 1
ENDED = (Result.SUCCEEDED, Result.FAILED)


class Record(NamedTuple):
    """What was last attempted for which URI, and how it ended.

    What the Job's pod last said (what it waited for, how it ended) and the reason of a
    failure are kept in fields of their own: the pods go before the Job does, and a failure
    must still quote them and keep its reason."""

    storage_uri: str
    attempts: int = 0
    job_name: str = ""
    result: Result | None = None
    failed_at: str = ""
    failure_reason: str = ""
    message: str = ""
    pod_waiting: str = ""
    pod_ended: str = ""

    def render(self) -> dict[str, Any]:
        """The status form, which is also the ``ExtractionRecord``'s spec; optional fields
        appear only when they say something."""
        rendered: dict[str, Any] = {"storageUri": self.storage_uri, "attempts": self.attempts, "jobName": self.job_name}
        optional = (
            ("result", self.result),
            ("failedAt", self.failed_at),
            ("failureReason", self.failure_reason),
            ("message", self.message),
            ("podWaiting", self.pod_waiting),
            ("podEnded", self.pod_ended),
        )
        rendered.update((key, str(value)) for key, value in optional if value)
        return rendered

    @property
    def worth_writing(self) -> bool:
        """Whether this record says what no observed Job will say later: how its attempt
        ended, or what its pod waited for."""
        return self.result in ENDED or bool(self.pod_waiting)

    def next_start(self, retry: RetrySettings) -> datetime | None:
        """When the attempt after a failed one may start; None when nothing failed."""
        failed = parse_time(self.failed_at) if self.result is Result.FAILED else None
        if failed is None:
            return None
        try:
            return failed + timedelta(seconds=retry_delay(self.attempts, retry))
        except OverflowError:
            return datetime.max.replace(tzinfo=timezone.utc)


class Remembered(NamedTuple):
    """The record as it was read, and whether an ``ExtractionRecord`` of the current URI
    holds it: the answer then returns one (Metacontroller deletes an observed child an
    answer leaves out, as it deletes one about another URI, which nothing will read)."""

    record: Record
    stored: bool


def retry_delay(attempt: int, retry: RetrySettings) -> int:
    """Seconds to wait after ``attempt`` failed: doubling from the base, capped."""
    return min(retry.base_delay_seconds << min(attempt - 1, 32), retry.max_delay_seconds)


def read_record(seen: Observation, namespace: str) -> Remembered:
    """The observed record in the Jobs' namespace or, where there is none, what the model's
    status shows of it (``status.metadataExtraction``: how a model keeps its attempts under
    the hook's CRDs when its record was lost, or was the ConfigMap release 0.1.0 kept). It
    counts only if it concerns the current URI: a new URI starts from nothing. A field that
    does not read as what the hook wrote reads as absent."""
    model = seen.model
    name = record_name(model)
    observed = [
        field(item, "spec")
        for item in seen.records
        if item["metadata"]["name"] == name and item["metadata"].get("namespace") == namespace
    ]
    raw = observed[0] if observed else field(model.status, "metadataExtraction")
    attempts = raw.get("attempts")
    if raw.get("storageUri") != model.storage_uri or not is_count(attempts, INT32_MAX) or not attempts:
        return Remembered(Record(model.storage_uri), False)
    record = Record(
        storage_uri=model.storage_uri,
        attempts=attempts,
        job_name=text(raw, "jobName"),
        result=RESULTS.get(text(raw, "result")),
        failed_at=normalized_time(raw.get("failedAt")) or "",
        failure_reason=text(raw, "failureReason") if raw.get("failureReason") in FAILURE_REASONS else "",
        message=text(raw, "message"),
        pod_waiting=text(raw, "podWaiting"),
        pod_ended=text(raw, "podEnded"),
    )
    return Remembered(record, bool(observed))
