"""Properties of the pure core over generated requests, valid and damaged (CONTRACT §2, §6, §7).

Every answer is a 400 (``BadRequest``) or a 200 that Metacontroller and the API server
accept; a 200 never mounts the PVC writable, never leaves the namespace or sub-path the
URI allows, and never drops an observed Job of the model for its current URI, since
Metacontroller deletes every child a 200 leaves out. Seeded and bounded: the same few
hundred requests on every run, in a few seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

from hypothesis import event, given, settings as hypothesis_settings

from hooks.customize import customize
from hooks.pvc.metadata_job import job_name
from hooks.pvc.observation import JOBS
from hooks.pvc.storage_uri import StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.reasons import ConditionType, Reason
from hooks.request import BadRequest, Model, read_model
from hooks.settings import Settings
from hooks.sync import sync
from tests.schemas import KUBERNETES_VERSIONS, child_errors, status_errors
from tests.strategies import BOUNDED, NOW, customize_requests, sync_requests

ANSWER_KEYS = {"status", "children", "resyncAfterSeconds"}
CHILD_TYPES = {
    "BaseModel": {("batch/v1", "Job"), ("v1", "ServiceAccount"), ("ome-basemodel-hook.ome.io/v1alpha1", "ExtractionRecord"), ("rbac.authorization.k8s.io/v1", "Role"),
                  ("rbac.authorization.k8s.io/v1", "RoleBinding")},
    "ClusterBaseModel": {("batch/v1", "Job"), ("v1", "ServiceAccount"), ("ome-basemodel-hook.ome.io/v1alpha1", "ExtractionRecord"),
                         ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")},
}


@lru_cache(maxsize=4096)
def _kubernetes_errors(child: str) -> tuple[str, ...]:
    """Children repeat across examples; validate each distinct one once."""
    return tuple(child_errors(json.loads(child), KUBERNETES_VERSIONS[-1]))


def answer(request: Any, settings: Settings, finalize: bool) -> dict[str, Any] | None:
    """The core's answer, or None for a BadRequest; any other exception fails the test."""
    try:
        return sync(request, settings, NOW, finalize=finalize).response
    except BadRequest as refusal:
        assert str(refusal)
        return None


def jobs_of_current_uri(request: dict[str, Any], model: Model, settings: Settings) -> set[str]:
    """Names of the observed Jobs this hook built for the model's current URI (any attempt it allows)."""
    derived = {job_name(model, model.storage_uri, attempt) for attempt in range(1, settings.retry.max_attempts + 1)}
    return {job["metadata"]["name"] for job in request["children"][JOBS].values()} & derived


def check_job(job: dict[str, Any], model: Model) -> None:
    """A returned Job mounts the URI's PVC read-only, at the URI's sub-path, in the URI's namespace."""
    location = parse_pvc_uri(model.storage_uri, model.namespace)
    assert job["metadata"]["namespace"] == location.namespace
    pod = job["spec"]["template"]["spec"]
    claims = {volume["name"]: volume["persistentVolumeClaim"] for volume in pod["volumes"] if "persistentVolumeClaim" in volume}
    assert claims and all(claim == {"claimName": location.pvc_name, "readOnly": True} for claim in claims.values())
    for container in pod["containers"] + pod.get("initContainers", []):
        for mount in container.get("volumeMounts", []):
            if mount["name"] in claims:
                assert mount["readOnly"] is True and mount["subPath"] == location.sub_path


def check_answer(request: Any, settings: Settings, finalize: bool, response: dict[str, Any]) -> None:
    model = read_model(request["parent"])
    finalizing = finalize or request.get("finalizing") is True
    assert set(response) <= ANSWER_KEYS | ({"finalized"} if finalizing else set())
    if "resyncAfterSeconds" in response:
        limit = max(settings.retry.max_delay_seconds, settings.sync.finalize_resync_seconds)
        assert 0 < response["resyncAfterSeconds"] <= limit and math.isfinite(response["resyncAfterSeconds"])
    status = dict(response["status"])
    if model.generation is not None:
        status["observedGeneration"] = model.generation
    assert status_errors(model.kind, status) == []
    ready = next((item["reason"] for item in status.get("conditions", []) if item["type"] == ConditionType.READY), Reason.HANDED_BACK)
    assert status["state"] == Reason(ready).state, "the state is the one its Ready reason means"
    for child in response["children"]:
        assert (child["apiVersion"], child["kind"]) in CHILD_TYPES[model.kind]
        assert _kubernetes_errors(json.dumps(child, sort_keys=True)) == (), child["metadata"]["name"]
    jobs = [child for child in response["children"] if child["kind"] == "Job"]
    try:
        parse_pvc_uri(model.storage_uri, model.namespace)
    except StorageURIError:
        assert jobs == []
    for job in jobs:
        check_job(job, model)
    if not is_pvc_uri(model.storage_uri) or (finalizing and not model.deleting):
        assert response["children"] == [] and response["status"] == {"state": "In_Transit", **model.kept_status}
    elif not finalizing:
        assert jobs_of_current_uri(request, model, settings) <= {job["metadata"]["name"] for job in jobs}


def _outcome(response: dict[str, Any] | None, finalize: bool) -> str:
    """How the examples spread, shown by ``--hypothesis-show-statistics``."""
    hook = "finalize" if finalize else "sync"
    if response is None:
        return f"{hook}: 400"
    jobs = sum(child["kind"] == "Job" for child in response["children"])
    reason = response["status"]["conditions"][-1]["reason"] if "conditions" in response["status"] else "handed back"
    return f"{hook}: 200 {reason} with {min(jobs, 2)}{'+' if jobs > 2 else ''} Jobs"


@BOUNDED
@given(sync_requests())
def test_sync_answers_a_valid_200_or_a_400_and_never_drops_a_current_job(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    for finalize in (False, True):
        response = answer(request, settings, finalize)
        event(_outcome(response, finalize))
        if response is not None:
            check_answer(request, settings, finalize, response)
            assert answer(request, settings, finalize) == response


@hypothesis_settings(BOUNDED, max_examples=150)
@given(customize_requests())
def test_customize_answers_related_rules_or_a_400(drawn: tuple[dict[str, Any], Settings]) -> None:
    request, settings = drawn
    try:
        response = customize(request, settings)
    except BadRequest:
        return
    assert set(response) == {"relatedResources"}
    model = read_model(request["parent"])
    if not is_pvc_uri(model.storage_uri):
        assert response["relatedResources"] == [], "a model that is not the hook's must cost its caches nothing"
    for rule in response["relatedResources"]:
        assert rule["apiVersion"] == "v1" and rule["resource"] in ("persistentvolumeclaims", "pods")
        assert rule["namespace"] == parse_pvc_uri(model.storage_uri, model.namespace).namespace
        if "names" in rule:
            assert rule.get("namespace") and "labelSelector" not in rule


@hypothesis_settings(BOUNDED, max_examples=100)
@given(customize_requests())
def test_without_job_pods_customize_asks_for_the_pvc_alone(drawn: tuple[dict[str, Any], Settings]) -> None:
    """READ_JOB_PODS=false spares Metacontroller a cache of every pod in the cluster."""
    request, settings = drawn
    try:
        response = customize(request, replace(settings, sync=replace(settings.sync, read_job_pods=False)))
    except BadRequest:
        return
    assert all(rule["resource"] == "persistentvolumeclaims" for rule in response["relatedResources"])
