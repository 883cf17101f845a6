"""Properties of the pure core over generated requests, valid and damaged (CONTRACT §2, §6, §7).

Every answer is a 400 (``BadRequest``) or a 200 that Metacontroller and the API server
accept; a 200 never mounts the PVC writable, never leaves the namespace or sub-path the
URI allows, and never drops an observed Job of the model for its current URI, since
Metacontroller deletes every child a 200 leaves out. Seeded and bounded: the same few
hundred requests on every run, in a few seconds.
"""

from __future__ import annotations

import copy
import json
import math
from functools import lru_cache
from typing import Any

from hypothesis import event, given, settings as hypothesis_settings

from hooks.customize import customize
from hooks.nodes.index_objects import (
    API_VERSION as INDEX_API_VERSION,
    GROUP_NAMES,
    MODEL_LABEL,
    NODE_INDEX_SUMMARIES,
    NODE_INDEX_SUMMARY,
    NODE_MODEL_STATUS,
    NODE_MODEL_STATUSES,
    RESOURCES,
    SUMMARY_NAME,
    model_label,
    node_model_status,
)
from hooks.nodes.ome_keys import ENTRY_FAILED, ENTRY_READY, configmap_key
from hooks.observed import JOBS, BadRequest, Model, read_model
from hooks.pvc.metadata_job import job_name
from hooks.pvc.storage_uri import StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.settings import Settings
from hooks.sync import sync
from tests.schemas import KUBERNETES_VERSIONS, kubernetes_errors, status_errors
from tests.strategies import BOUNDED, NOW, consistent_requests, customize_requests, sync_requests

ANSWER_KEYS = {"status", "children", "resyncAfterSeconds"}
CHILD_TYPES = {
    "BaseModel": {("batch/v1", "Job"), ("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"),
                  ("rbac.authorization.k8s.io/v1", "RoleBinding")},
    "ClusterBaseModel": {("batch/v1", "Job"), ("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                         ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")},
}


@lru_cache(maxsize=4096)
def _kubernetes_errors(child: str) -> tuple[str, ...]:
    """Children repeat across examples; validate each distinct one once."""
    return tuple(kubernetes_errors(json.loads(child), KUBERNETES_VERSIONS[-1]))


def answer(request: Any, settings: Settings, finalize: bool) -> dict[str, Any] | None:
    """The core's answer, or None for a BadRequest; any other exception fails the test."""
    try:
        return sync(request, settings, NOW, finalize=finalize).response
    except BadRequest as refusal:
        assert str(refusal)
        return None


def jobs_of_current_uri(request: dict[str, Any], model: Model, settings: Settings) -> set[str]:
    """Names of the observed Jobs this hook built for the model's current URI (any attempt it allows)."""
    derived = {job_name(model, model.storage_uri, attempt) for attempt in range(1, settings.max_attempts + 1)}
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
        limit = max(settings.retry_max_delay_seconds, settings.node_resync_seconds, settings.finalize_resync_seconds)
        assert 0 < response["resyncAfterSeconds"] <= limit and math.isfinite(response["resyncAfterSeconds"])
    status = dict(response["status"])
    if model.generation is not None:
        status["observedGeneration"] = model.generation
    assert status_errors(model.kind, status) == []
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
    if not finalizing and is_pvc_uri(model.storage_uri):
        assert jobs_of_current_uri(request, model, settings) <= {job["metadata"]["name"] for job in jobs}


def _outcome(response: dict[str, Any] | None, finalize: bool) -> str:
    """How the examples spread, shown by ``--hypothesis-show-statistics``."""
    hook = "finalize" if finalize else "sync"
    if response is None:
        return f"{hook}: 400"
    jobs = sum(child["kind"] == "Job" for child in response["children"])
    return f"{hook}: 200 {response['status']['conditions'][-1]['reason']} with {min(jobs, 2)}{'+' if jobs > 2 else ''} Jobs"


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
    for rule in response["relatedResources"]:
        if is_pvc_uri(model.storage_uri):
            assert rule["apiVersion"] == "v1" and rule["resource"] in ("persistentvolumeclaims", "pods")
            assert rule["namespace"] == parse_pvc_uri(model.storage_uri, model.namespace).namespace
        elif rule["resource"] == RESOURCES[NODE_MODEL_STATUS]:
            assert rule["apiVersion"] == INDEX_API_VERSION and rule["namespace"] == settings.ome_namespace
            assert rule["labelSelector"] == {"matchLabels": {MODEL_LABEL: model_label(configmap_key(model.namespace, model.name))}}, \
                "a model asking for more than its own statuses is woken by every other model's entries"
        else:
            assert rule == {"apiVersion": INDEX_API_VERSION, "resource": RESOURCES[NODE_INDEX_SUMMARY],
                            "namespace": settings.ome_namespace, "names": [SUMMARY_NAME]}
        if "names" in rule:
            assert rule.get("namespace") and "labelSelector" not in rule


def _listed(status: dict[str, Any], name: str) -> set[str]:
    return set(status.get(name, []))


def index_says(request: dict[str, Any], model: Model, ome_namespace: str) -> tuple[set[str], set[str]]:
    """The nodes ready and failed by OME's rules over the index: the model's own statuses
    in OME's namespace, minus the nodes the summary lists as gone or departed; a node it
    does not list as indexed, and without a status, keeps what the model's status said of it."""
    label = model_label(configmap_key(model.namespace, model.name))
    own = {node: status
           for obj in request["related"][NODE_MODEL_STATUSES].values()
           if obj["metadata"]["namespace"] == ome_namespace and obj["metadata"]["labels"][MODEL_LABEL] == label
           for node, status in [*obj["spec"]["nodes"].items(), *((node, None) for node in obj["spec"].get("unreadable", []))]}
    summaries = [obj["spec"] for obj in request["related"][NODE_INDEX_SUMMARIES].values()
                 if obj["metadata"]["namespace"] == ome_namespace and obj["metadata"]["name"] == SUMMARY_NAME]
    indexed = {node for spec in summaries for node in spec.get("indexed", [])}
    ignored = {node for spec in summaries for key in ("gone", "departed") for node in spec.get(key, [])}
    before_ready, before_failed = _listed(model.status, "nodesReady"), _listed(model.status, "nodesFailed")
    kept = (before_ready | before_failed) - own.keys() - indexed
    ready = {node for node, status in own.items() if status == ENTRY_READY} | (kept & before_ready)
    failed = {node for node, status in own.items() if status == ENTRY_FAILED} | (kept & before_failed - before_ready)
    return ready - ignored, failed - ignored


@hypothesis_settings(BOUNDED, max_examples=150)
@given(consistent_requests(node_flow=True))
def test_node_flow_status_follows_the_model_s_own_index_statuses(drawn: tuple[dict[str, Any], Settings]) -> None:
    """nodesReady and nodesFailed are OME's rule over the model's own statuses and the
    summary's lists; another model's statuses, and objects outside OME's namespace, change
    nothing (a selector mix-up or a copy elsewhere must not make a node ready)."""
    request, settings = drawn
    model = read_model(request["parent"])
    response = answer(request, settings, finalize=False)
    assert response is not None
    ready, failed = index_says(request, model, settings.ome_namespace)
    assert (set(response["status"].get("nodesReady", [])), set(response["status"].get("nodesFailed", []))) == (ready, failed)
    assert response["status"]["state"] == ("Ready" if ready else "Failed" if failed else "In_Transit")
    event(response["status"]["state"])
    label = model_label(configmap_key(model.namespace, model.name))
    elsewhere = node_model_status("kube-system", GROUP_NAMES[0], label, {"intruder-node": ENTRY_READY})
    foreign = node_model_status(settings.ome_namespace, GROUP_NAMES[0], "models.basemodel.another-model", {"foreign-node": ENTRY_READY})
    padded = copy.deepcopy(request)
    padded["related"][NODE_MODEL_STATUSES] |= {f"kube-system/{elsewhere['metadata']['name']}": elsewhere,
                                               f"{settings.ome_namespace}/x{foreign['metadata']['name']}": foreign}
    assert answer(padded, settings, finalize=False) == response
