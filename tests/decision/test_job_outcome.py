"""The agent's own last error, as the failed Job's pod reports it (CONTRACT §6).

zap writes JSON lines by default and tab-separated console lines in debug mode; with
``FallbackToLogsOnError`` the pod's termination message is the log's tail, at most 2048
bytes or 80 lines, so its first line may be cut anywhere.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks.pvc.job_outcome import MESSAGE_LIMIT, JobOutcome, Result, agent_said, pod_waiting, read_outcome
from tests import golden

JOB = {"metadata": {"name": "llama-3-1-8b-metadata-2bd87517-a5a494", "namespace": "models"}}
CAUSE = "failed to parse model config at /mnt/models: invalid character '}' looking for beginning of object key string"
FINAL = "model-metadata encountered an error during execution"
STACK = "main.(*ModelMetadataAgent).Start\n\t/workspace/cmd/ome-agent/model_metadata_agent.go:72"


def failed_pod(message: str, exit_code: int = 1, reason: str = "Error") -> dict[str, Any]:
    """The Job's pod as the customize hook fetches it, its agent container terminated."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-failed-agent-json-log.request.json")
    pod = max(request["related"]["Pod.v1"].values(), key=lambda pod: pod["metadata"]["name"])
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated.update(message=message, exitCode=exit_code, reason=reason)
    return pod


def json_line(level: str, msg: str, **fields: Any) -> str:
    return json.dumps({"level": level, "ts": 1796039998.3372, "caller": "ome-agent/model_metadata_agent.go:74", "msg": msg, **fields}) + "\n"


def console_line(level: str, msg: str, **fields: Any) -> str:
    return f"2026-11-30T11:59:58.337Z\t{level}\tome-agent/model_metadata_agent.go:74\t{msg}\t{json.dumps(fields)}\n"


def test_json_log_yields_message_and_error() -> None:
    log = json_line("info", "Starting ome-agent", command="model-metadata") + json_line("error", FINAL, error=CAUSE, stacktrace=STACK)
    assert agent_said(JOB, [failed_pod(log)]) == f"Error, exit code 1: {FINAL}: {CAUSE}"


def test_console_log_yields_message_and_error() -> None:
    log = console_line("INFO", "Starting ome-agent", command="model-metadata") + console_line("ERROR", FINAL, error=CAUSE)
    assert agent_said(JOB, [failed_pod(log)]) == f"Error, exit code 1: {FINAL}: {CAUSE}"


@pytest.mark.parametrize("line", [json_line, console_line])
def test_tail_cut_mid_line_skips_the_fragment_and_finds_the_last_error(line: Any) -> None:
    log = line("error" if line is json_line else "ERROR", "Failed to extract model metadata", error="first cause")
    log += line("error" if line is json_line else "ERROR", FINAL, error=CAUSE)
    assert agent_said(JOB, [failed_pod(log[25:])]) == f"Error, exit code 1: {FINAL}: {CAUSE}"


def test_tail_whose_only_error_line_is_cut_gives_reason_and_exit_code() -> None:
    log = json_line("error", FINAL, error=CAUSE)
    assert agent_said(JOB, [failed_pod(log[40:])]) == "Error, exit code 1"


def test_tail_without_an_error_line_gives_reason_and_exit_code() -> None:
    log = json_line("info", "Reading model config", path="/mnt/models/config.json") * 80
    assert agent_said(JOB, [failed_pod(log, 137, "OOMKilled")]) == "OOMKilled, exit code 137"


def test_error_line_without_an_error_field_gives_its_message() -> None:
    assert agent_said(JOB, [failed_pod(json_line("fatal", "no config file provided"))]) == (
        "Error, exit code 1: no config file provided"
    )


def test_cobra_error_line_is_quoted_whole() -> None:
    log = 'ERROR: required flag(s) "basemodel-name" not set\n'
    assert agent_said(JOB, [failed_pod(log)]) == 'Error, exit code 1: ERROR: required flag(s) "basemodel-name" not set'


@pytest.mark.parametrize(
    "log",
    [
        json_line("error", FINAL, error="模型配置无效: " + "界" * 100_000),
        console_line("ERROR", "ошибка " * 50_000, error=CAUSE),
        "{" * 200_000 + "\n" + "[" * 200_000,
        "\t".join(["x"] * 100_000),
        json_line("error", ["not", "text"], error={"nested": CAUSE}),
    ],
    ids=["huge-unicode-json", "huge-unicode-console", "deep-nesting", "many-fields", "wrong-types"],
)
def test_huge_unicode_or_odd_logs_give_a_bounded_message(log: str) -> None:
    said = agent_said(JOB, [failed_pod(log)])
    assert said.startswith("Error, exit code 1") and len(said) <= MESSAGE_LIMIT


@pytest.mark.parametrize("value", [-1, 7.5, True, "Complete", {"type": "Complete"}])
def test_job_and_pod_status_lists_of_another_type_read_as_empty(value: Any) -> None:
    job = {"metadata": JOB["metadata"], "status": {"conditions": value}}
    pod = failed_pod(json_line("error", FINAL, error=CAUSE))
    pod["status"]["conditions"] = value
    assert read_outcome(job, [pod]) == JobOutcome(Result.RUNNING)
    assert pod_waiting(job, [pod]) == ""
    pod["status"]["containerStatuses"] = value
    assert agent_said(job, [pod]) == ""


@pytest.mark.parametrize(
    ("status", "facts"),
    [
        ({}, (Result.RUNNING, False, False)),
        ({"active": 1, "ready": 0}, (Result.RUNNING, False, False)),
        ({"conditions": [{"type": "Suspended", "status": "True"}]}, (Result.RUNNING, True, False)),
        ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}, (Result.RUNNING, False, False)),
        ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}, (Result.SUCCEEDED, False, False)),
        ({"conditions": [{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": "2026-11-30T11:00:00Z"}]}, (Result.FAILED, False, False)),
        ({"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}, (Result.FAILED, False, True)),
        ({"conditions": [{"type": "Failed", "status": "False"}]}, (Result.RUNNING, False, False)),
    ],
)
def test_a_jobs_conditions_say_its_result_whether_suspended_and_whether_past_its_deadline(status: dict, facts: tuple) -> None:
    """A decided failure (FailureTarget) is a failure while its pods still terminate."""
    outcome = read_outcome({"metadata": {"name": "j"}, "status": status}, [])
    assert (outcome.result, outcome.suspended, outcome.deadline_exceeded) == facts


def test_failure_time_is_the_first_failure_condition() -> None:
    outcome = read_outcome(
        {
            "metadata": {"name": "j"},
            "status": {
                "conditions": [
                    {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": "2026-11-30T11:00:00Z"},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": "2026-11-30T11:00:07Z"},
                ]
            },
        },
        [],
    )
    assert outcome.failed_at == "2026-11-30T11:00:00Z"
