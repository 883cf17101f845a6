"""The pure core's answers about the metadata Job fed back through the simulated
Metacontroller (``tests/metacontroller/feedback.py``): what the next request then holds,
and what the hook answers to it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hooks.settings import JobSettings, Settings
from hooks.sync import sync
from tests import golden
from tests.extraction_requests import condition, deadline_exceeded, kinds, rbac_ready, waiting_pod
from tests.metacontroller.feedback import apply

NOW = golden.FIXTURE_NOW
SETTINGS = Settings()


def running(request: dict[str, Any]) -> dict[str, Any]:
    """The request after Metacontroller created the Job and its controller started it."""
    response = sync(request, SETTINGS, NOW).response
    return apply(request, response, NOW)

def ended(request: dict[str, Any], condition_type: str) -> dict[str, Any]:
    """The request once the running Job ended (``Complete`` or ``Failed``)."""
    [job] = request["children"]["Job.batch/v1"].values()
    job["status"] = {"conditions": [{"type": condition_type, "status": "True", "reason": "BackoffLimitExceeded" if condition_type == "Failed" else "",
                                     "message": "", "lastTransitionTime": "2026-11-30T11:59:59Z"}]}
    return request

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

def test_recorded_failure_far_ahead_still_asks_to_be_called_within_the_longest_delay() -> None:
    request = deadline_exceeded()
    response = sync(request, SETTINGS, NOW).response
    request = apply(request, response, NOW)
    golden.observed_record(request)["failedAt"] = "9999-12-31T23:59:59Z"
    assert 0 < sync(request, SETTINGS, NOW).response["resyncAfterSeconds"] <= SETTINGS.retry.max_delay_seconds

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
