"""No input, however odd, gets a 5xx or drops a Job of the model.

Each saved request is mutated at random places (keys removed, values swapped for values
of other types) with a fixed seed, so every run checks the same few thousand requests.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from hooks.pvc.metadata_job import ATTEMPT_LABEL, job_name
from hooks.request import BadRequest, read_model
from hooks.settings import RetrySettings, Settings
from tests import golden, strategies

ODD_VALUES: list[Any] = [None, 0, -1, 2**63, 1.5, True, "", "x", "pvc://", "\u0000", [], [None], {}, {"metadata": 1}]
SMALL_CASES = [path for path in golden.cases() if path.stat().st_size < 200_000]
MUTANTS_PER_CASE = 60


def mutate(document: bytes, document_places: list[tuple[Any, ...]], rng: random.Random) -> Any:
    """A copy of the JSON ``document`` damaged in one to three places; ``document_places``
    are its places, which the first damage draws from (each later one from the damaged copy)."""
    mutant = orjson.loads(document)
    for damage in range(rng.randint(1, 3)):
        places = document_places if damage == 0 else strategies.places(mutant)
        if not places:
            return rng.choice(ODD_VALUES)
        *parent_path, last = rng.choice(places)
        parent = mutant
        for step in parent_path:
            parent = parent[step]
        if isinstance(parent, dict) and rng.random() < 0.4:
            del parent[last]
        else:
            parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
    return mutant


def jobs_of_current_uri(request: Any) -> set[tuple[str, str]]:
    """Observed Jobs named as the hook names the model's Jobs for its current URI: these
    must survive, whatever their state, labels or annotations say (they are hints)."""
    try:
        model = read_model(request["parent"])
        jobs = list(request["children"]["Job.batch/v1"].values())
    except (BadRequest, KeyError, TypeError, AttributeError):
        return set()
    derived = {job_name(model, model.storage_uri, attempt) for attempt in range(1, Settings().retry.max_attempts + 1)}
    return {
        (job["metadata"].get("namespace"), job["metadata"]["name"])
        for job in jobs
        if isinstance(job, dict) and isinstance(job.get("metadata"), dict) and job["metadata"].get("name") in derived
    }


@pytest.mark.parametrize("request_file", SMALL_CASES, ids=lambda path: f"{golden.hook_of(path)}/{path.name[:-13]}")
def test_mutated_requests_get_an_answer_or_a_4xx_never_a_5xx(request_file: Path) -> None:
    original = request_file.read_bytes()
    original_places = strategies.places(orjson.loads(original))
    rng = random.Random(request_file.name)
    client = golden.client()
    hook = golden.hook_of(request_file)
    for _ in range(MUTANTS_PER_CASE):
        mutant = mutate(original, original_places, rng)
        reply = client.post(f"/{hook}", data=json.dumps(mutant), content_type="application/json")
        assert reply.status_code in (200, 400), (reply.status_code, reply.get_data()[:500], mutant)
        body = reply.get_json()
        if reply.status_code == 400:
            assert body["error"]
            continue
        if hook != "sync" or mutant.get("finalizing") is True:
            continue  # a finalize call (its path, or the flag on /sync) keeps no child
        if golden.hands_omes_status_back(mutant):
            continue  # nor a model OME's own PVC backend serves: its Job is OME's
        returned = {(c["metadata"].get("namespace"), c["metadata"]["name"]) for c in body["children"] if c["kind"] == "Job"}
        assert jobs_of_current_uri(mutant) <= returned, mutant


# One field damaged in a realistic request: the answer keeps the running Job, or is a 400.

RUNNING = golden.FIXTURES / "sync" / "basemodel-job-running-after-hook-restart.request.json"
RUNNING_RECORDED = golden.FIXTURES / "sync" / "basemodel-job-running-v1-keys.request.json"
CLUSTER_COMPLETE = golden.FIXTURES / "sync" / "clusterbasemodel-job-complete-ready.request.json"


def post(request: dict[str, Any], settings: Settings | None = None) -> tuple[int, dict[str, Any]]:
    reply = golden.client(settings=settings).post("/sync", data=json.dumps(request), content_type="application/json")
    return reply.status_code, reply.get_json()


def only(group: dict[str, Any]) -> dict[str, Any]:
    [item] = group.values()
    return item


def returned_jobs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [child for child in body["children"] if child["kind"] == "Job"]


def test_rbac_child_whose_namespace_is_not_a_string_gets_a_400() -> None:
    request = golden.load(RUNNING)
    only(request["children"]["Role.rbac.authorization.k8s.io/v1"])["metadata"]["namespace"] = ["models"]
    status, body = post(request)
    assert status == 400 and "metadata.namespace" in body["error"]


def test_cluster_scoped_child_with_a_namespace_gets_a_400() -> None:
    request = golden.load(CLUSTER_COMPLETE)
    only(request["children"]["ClusterRole.rbac.authorization.k8s.io/v1"])["metadata"]["namespace"] = "models"
    status, body = post(request)
    assert status == 400 and "cluster-scoped" in body["error"]


@pytest.mark.parametrize("damage", ["label removed", "labels not a map", "label names another attempt"])
def test_running_job_is_recognised_by_its_name_whatever_its_labels_say(damage: str) -> None:
    request = golden.load(RUNNING_RECORDED)
    job = only(request["children"]["Job.batch/v1"])
    if damage == "label removed":
        del job["metadata"]["labels"][ATTEMPT_LABEL]
    elif damage == "labels not a map":
        job["metadata"]["labels"] = "ome.io/metadata-attempt=1"
    else:
        job["metadata"]["labels"][ATTEMPT_LABEL] = "3"
    status, body = post(request)
    assert status == 200
    assert [child["metadata"]["name"] for child in returned_jobs(body)] == [job["metadata"]["name"]]
    assert body["status"]["metadataExtraction"]["attempts"] == 1
    assert body["status"]["conditions"][1]["reason"] == "JobRunning"


def test_running_job_of_an_attempt_past_a_lowered_maximum_is_recognised_from_the_record() -> None:
    request = golden.load(RUNNING_RECORDED)
    job = only(request["children"]["Job.batch/v1"])
    del job["metadata"]["labels"][ATTEMPT_LABEL]
    model = read_model(request["parent"])
    job["metadata"]["name"] = job_name(model, model.storage_uri, 4)
    golden.recorded(request, attempts=4, jobName=job["metadata"]["name"], result="Running", podWaiting="ImagePullBackOff")
    status, body = post(request, Settings(retry=RetrySettings(max_attempts=2)))
    assert status == 200
    assert [child["metadata"]["name"] for child in returned_jobs(body)] == [job["metadata"]["name"]]


@pytest.mark.parametrize(("key", "value"), [("kind", "CronJob"), ("apiVersion", "batch/v1beta1")])
def test_observed_job_that_says_it_is_another_type_gets_a_400(key: str, value: str) -> None:
    request = golden.load(RUNNING)
    only(request["children"]["Job.batch/v1"])[key] = value
    status, body = post(request)
    assert status == 400 and key in body["error"] and value in body["error"]


def test_observed_job_with_the_models_name_in_another_namespace_gets_a_400_not_a_moved_job() -> None:
    request = golden.load(CLUSTER_COMPLETE)
    only(request["children"]["Job.batch/v1"])["metadata"]["namespace"] = "elsewhere"
    status, body = post(request)
    assert status == 400 and "belongs in namespace" in body["error"]


def test_returned_job_takes_identity_pvc_and_mounts_from_the_derivation_not_the_observed_job() -> None:
    request = golden.load(RUNNING)
    job = only(request["children"]["Job.batch/v1"])
    built = copy.deepcopy(job)
    pod = job["spec"]["template"]["spec"]
    pod["volumes"][0]["persistentVolumeClaim"].update(claimName="other-store", readOnly=False)
    pod["containers"][0]["volumeMounts"][0].update(subPath="models", readOnly=False)
    pod["containers"][0]["args"][pod["containers"][0]["args"].index("--basemodel-name") + 1] = "other-model"
    pod["serviceAccountName"] = "default"
    status, body = post(request)
    assert status == 200
    [returned] = returned_jobs(body)
    spec = returned["spec"]["template"]["spec"]
    assert returned["metadata"]["namespace"] == "models"
    assert spec["volumes"] == built["spec"]["template"]["spec"]["volumes"]
    assert spec["containers"][0]["volumeMounts"] == built["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert spec["containers"][0]["args"] == built["spec"]["template"]["spec"]["containers"][0]["args"]
    assert spec["serviceAccountName"] == built["spec"]["template"]["spec"]["serviceAccountName"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("name", "Llama_3.1"), ("name", "llama-" + "x" * 250), ("name", "llama\n"), ("namespace", "Models"), ("namespace", "models.prod")],
)
def test_parent_whose_name_kubernetes_could_not_store_gets_a_400_not_a_dropped_job(key: str, value: str) -> None:
    request = golden.load(RUNNING)
    request["parent"]["metadata"][key] = value
    status, body = post(request)
    assert status == 400 and body["error"].startswith(f"parent {key} {value!r}"[:40])
