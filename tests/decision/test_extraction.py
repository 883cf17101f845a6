"""Decisions about the metadata Job that the golden files do not isolate."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from hooks.pvc.job_outcome import agent_said, pod_waiting
from hooks.settings import Settings
from hooks.sync import sync
from tests import golden
from tests.extraction_requests import condition, deadline_exceeded, kinds, rbac_ready, waiting_pod

NOW = golden.FIXTURE_NOW
SETTINGS = Settings()


def test_requested_job_is_not_created_once_the_pvc_is_gone() -> None:
    request = rbac_ready()
    request["related"]["PersistentVolumeClaim.v1"] = {}
    response = sync(request, SETTINGS, NOW).response
    assert "Job" not in kinds(response)
    assert condition(response, "MetadataReady")["reason"] == "StorageNotReady"
    assert response["status"]["state"] == "Failed"


def test_requested_job_is_not_created_once_the_metadata_is_in_the_spec() -> None:
    request = rbac_ready()
    request["parent"]["spec"].update(modelType="llama", modelArchitecture="LlamaForCausalLM", modelParameterSize="8.03B")
    response = sync(request, SETTINGS, NOW).response
    assert kinds(response) == [], "the Job and its access objects go, and no attempt ended"
    assert response["status"]["state"] == "Ready"
    assert condition(response, "MetadataReady")["reason"] == "MetadataPresent"


def test_job_waits_for_its_service_account_and_rbac() -> None:
    request = rbac_ready()
    request["children"]["RoleBinding.rbac.authorization.k8s.io/v1"] = {}
    response = sync(request, SETTINGS, NOW).response
    assert kinds(response) == ["ServiceAccount", "Role", "RoleBinding"]
    assert "RBAC" in condition(response, "MetadataReady")["message"]
    assert "after its ServiceAccount and RBAC" in response["status"]["metadataExtraction"]["message"]


def test_the_status_does_not_change_between_the_access_objects_and_the_job_they_wait_for() -> None:
    """One write fewer to Ready: the sync that asks for the access objects and the one that
    asks for the Job say the same."""
    waiting = rbac_ready()
    waiting["children"]["RoleBinding.rbac.authorization.k8s.io/v1"] = {}
    assert sync(waiting, SETTINGS, NOW).response["status"] == sync(rbac_ready(), SETTINGS, NOW).response["status"]


def test_withdrawn_request_says_why_the_job_was_not_created() -> None:
    request = rbac_ready()
    request["related"]["PersistentVolumeClaim.v1"] = {}
    record = sync(request, SETTINGS, NOW).response["status"]["metadataExtraction"]
    assert record["message"].endswith("not created: the storage is not ready")


def test_pod_killed_without_an_error_line_reports_its_reason_and_exit_code() -> None:
    job = {"metadata": {"name": "llama-metadata-1", "namespace": "models"}}
    pod = copy.deepcopy(waiting_pod(job))
    pod["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "message": "2026-11-30T11:59:58Z\tINFO\tx.go:1\tReading model config\t{\"errors_total\": 0}\n"}
    }
    assert agent_said(job, [pod]) == "OOMKilled, exit code 137"


def test_agent_error_is_quoted_as_message_and_error_not_as_a_log_tail() -> None:
    job = {"metadata": {"name": "llama-metadata-1", "namespace": "models"}}
    pod = copy.deepcopy(waiting_pod(job))
    log = (
        "2026-11-30T11:59:58.100Z\tINFO\tome-agent/main.go:62\tStarting ome-agent\t{}\n"
        "2026-11-30T11:59:58.337Z\tERROR\tmodel-metadata/module.go:61\tFailed to extract model metadata\t"
        '{"error": "no model config file found (tried: config.json, model_config.json, configuration.json)"}\n'
    )
    pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "reason": "Error", "message": log, "finishedAt": "2026-11-30T11:59:58Z"}}
    assert agent_said(job, [pod]) == (
        "Error, exit code 1: Failed to extract model metadata: no model config file found "
        "(tried: config.json, model_config.json, configuration.json)"
    )
    assert pod_waiting(job, [pod]) == ""


@pytest.mark.parametrize("when", ["2027-06-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_failure_stamped_ahead_of_the_clock_counts_from_now_and_the_retry_is_not_postponed(when: str) -> None:
    request = deadline_exceeded()
    [job] = request["children"]["Job.batch/v1"].values()
    for item in job["status"]["conditions"]:
        item["lastTransitionTime"] = when
    response = sync(request, SETTINGS, NOW).response
    assert response["status"]["metadataExtraction"]["failedAt"] == "2026-11-30T12:00:00Z"
    assert 0 < response["resyncAfterSeconds"] <= SETTINGS.retry.max_delay_seconds


@pytest.mark.parametrize("attempts", [0, "", "1", -1, 2147483648, True])
def test_record_without_a_count_of_attempts_reads_as_nothing_tried(attempts: str) -> None:
    request = rbac_ready()
    golden.recorded(request, attempts=attempts, result="Failed", failedAt="2026-11-30T11:59:00Z")
    response = sync(request, SETTINGS, NOW).response
    assert response["status"]["metadataExtraction"]["attempts"] == 1 and "Job" in kinds(response)


def test_record_without_a_result_is_written_back_without_one_while_deleting() -> None:
    request = rbac_ready()
    golden.recorded(request, attempts=1, jobName=golden.load(golden.response_file(golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"))["status"]["metadataExtraction"]["jobName"])
    request["parent"]["metadata"]["deletionTimestamp"] = "2026-11-30T11:59:50Z"
    record = sync(request, SETTINGS, NOW, finalize=True).response["status"]["metadataExtraction"]
    assert "result" not in record and record["attempts"] == 1


def test_the_record_of_another_uri_is_dropped_and_the_new_uri_starts_over() -> None:
    request = rbac_ready()
    golden.recorded(request, attempts=5, result="Failed", failedAt="2026-11-30T11:59:59Z")
    golden.observed_record(request)["storageUri"] = "pvc://old-store/models/llama"
    response = sync(request, SETTINGS, NOW).response
    assert "ExtractionRecord" not in kinds(response), "nothing reads a record of another URI, and nothing ended yet"
    assert response["status"]["metadataExtraction"]["attempts"] == 1 and "Job" in kinds(response)


def test_the_status_is_not_the_memory_a_pruned_or_edited_status_changes_no_decision() -> None:
    """OME's own CRD prunes status.metadataExtraction; the record is what counts."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-failed-backoff-waiting-retry.request.json")
    answer = sync(request, SETTINGS, NOW).response
    pruned = copy.deepcopy(request)
    pruned["parent"]["status"] = {"state": pruned["parent"]["status"]["state"]}
    assert {key: value for key, value in sync(pruned, SETTINGS, NOW).response.items() if key != "status"} == \
        {key: value for key, value in answer.items() if key != "status"}
    assert sync(pruned, SETTINGS, NOW).response["status"]["metadataExtraction"] == answer["status"]["metadataExtraction"]


def test_decision_reports_the_answers_own_state_ready_reason_and_job() -> None:
    decision = sync(rbac_ready(), SETTINGS, NOW)
    status = decision.response["status"]
    assert (decision.flow, decision.state, decision.reason) == ("pvc", "In_Transit", "JobPending")
    assert decision.job == status["metadataExtraction"]["jobName"] != ""
    handed_back = sync(golden.load(golden.FIXTURES / "sync" / "basemodel-switched-from-pvc-to-hf.request.json"), SETTINGS, NOW)
    assert (handed_back.flow, handed_back.state, handed_back.reason, handed_back.job) == ("hand-back", "In_Transit", "HandedBack", "")


@pytest.mark.parametrize("seconds", [0, 240, 3600])
def test_an_attempt_whose_job_is_out_of_view_is_requested_again_under_its_own_name(seconds: int) -> None:
    """Deleted by hand, or a view behind (an informer that listed again from a lagging API
    server): the Job is asked for again under its attempt's name, which creates nothing
    where it still exists; its access stays, and nothing counts as failed."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-gone-while-running-requested-again.request.json")
    recorded = request["parent"]["status"]["metadataExtraction"]["jobName"]
    response = sync(request, SETTINGS, NOW + timedelta(seconds=seconds)).response
    assert condition(response, "MetadataReady")["reason"] == "JobPending"
    assert [child["metadata"]["name"] for child in response["children"] if child["kind"] == "Job"] == [recorded]
    assert {"ServiceAccount", "Role", "RoleBinding"} <= set(kinds(response))


def test_a_model_extracted_before_the_record_was_a_kind_of_its_own_keeps_its_attempts_from_its_status() -> None:
    """Release 0.1.0 kept the record in a ConfigMap, which the CompositeController no longer
    reads; the status shows the same fields under the hook's CRDs, and the next record is
    written from them: no Job runs again and the count stays."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-gone-after-ttl-stays-ready.request.json")
    shown = golden.observed_record(request)
    request["children"]["ExtractionRecord.ome-basemodel-hook.ome.io/v1alpha1"] = {}
    request["parent"]["status"]["metadataExtraction"] = {**shown, "attempts": 3, "startedAt": "2026-11-30T11:50:00Z"}
    response = sync(request, SETTINGS, NOW).response
    assert response["status"]["metadataExtraction"]["attempts"] == 3 and "Job" not in kinds(response)
    [record] = [child for child in response["children"] if child["kind"] == "ExtractionRecord"]
    assert (record["spec"]["attempts"], record["spec"]["result"]) == (3, "Succeeded")


@pytest.mark.parametrize("fixture", ["basemodel-rbac-ready-creates-job", "basemodel-job-running-after-hook-restart",
                                     "basemodel-retries-exhausted"])
def test_an_answer_changed_by_its_reader_leaves_the_next_answer_as_it_was(fixture: str) -> None:
    """Nothing an answer holds is shared with a later one: whatever the caller does to it
    (the simulators clone every answer, so only this shows it), the next is the golden one."""
    request_file = golden.FIXTURES / "sync" / f"{fixture}.request.json"
    first = sync(golden.load(request_file), SETTINGS, NOW).response

    def scramble(value: Any) -> None:
        if isinstance(value, dict):
            for key in list(value):
                scramble(value[key])
                value[key] = "changed" if isinstance(value[key], str) else value[key]
        elif isinstance(value, list):
            for item in value:
                scramble(item)
            value.append("added")
    scramble(first)
    assert sync(golden.load(request_file), SETTINGS, NOW).response == golden.load(golden.response_file(request_file))


def test_a_pvc_model_whose_status_omes_own_backend_stamped_is_handed_back_with_no_job_and_omes_status() -> None:
    """OME's backend wrote before the label went (the fence admits its stamped writes): the
    hook's Job and grant go, and the status stays OME's, without the hook's conditions."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-omes-backend-stamped-the-status-hands-back.request.json")
    decision = sync(request, SETTINGS, NOW)
    assert decision.stepped_aside is not None and decision.flow == "hand-back"
    assert decision.response["children"] == []
    status = decision.response["status"]
    assert status["lastReconcileTime"] == request["parent"]["status"]["lastReconcileTime"]
    assert {item["type"] for item in status["conditions"]} == {"Ready", "SourceReachable"}
    assert (decision.state, decision.reason) == ("Ready", "HandedBack")
