"""Read what an observed metadata Job, and the pods the customize hook fetched, say.

A Job's own conditions tell whether it finished; only its pods tell why a run fails or
never starts (an image that cannot be pulled, a pod that cannot be scheduled, the
agent's own error), and that is what a person needs in the status.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, NamedTuple

from hooks.conditions import normalized_time, shorten
from hooks.pvc.metadata_job import CONTAINER
from hooks.reasons import Reason
from hooks.request import field, items, text

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
MESSAGE_LIMIT = 1024
# The reasons a failed attempt is given, by its Job while observed, then by the record.
FAILURE_REASONS = frozenset({Reason.JOB_FAILED, Reason.JOB_DEADLINE_EXCEEDED})
# The conditions after which a Job starts no pod.
FINISHED = frozenset({"Complete", "Failed", "FailureTarget"})
# How a message goes on to say what a Job's pod waits for (``pod_waiting``).
POD_WAITING = "; its pod is waiting: "


class Result(StrEnum):
    """Where an extraction attempt stands: requested (``Pending``), then what its Job says."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class JobOutcome(NamedTuple):
    """What one Job says, by its own status and its pods: its result, whether it is
    suspended or ran past its deadline, the details a failure quotes, what its pod waits
    for while it runs and how its last pod ended once it failed."""

    result: Result
    suspended: bool = False
    deadline_exceeded: bool = False
    detail: str = ""
    failed_at: str | None = None
    pod_waiting: str = ""
    pod_ended: str = ""

    @property
    def failure_reason(self) -> Reason:
        """A failed Job's reason: its deadline, or anything else that failed it."""
        return Reason.JOB_DEADLINE_EXCEEDED if self.deadline_exceeded else Reason.JOB_FAILED


def _true_conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Job's conditions whose status is True, by type."""
    return {text(item, "type"): item for item in items(field(job, "status"), "conditions") if text(item, "status") == "True"}


def has_finished(job: dict[str, Any]) -> bool:
    """Complete, Failed, or a decided failure (``FailureTarget``, its pods still
    terminating): the Job starts no pod any more."""
    return not FINISHED.isdisjoint(_true_conditions(job))


def read_outcome(job: dict[str, Any], pods: list[dict[str, Any]]) -> JobOutcome:
    """A decided failure (``FailureTarget``) counts as failed while its pods are still
    terminating: the Job will not try again. Its pods are read only for what the result
    makes worth saying."""
    true = _true_conditions(job)
    if "Complete" in true:
        return JobOutcome(Result.SUCCEEDED)
    failure = true.get("FailureTarget") or true.get("Failed")
    if failure is not None:
        detail = shorten(": ".join(part for part in (text(failure, "reason"), text(failure, "message")) if part), MESSAGE_LIMIT)
        return JobOutcome(
            Result.FAILED,
            deadline_exceeded=text(failure, "reason") == "DeadlineExceeded",
            detail=detail,
            failed_at=normalized_time(failure.get("lastTransitionTime")),
            pod_ended=agent_said(job, pods),
        )
    suspended = field(job, "spec").get("suspend") is True or "Suspended" in true
    return JobOutcome(Result.RUNNING, suspended=suspended, pod_waiting=pod_waiting(job, pods))


def _agent_pods(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The Job's pods, each with its agent container's statuses. The related pods are every
    attempt's: the Job controller's label tells whose is whose. A mutating webhook may add
    sidecars: only the agent's statuses count."""
    name, namespace = job["metadata"]["name"], job["metadata"].get("namespace")
    return [
        (pod, [status for status in items(field(pod, "status"), "containerStatuses") if text(status, "name") == CONTAINER])
        for pod in pods
        if pod["metadata"].get("namespace") == namespace
        and any(field(pod["metadata"], "labels").get(key) == name for key in JOB_NAME_LABELS)
    ]


def agent_said(job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """How the Job's most recently finished pod ended, with the agent's last error.

    With ``FallbackToLogsOnError`` the termination message is the log's tail; its last
    error-level line says what went wrong. The reason and exit code tell the rest (an
    OOMKilled pod logs no error)."""
    finished: list[tuple[str, str, dict[str, Any]]] = []
    for pod, statuses in _agent_pods(job, pods):
        for status in statuses:
            for state_key in ("state", "lastState"):
                terminated = field(field(status, state_key), "terminated")
                if terminated and terminated.get("exitCode") != 0:
                    finished.append((text(terminated, "finishedAt"), pod["metadata"]["name"], terminated))
    if not finished:
        return ""
    terminated = max(finished, key=lambda item: item[:2])[2]
    code = terminated.get("exitCode")
    ended = ", ".join(
        part for part in (text(terminated, "reason"), f"exit code {code}" if isinstance(code, int) else "") if part
    )
    said = next(filter(None, map(agent_error, reversed(text(terminated, "message").splitlines()))), "")
    return shorten(": ".join(part for part in (ended, said) if part), MESSAGE_LIMIT)


ERROR_LEVELS = ("error", "dpanic", "panic", "fatal")


def agent_error(line: str) -> str:
    """An error-level line of the agent's log as "message: error", or "" for any other line.

    zap writes JSON lines by default and tab-separated console lines (time, level, caller,
    message, JSON fields) in debug mode; cobra's own failures are a plain ``ERROR:`` line.
    The termination message is the log's tail, so its first line may be cut anywhere: a
    fragment that no longer reads as a whole line is skipped."""
    line = line.strip()
    if line.startswith("ERROR:"):
        return line
    if line.startswith("{"):
        fields = _json(line)
        level, message = fields.get("level"), fields.get("msg")
    else:
        parts = line.split("\t")
        if len(parts) < 4:
            return ""
        level, message, fields = parts[1], parts[3].strip(), _json(parts[4]) if len(parts) > 4 else {}
    if not isinstance(level, str) or level.lower() not in ERROR_LEVELS:
        return ""
    return ": ".join(part for part in (message, fields.get("error")) if isinstance(part, str) and part)


def _json(raw: str) -> dict[str, Any]:
    """A JSON object from a log line; anything else (a cut line, a deep nest) reads as empty."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def pod_waiting(job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """Why a running Job's pod has not started its work yet, if it says so."""
    reasons = []
    for pod, statuses in _agent_pods(job, pods):
        for status in statuses:
            waiting = field(field(status, "state"), "waiting")
            reason = text(waiting, "reason")
            if reason and reason != "ContainerCreating":
                reasons.append(": ".join(part for part in (reason, text(waiting, "message")) if part))
        for condition in items(field(pod, "status"), "conditions"):
            if text(condition, "type") == "PodScheduled" and text(condition, "status") == "False":
                reasons.append(": ".join(part for part in (text(condition, "reason"), text(condition, "message")) if part))
    return shorten("; ".join(sorted(set(reasons))), MESSAGE_LIMIT)
