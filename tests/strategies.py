"""Hypothesis strategies: Metacontroller requests as a real cluster sends them, and damaged.

A request is drawn in two steps. First a consistent one: a parent, the children this hook
would have built for it (Jobs of several attempts in every state, their ServiceAccount and
RBAC, as the API server returns them), and the related objects its customize answer asked
for (the PVC and the Jobs' pods; nothing for a model on other storage). Then, often, a few places of it are damaged: a value swapped for one of another
type, a huge or unicode string or a deep nest, a key removed, or a label, namespace or
kind tampered with.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any, Callable

from hypothesis import HealthCheck, settings as hypothesis_settings, strategies as st

from hooks.pvc.metadata_job import ATTEMPT_LABEL, Attempt, build_access, build_job, build_record, job_name, model_labels
from hooks.pvc.observation import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    JOBS,
    PODS,
    PVCS,
    RECORDS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
)
from hooks.pvc.storage_uri import PVCLocation, StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.request import Model
from hooks.settings import JobSettings, RetrySettings, Settings
from tests import golden
from tests.metacontroller.cluster import Clock, Cluster
from tests.metacontroller.manage_children import MANAGER, controller_ref
from tests.schemas import record_errors

NOW = golden.FIXTURE_NOW
BOUNDED = hypothesis_settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
"""How every property runs: the same examples on every run, in a few seconds, whatever the machine's speed."""
SETTINGS = (Settings(), Settings(job=JobSettings(agent_image="registry.example.com/ome-agent:v0.1.6"), retry=RetrySettings(max_attempts=2)))

Draw = Callable[[st.SearchStrategy[Any]], Any]

# Values a damaged request carries: every JSON type, and the sizes and characters that break parsers.
HUGE = "x" * 300_000


class DeepList(list):  # type: ignore[type-arg]
    """A list nested 2000 deep, printed short so a failing example stays readable."""

    def __repr__(self) -> str:
        return "[[[…2000 nested lists…]]]"


DEEP = DeepList(["bottom"])
for _ in range(2_000):
    DEEP = DeepList([DEEP])

ODD_TEXT = st.one_of(
    st.sampled_from(["", " ", "\n", "\u0000", "pvc://", "MODELS", "models/", "ö", "模型", "🦙", HUGE, "界" * 20_000]),
    st.text(max_size=12),
)
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 2**31, 2**63, 2**200, 1.5, float("inf")]),
    ODD_TEXT,
    st.sampled_from([[], [None], {}, {"metadata": 1}, {"name": None}, DEEP]),
)

NAMES = st.one_of(
    st.sampled_from(["llama-3.1-8b-instruct", "mistral-7b", "a", "org.example." + "very-long-model-name-" * 11 + "v1"]),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?(\.[a-z0-9]{1,6})?", fullmatch=True),
)
NAMESPACES = st.sampled_from(["models", "team-a", "n" * 63])
NODE_NAMES = ("node-a", "node-b", "node-c", "gpu-node-7", "10.0.10.105", "node-new")
PVC_NAMES = st.sampled_from(["model-storage", "store.v2", "Bad_Name", ""])
SUB_PATHS = st.sampled_from(["models/llama", "models/llama/", "模型/llama", "/abs", "a/../b", "a//b", "", "x" * 3000])
TIMES = st.sampled_from(
    [
        "2026-11-30T11:59:00Z",
        "2026-11-30T11:30:00Z",
        "2026-11-30T12:30:00Z",
        "2025-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "9999-12-31T23:59:59Z",
        "2026-11-30T11:59:00",
        "yesterday",
    ]
)


def sometimes(draw: Draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws; False is what Hypothesis tries first and shrinks to,
    so the common case of a real cluster stays the common case here."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


@st.composite
def storage_uris(draw: Draw, namespace: str | None) -> str:
    """Mostly URIs this parent may use, then URIs it must refuse, then other schemes."""
    shape = draw(st.sampled_from(["own", "own", "explicit", "other-namespace", "odd", "other-scheme"]))
    if shape == "other-scheme":
        return draw(st.sampled_from(["hf://meta-llama/Llama-3.1-8B", "oci://registry/model:1", "s3://bucket/llama", "PVC://x/y", ""]))
    sub_path = draw(SUB_PATHS) if shape == "odd" else "models/llama"
    pvc = draw(PVC_NAMES) if shape == "odd" else "model-storage"
    own = namespace or "models"
    prefix = {"own": "" if namespace else f"{own}:", "explicit": f"{own}:", "other-namespace": "team-b:"}.get(shape, "")
    if shape == "odd":
        prefix = draw(st.sampled_from(["", f"{own}:", ":", "a:b:", "Bad_NS:"]))
    return f"pvc://{prefix}{pvc}/{sub_path}"


def _record(draw: Draw, model: Model) -> dict[str, Any]:
    """The record as an earlier answer wrote it, sometimes for another URI (``status.metadataExtraction``
    shows it; the ExtractionRecord holds it)."""
    attempts = draw(st.integers(1, 6))
    record: dict[str, Any] = {
        "storageUri": draw(st.sampled_from([model.storage_uri, model.storage_uri, "pvc://old-store/models/llama"])),
        "attempts": attempts,
        "jobName": job_name(model, model.storage_uri, attempts),
        "result": draw(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])),
        "message": draw(st.sampled_from(["Job models/x is running", "Job failed; its last pod ended: Error, exit code 1"])),
    }
    if record["result"] == "Failed":
        record["failedAt"] = draw(TIMES)
    return record


@st.composite
def parents(draw: Draw) -> tuple[dict[str, Any], Model]:
    """A BaseModel or ClusterBaseModel as the API server stores it, sometimes being
    deleted, and how the hook reads it."""
    cluster = draw(st.booleans())
    kind = "ClusterBaseModel" if cluster else "BaseModel"
    name = draw(NAMES)
    namespace = None if cluster else draw(NAMESPACES)
    uri = draw(storage_uris(namespace))
    spec: dict[str, Any] = {"storage": {"storageUri": uri}, "modelFormat": {"name": "safetensors"}}
    if sometimes(draw, 4):
        spec.update(modelType="llama", modelArchitecture="LlamaForCausalLM", modelParameterSize="8.03B")
    generation = draw(st.integers(1, 5))
    model = Model(kind, name, namespace, generation, spec, {}, uri)
    metadata: dict[str, Any] = {
        "name": name,
        "uid": "5f0c8a3e-2b1d-4c6e-9a7f-3d2e1b0c9a8f",
        "resourceVersion": "812345",
        "generation": generation,
        "creationTimestamp": "2026-11-30T11:58:00Z",
    }
    if namespace:
        metadata["namespace"] = namespace
    status: dict[str, Any] = {}
    if draw(st.booleans()):
        status = {"state": draw(st.sampled_from(["In_Transit", "Ready", "Failed"])), "observedGeneration": generation}
        status["metadataExtraction"] = _record(draw, model)
        status["conditions"] = [
            {"type": kind, "status": draw(st.sampled_from(["True", "False"])), "reason": "JobFailed",
             "message": "earlier", "lastTransitionTime": draw(TIMES), "observedGeneration": generation}
            for kind in ("StorageReady", "MetadataReady", "Ready")
        ]
        if not is_pvc_uri(uri):
            ready = draw(st.lists(st.sampled_from(NODE_NAMES), unique=True, max_size=3))
            failed = [node for node in draw(st.lists(st.sampled_from(NODE_NAMES), unique=True, max_size=2)) if node not in ready]
            status |= {key: sorted(nodes) for key, nodes in (("nodesReady", ready), ("nodesFailed", failed)) if nodes}
    if sometimes(draw, 5):
        status["lifecycle"] = "Deprecated"
    deleting = sometimes(draw, 4)
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T11:59:30Z"
    parent = {"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata, "spec": spec, "status": status}
    return parent, Model(kind, name, namespace, generation, spec, status, uri, deleting)


def _condition(kind: str, reason: str, when: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": when, "lastTransitionTime": when}


@st.composite
def job_statuses(draw: Draw) -> tuple[dict[str, Any], bool]:
    """A Job's status in each state the Job controller writes, and whether the spec suspends it."""
    when = draw(TIMES)
    state = draw(st.sampled_from(["running", "complete", "failed", "deadline", "failure-target", "suspended"]))
    status: dict[str, Any] = {"startTime": "2026-11-30T11:59:00Z", "uncountedTerminatedPods": {}}
    if state == "running":
        status.update(active=1, ready=draw(st.integers(0, 1)), terminating=0)
    elif state == "complete":
        status.update(succeeded=1, completionTime=when, conditions=[
            _condition("SuccessCriteriaMet", "CompletionsReached", when, "Reached expected number of succeeded pods"),
            _condition("Complete", "CompletionsReached", when, "Reached expected number of succeeded pods"),
        ])
    elif state == "suspended":
        status["conditions"] = [_condition("Suspended", "JobSuspended", when, "Job suspended")]
    else:
        reason = "BackoffLimitExceeded" if state == "failed" else "DeadlineExceeded"
        message = draw(st.sampled_from(["Job has reached the specified backoff limit", HUGE, "模型 " * 500]))
        conditions = [_condition("FailureTarget", reason, when, message)]
        if state != "failure-target":
            conditions.append(_condition("Failed", reason, when, message))
        status.update(failed=3, conditions=conditions)
    return status, state == "suspended"


LOG_LINES = st.sampled_from(
    [
        '{"level":"info","ts":1796039998.1,"caller":"ome-agent/main.go:62","msg":"Starting ome-agent","command":"model-metadata"}',
        '{"level":"error","ts":1796039998.3,"caller":"ome-agent/model_metadata_agent.go:74","msg":"model-metadata '
        'encountered an error during execution","error":"failed to parse model config at /mnt/models: bad JSON"}',
        "2026-11-30T11:59:58.337Z\tERROR\tmodel-metadata/module.go:61\tFailed to extract model metadata\t"
        '{"error": "no model config file found"}',
        'ata/module.go:61","msg":"Failed to extract model metadata","error":"cut"}',
        'ERROR: required flag(s) "basemodel-name" not set',
        "{" * 3000,
        "界" * 5000,
    ]
)


@st.composite
def pods_of(draw: Draw, job: dict[str, Any], model: Model) -> dict[str, Any]:
    """One of the Job's pods, as the customize hook fetches it: finished with the agent's log tail, or waiting."""
    name = job["metadata"]["name"]
    pod_name = f"{name}-{draw(st.sampled_from(['7p2vz', 'x7k2p', 'q9w4d']))}"
    container: dict[str, Any] = {"name": "model-metadata", "ready": False, "restartCount": 0,
                                 "image": "ghcr.io/moirai-internal/ome-agent:v0.1.5", "imageID": ""}
    if draw(st.booleans()):
        log = "\n".join(draw(st.lists(LOG_LINES, max_size=4)))
        container["state"] = {"terminated": {"exitCode": draw(st.sampled_from([1, 137, 0, "1"])),
                                             "reason": draw(st.sampled_from(["Error", "OOMKilled"])),
                                             "message": log, "finishedAt": draw(TIMES)}}
    else:
        container["state"] = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": job["metadata"]["namespace"],
            "uid": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "resourceVersion": "900100",
            "labels": {**model_labels(model), "batch.kubernetes.io/job-name": name, "job-name": name},
        },
        "status": {"phase": "Failed", "containerStatuses": [container]},
    }


@st.composite
def pvcs(draw: Draw, location: PVCLocation) -> dict[str, Any]:
    """The model's PVC in every phase, sometimes being deleted, sometimes in another namespace."""
    pvc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": location.pvc_name,
            "namespace": draw(st.sampled_from([location.namespace, location.namespace, "team-b"])),
            "uid": "7d1e5c2a-9b3f-4e8d-a6c1-2f0b9e8d7c6a",
            "resourceVersion": "700001",
        },
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "oci-fss-models",
                 "volumeName": "pvc-4f1c2b3a", "resources": {"requests": {"storage": "500Gi"}}},
        "status": {"accessModes": ["ReadOnlyMany"], "capacity": {"storage": "500Gi"}},
    }
    phase = draw(st.sampled_from(["Bound", "Bound", "Pending", "Lost", None, "Terminating-ish"]))
    if phase is not None:
        pvc["status"]["phase"] = phase
    if sometimes(draw, 6):
        pvc["metadata"]["deletionTimestamp"] = draw(TIMES)
    return pvc


def _key(obj: dict[str, Any], by_name: bool) -> str:
    """Hook version v1 under a namespaced parent keys objects by name; otherwise namespaced
    objects are keyed ``namespace/name`` and cluster-scoped ones by name."""
    namespace = obj["metadata"].get("namespace")
    return f"{namespace}/{obj['metadata']['name']}" if namespace and not by_name else obj["metadata"]["name"]


def created(api: Cluster, child: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
    """A desired child as the API server returns it once Metacontroller created it for the
    parent: owned by it and carrying the parent's selector label."""
    metadata = {**child["metadata"], "ownerReferences": [controller_ref(parent)],
                "labels": {**child["metadata"].get("labels", {}), "controller-uid": parent["metadata"]["uid"]}}
    return api.create({**child, "metadata": metadata}, manager=MANAGER)


def _location(model: Model) -> PVCLocation | None:
    try:
        return parse_pvc_uri(model.storage_uri, model.namespace)
    except StorageURIError:
        return None


@st.composite
def consistent_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A sync request a real Metacontroller could send, and the settings the hook runs with."""
    settings = draw(st.sampled_from(SETTINGS))
    parent, model = draw(parents())
    cluster = model.cluster_scoped
    by_name = not cluster and draw(st.booleans())
    access_types = (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS) if cluster else (ROLES, ROLE_BINDINGS)
    children: dict[str, dict[str, Any]] = {JOBS: {}, SERVICE_ACCOUNTS: {}, RECORDS: {}, access_types[0]: {}, access_types[1]: {}}
    related: dict[str, dict[str, Any]] = {}
    location = _location(model)
    api = Cluster(Clock(NOW - timedelta(minutes=1)))
    if location is not None:
        uris = [model.storage_uri, "pvc://" + (f"{location.namespace}:" if cluster else "") + "old-store/models/llama"]
        jobs = []
        attempts = [] if sometimes(draw, 5) else draw(st.lists(st.integers(1, settings.retry.max_attempts), unique=True, min_size=1, max_size=3))
        for attempt in attempts:
            uri = draw(st.sampled_from(uris))
            built = build_job(model, Attempt(location, uri, attempt), draw(st.sampled_from(SETTINGS)).job, job_name(model, uri, attempt))
            job = created(api, built, parent)
            job["status"], suspended = draw(job_statuses())
            if suspended:
                job["spec"]["suspend"] = True
            jobs.append(job)
        for job in jobs:
            children[JOBS][_key(job, by_name)] = job
        for item in build_access(model, location.namespace):
            if not sometimes(draw, 5):
                type_key = {"ServiceAccount": SERVICE_ACCOUNTS, "Role": ROLES, "RoleBinding": ROLE_BINDINGS,
                            "ClusterRole": CLUSTER_ROLES, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS}[item["kind"]]
                children[type_key][_key(item, by_name)] = created(api, item, parent)
        shown = model.status.get("metadataExtraction")
        if shown and not sometimes(draw, 6):
            spec = {key: value for key, value in shown.items() if key != "startedAt"}
            if record_errors(build_record(model, location.namespace, spec)):
                spec.pop("failedAt", None)  # the API server refuses a record whose time is not one
            record = created(api, build_record(model, location.namespace, spec), parent)
            children[RECORDS][_key(record, by_name)] = record
        if shown and sometimes(draw, 6):
            del parent["status"]["metadataExtraction"]
        claims = [] if sometimes(draw, 6) else [draw(pvcs(location))]
        related[PVCS] = {_key(pvc, by_name): pvc for pvc in claims}
        pods = [draw(pods_of(job, model)) for job in jobs if draw(st.booleans())]
        related[PODS] = {_key(pod, by_name): pod for pod in pods}
    request = {
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
                       "metadata": {"name": "clusterbasemodels" if cluster else "basemodels"}},
        "parent": parent,
        "children": children,
        "related": related,
        "finalizing": sometimes(draw, 7),
    }
    return request, settings


def places(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document, parents before children, except inside the shared
    deep value used for damage (damaging it in place would change what later examples draw)."""
    found = [prefix] if prefix else []
    if node is DEEP:
        return found
    if isinstance(node, dict):
        for key, value in node.items():
            found += places(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += places(value, (*prefix, index))
    return found


def _objects(request: Any, section: str, type_key: str | None = None) -> list[dict[str, Any]]:
    """The objects of a (possibly already damaged) request section that still have metadata."""
    groups = request.get(section) if isinstance(request, dict) else None
    if not isinstance(groups, dict):
        return []
    chosen = [groups.get(type_key)] if type_key else list(groups.values())
    return [
        obj
        for group in chosen
        if isinstance(group, dict)
        for obj in group.values()
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict)
    ]


def _parent(request: Any) -> list[dict[str, Any]]:
    """The parent of a (possibly already damaged) request, while it still has metadata."""
    parent = request.get("parent") if isinstance(request, dict) else None
    return [parent] if isinstance(parent, dict) and isinstance(parent.get("metadata"), dict) else []


def _statuses(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-empty status maps of the parent, the children and the related objects, and
    the maps inside their lists (conditions, container statuses), where the facts are read."""
    found = []
    for obj in [*_parent(request), *_objects(request, "children"), *_objects(request, "related")]:
        status = obj.get("status") if isinstance(obj, dict) else None
        if isinstance(status, dict) and status:
            found.append(status)
            found += [item for value in status.values() if isinstance(value, list) for item in value
                      if isinstance(item, dict) and item]
    return found


def _odd(draw: Draw) -> Any:
    """A fresh odd value: shared ones could be damaged again in place by a later round."""
    value = draw(ODD_VALUES)
    return value if value is DEEP or value is HUGE else copy.deepcopy(value)


TAMPERS = ("anywhere", "anywhere", "attempt label", "labels", "namespace", "kind", "uri", "status")


@st.composite
def damaged(draw: Draw, request: dict[str, Any]) -> dict[str, Any]:
    """The request with one to three places damaged, some chosen at random, some where it hurts."""
    mutant = copy.deepcopy(request)
    for _ in range(draw(st.integers(1, 3))):
        tamper = draw(st.sampled_from(TAMPERS))
        jobs = _objects(mutant, "children", JOBS)
        objects = [*_parent(mutant), *_objects(mutant, "children"), *_objects(mutant, "related")]
        metadata = [obj["metadata"] for obj in objects]
        labels = [job["metadata"]["labels"] for job in jobs if isinstance(job["metadata"].get("labels"), dict)]
        statuses = _statuses(mutant)
        if tamper == "attempt label" and labels:
            chosen = draw(st.sampled_from(labels))
            value = draw(st.one_of(st.none(), st.sampled_from(["1", "2", "7", "0", "²", "9" * 5000]), ODD_TEXT))
            if value is None:
                chosen.pop(ATTEMPT_LABEL, None)
            else:
                chosen[ATTEMPT_LABEL] = value
        elif tamper == "labels" and metadata:
            draw(st.sampled_from(metadata))["labels"] = _odd(draw)
        elif tamper == "namespace" and metadata:
            draw(st.sampled_from(metadata))["namespace"] = draw(st.sampled_from(["team-b", "models", "ome", None])) if draw(st.booleans()) else _odd(draw)
        elif tamper == "kind" and objects:
            draw(st.sampled_from(jobs or objects))[draw(st.sampled_from(["kind", "apiVersion"]))] = draw(
                st.sampled_from(["CronJob", "batch/v2", "ConfigMap", "v1", None]))
        elif tamper == "status" and statuses:
            status = draw(st.sampled_from(statuses))
            status[draw(st.sampled_from(sorted(status)))] = _odd(draw)
        elif tamper == "uri" and isinstance(mutant.get("parent"), dict) and isinstance(mutant["parent"].get("spec"), dict):
            mutant["parent"]["spec"]["storage"] = {"storageUri": draw(storage_uris(draw(st.sampled_from([None, "models"]))))}
        else:
            *path, last = draw(st.sampled_from(places(mutant)))
            holder = mutant
            for step in path:
                holder = holder[step]
            if isinstance(holder, dict) and draw(st.integers(0, 2)) == 0:
                del holder[last]
            else:
                holder[last] = _odd(draw)
    return mutant


@st.composite
def sync_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A consistent request, or (half the time) the same request damaged."""
    request, settings = draw(consistent_requests())
    if draw(st.booleans()):
        request = draw(damaged(request))
    return request, settings


@st.composite
def customize_requests(draw: Draw) -> tuple[dict[str, Any], Settings]:
    """A customize request: the controller and the parent, sometimes damaged."""
    request, settings = draw(sync_requests())
    return {key: request[key] for key in ("controller", "parent") if key in request}, settings

