"""Decisions about the metadata Job that the golden files do not isolate."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from hooks.pvc.job_outcome import agent_said, pod_waiting
from hooks.settings import JobSettings, Settings
from hooks.sync import sync
from tests import golden
from tests.metacontroller.feedback import apply

NOW = golden.FIXTURE_NOW
SETTINGS = Settings()


def rbac_ready() -> dict[str, Any]:
    """A Bound PVC whose ServiceAccount, Role and RoleBinding exist: the Job is due."""
    return golden.load(golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json")


def kinds(response: dict[str, Any]) -> list[str]:
    return [child["kind"] for child in response["children"]]


def condition(response: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(item for item in response["status"]["conditions"] if item["type"] == kind)


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


def running(request: dict[str, Any]) -> dict[str, Any]:
    """The request after Metacontroller created the Job and its controller started it."""
    response = sync(request, SETTINGS, NOW).response
    return apply(request, response, NOW)


def test_existing_job_is_returned_as_built_after_the_settings_change() -> None:
    following = running(rbac_ready())
    [observed] = following["children"]["Job.batch/v1"].values()
    changed = Settings(job=JobSettings(agent_image="registry.example.com/ome-agent:v9", memory_limit="2Gi", active_deadline_seconds=900))
    [job] = [child for child in sync(following, changed, NOW).response["children"] if child["kind"] == "Job"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == observed["spec"]["template"]["spec"]["containers"][0]["image"] != changed.job.agent_image
    assert container["resources"]["limits"]["memory"] == "512Mi"
    assert job["spec"]["activeDeadlineSeconds"] == 300
    assert "controller-uid" not in job["metadata"]["labels"] and "status" not in job


def waiting_pod(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-x7k2p",
            "namespace": job["metadata"]["namespace"],
            "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]},
        },
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "model-metadata",
                    "ready": False,
                    "restartCount": 0,
                    "image": "ghcr.io/moirai-internal/ome-agent:v0.1.5",
                    "imageID": "",
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ghcr.io/moirai-internal/ome-agent:v0.1.5"'}},
                }
            ],
        },
    }


def test_running_job_whose_pod_cannot_start_says_why_and_the_failure_remembers_it() -> None:
    request = running(rbac_ready())
    [job] = request["children"]["Job.batch/v1"].values()
    request["related"]["Pod.v1"] = {"models/pod": waiting_pod(job)}
    response = sync(request, SETTINGS, NOW).response
    ready = condition(response, "MetadataReady")
    assert ready["reason"] == "JobRunning" and "ImagePullBackOff" in ready["message"]

    later = NOW + timedelta(seconds=301)
    request = apply(request, response, later)
    [job] = request["children"]["Job.batch/v1"].values()
    job["status"]["conditions"] = [
        {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded",
         "message": "Job was active longer than specified deadline", "lastTransitionTime": "2026-11-30T12:05:01Z"}
    ]
    request["related"]["Pod.v1"] = {}
    answer = sync(request, SETTINGS, later).response
    failed = condition(answer, "MetadataReady")
    assert failed["reason"] == "JobDeadlineExceeded"
    assert "before that its pod was waiting: ImagePullBackOff" in failed["message"]
    assert sync(apply(request, answer, later), SETTINGS, later).response == answer


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


def test_returned_job_keeps_its_settings_but_drops_what_others_added_and_rederives_the_pvc() -> None:
    following = running(rbac_ready())
    [observed] = following["children"]["Job.batch/v1"].values()
    pod = observed["spec"]["template"]["spec"]
    pod["volumes"] = [
        {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "model", "persistentVolumeClaim": {"claimName": "other-store", "readOnly": False}},
    ]
    pod["containers"][0]["image"] = "registry.example.com/ome-agent:v0.1.4"
    pod["containers"].append({"name": "istio-proxy", "image": "istio/proxyv2:1.22.0"})
    [job] = [child for child in sync(following, SETTINGS, NOW).response["children"] if child["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    assert [container["image"] for container in spec["containers"]] == ["registry.example.com/ome-agent:v0.1.4"]
    assert [volume["name"] for volume in spec["volumes"]] == ["model", "tmp"]
    assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "model-storage", "readOnly": True}


def deadline_exceeded() -> dict[str, Any]:
    return golden.load(golden.FIXTURES / "sync" / "basemodel-job-deadline-exceeded.request.json")


@pytest.mark.parametrize("when", ["2027-06-01T00:00:00Z", "9999-12-31T23:59:59Z"])
def test_failure_stamped_ahead_of_the_clock_counts_from_now_and_the_retry_is_not_postponed(when: str) -> None:
    request = deadline_exceeded()
    [job] = request["children"]["Job.batch/v1"].values()
    for item in job["status"]["conditions"]:
        item["lastTransitionTime"] = when
    response = sync(request, SETTINGS, NOW).response
    assert response["status"]["metadataExtraction"]["failedAt"] == "2026-11-30T12:00:00Z"
    assert 0 < response["resyncAfterSeconds"] <= SETTINGS.retry.max_delay_seconds


def test_recorded_failure_far_ahead_still_asks_to_be_called_within_the_longest_delay() -> None:
    request = deadline_exceeded()
    response = sync(request, SETTINGS, NOW).response
    request = apply(request, response, NOW)
    golden.observed_record(request)["failedAt"] = "9999-12-31T23:59:59Z"
    assert 0 < sync(request, SETTINGS, NOW).response["resyncAfterSeconds"] <= SETTINGS.retry.max_delay_seconds


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


def test_failure_quotes_its_pod_from_the_records_own_field_once_the_pods_are_gone() -> None:
    """What the pod said is state, kept in ``podEnded``; the message is only for people."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-failed-agent-json-log.request.json")
    response = sync(request, SETTINGS, NOW).response
    said = response["status"]["metadataExtraction"]["podEnded"]
    following = apply(request, response, NOW)
    following["related"]["Pod.v1"] = {}
    golden.observed_record(following)["message"] = "rewritten by someone"
    record = sync(following, SETTINGS, NOW).response["status"]["metadataExtraction"]
    assert record["podEnded"] == said and record["message"].endswith(f"; its last pod ended: {said}")


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


def ended(request: dict[str, Any], condition_type: str) -> dict[str, Any]:
    """The request once the running Job ended (``Complete`` or ``Failed``)."""
    [job] = request["children"]["Job.batch/v1"].values()
    job["status"] = {"conditions": [{"type": condition_type, "status": "True", "reason": "BackoffLimitExceeded" if condition_type == "Failed" else "",
                                     "message": "", "lastTransitionTime": "2026-11-30T11:59:59Z"}]}
    return request


def test_an_attempt_under_way_writes_no_record_and_its_end_does() -> None:
    """While its Job exists the Job says how the attempt stands: no record is written (a
    stored one would be returned as it is, which costs Metacontroller no write); once the
    Job ended, the record says how."""
    request = running(rbac_ready())
    request["children"]["ExtractionRecord.ome-basemodel-hook.ome.io/v1alpha1"] = {}
    assert "ExtractionRecord" not in kinds(sync(request, SETTINGS, NOW).response)
    [record] = [child for child in sync(ended(request, "Complete"), SETTINGS, NOW).response["children"] if child["kind"] == "ExtractionRecord"]
    assert record["spec"]["result"] == "Succeeded"


@pytest.mark.parametrize("condition_type", ["Complete", "Failed"])
def test_the_grant_goes_as_soon_as_the_job_finished_though_the_job_stays_for_its_logs(condition_type: str) -> None:
    """A finished pod's token is still valid: nothing may use it to write the model."""
    response = sync(ended(running(rbac_ready()), condition_type), SETTINGS, NOW).response
    assert "Job" in kinds(response)
    assert not {"ServiceAccount", "Role", "RoleBinding"} & set(kinds(response))


def test_a_failure_no_pod_explains_names_the_agents_log() -> None:
    request = ended(running(rbac_ready()), "Failed")
    message = condition(sync(request, SETTINGS, NOW).response, "MetadataReady")["message"]
    [job] = request["children"]["Job.batch/v1"].values()
    assert f"kubectl logs -n models job/{job['metadata']['name']}" in message


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
