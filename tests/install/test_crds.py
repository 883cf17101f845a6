"""Our BaseModel and ClusterBaseModel CRDs beside upstream OME's: the same identity, spec
schema and printer columns, and a status schema of our own that holds what the hook writes
(closed, so a field the API server would prune fails) and still what OME writes. The
samples validate against both.

The checks against upstream's CRDs need the shared/ reference pack and skip without it.
"""

from __future__ import annotations

import re
from typing import Iterator

import pytest

from tests import docs
from tests.manifests import SAMPLES, Obj, crd_schema, load_yaml
from tests.metacontroller.cluster import ome_status_schema
from tests.schemas import errors_of

MODEL_KINDS = ("BaseModel", "ClusterBaseModel")

# The condition reason pattern of upstream OME's newest CRD (CONTRACT §5).
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def walk_schema(node: Obj, path: str = "$") -> Iterator[tuple[str, Obj]]:
    """Yield (path, node) for every schema node reachable by schema keywords."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk_schema(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{path}{{*}}")


def realistic_status() -> Obj:
    """A PVC model's status as the hook writes it, every field filled."""
    return {
        "state": "Failed",
        "lifecycle": "Public",
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "StorageReady",
                "status": "True",
                "reason": "PVCBound",
                "message": "PVC models/model-storage is Bound",
                "lastTransitionTime": "2025-07-11T10:00:00Z",
                "observedGeneration": 3,
            },
            {
                "type": "MetadataReady",
                "status": "False",
                "reason": "JobDeadlineExceeded",
                "message": (
                    "Job llama-3-1-8b-meta-2-3f9a1c attempt 2 failed: Job was active longer "
                    "than specified deadline; next attempt at 2025-07-11T10:07:00Z"
                ),
                "lastTransitionTime": "2025-07-11T10:05:00.123456+00:00",
                "observedGeneration": 3,
            },
            {
                "type": "Ready",
                "status": "False",
                "reason": "JobDeadlineExceeded",
                "message": "metadata extraction failed (attempt 2 of 10)",
                "lastTransitionTime": "2025-07-11T10:05:00Z",
                "observedGeneration": 3,
            },
        ],
        "storage": {
            "type": "PVC",
            "namespace": "models",
            "pvcName": "model-storage",
            "subPath": "models/llama-3.1-8b-instruct",
            "phase": "Bound",
            "accessModes": ["ReadOnlyMany", "ReadWriteMany"],
            "capacity": "100Gi",
            "storageClassName": "nfs-client",
            "volumeName": "pvc-0b7c4e2a-8a51-4d1e-9d0c-1f1f6c9a0e42",
        },
        "metadataExtraction": {
            "storageUri": "pvc://model-storage/models/llama-3.1-8b-instruct",
            "attempts": 2,
            "jobName": "llama-3-1-8b-meta-2-3f9a1c",
            "result": "Failed",
            "failedAt": "2025-07-11T10:05:00Z",
            "message": "ome-agent: no model config file found",
        },
    }



# --------------------------------------------------------------------------
# CRDs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_crd_keeps_upstream_identity_and_spec_schema(our_crds, upstream_crds, kind):
    ours, upstream = our_crds[kind], upstream_crds[kind]
    assert ours["metadata"]["name"] == upstream["metadata"]["name"]
    for key in ("group", "names", "scope"):
        assert ours["spec"][key] == upstream["spec"][key], key
    (ov,), (uv,) = ours["spec"]["versions"], upstream["spec"]["versions"]
    for key in ("name", "served", "storage", "subresources"):
        assert ov[key] == uv[key], key
    o_schema, u_schema = crd_schema(ours), crd_schema(upstream)
    assert o_schema["properties"]["spec"] == u_schema["properties"]["spec"]
    assert {k: v for k, v in o_schema["properties"].items() if k != "status"} == {
        k: v for k, v in u_schema["properties"].items() if k != "status"
    }
    assert o_schema.get("type") == u_schema.get("type") == "object"


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_crd_status_schema_is_structural_and_never_preserves_unknown_fields(our_crds, kind):
    status = crd_schema(our_crds[kind])["properties"]["status"]
    for path, node in walk_schema(status, "status"):
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
        assert "type" in node, f"{path} has no type (not structural)"
        assert not ("properties" in node and "additionalProperties" in node), path


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_crd_status_schema_has_the_fields_the_hook_writes(our_crds, kind):
    status = crd_schema(our_crds[kind])["properties"]["status"]
    props = status["properties"]
    assert status["required"] == ["state"]
    assert set(props) == {
        "state",
        "lifecycle",
        "nodesReady",
        "nodesFailed",
        "observedGeneration",
        "conditions",
        "storage",
        "metadataExtraction",
    }
    assert props["state"]["enum"] == [
        "Creating",
        "Importing",
        "In_Transit",
        "In_Training",
        "Ready",
        "Failed",
    ]
    for key in ("nodesReady", "nodesFailed"):
        assert props[key]["x-kubernetes-list-type"] == "atomic"
    assert props["observedGeneration"] == {
        **props["observedGeneration"],
        "type": "integer",
        "format": "int64",
        "minimum": 0,
    }
    conditions = props["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["maxItems"] == 8
    item = conditions["items"]
    assert set(item["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert item["properties"]["reason"]["pattern"] == REASON_PATTERN
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["message"]["minLength"] == 1
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert set(props["storage"]["properties"]) == {
        "type",
        "namespace",
        "pvcName",
        "subPath",
        "phase",
        "accessModes",
        "capacity",
        "storageClassName",
        "volumeName",
    }
    assert set(props["metadataExtraction"]["properties"]) == {
        "storageUri",
        "attempts",
        "jobName",
        "result",
        "failedAt",
        "failureReason",
        "message",
        "podWaiting",
        "podEnded",
    }
    assert props["metadataExtraction"]["properties"]["result"]["enum"] == [
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
    ]


STATE_PATH = ".status.state"
READY_REASON_PATH = '.status.conditions[?(@.type=="Ready")].reason'


def printer_columns(crd: Obj) -> list[Obj]:
    (version,) = crd["spec"]["versions"]
    return version["additionalPrinterColumns"]


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_crd_printer_columns_keep_upstreams_and_show_each_fact_once(our_crds, upstream_crds, kind):
    columns = printer_columns(our_crds[kind])
    by_name = {c["name"]: c for c in columns}
    assert len(by_name) == len(columns), "duplicate column names"
    paths = [c["jsonPath"] for c in columns]
    assert len(set(paths)) == len(paths), f"a fact shown twice: {paths}"
    for upstream_column in printer_columns(upstream_crds[kind]):
        if upstream_column["jsonPath"] == STATE_PATH:
            # Upstream calls the state column "Ready"; it is ours "State".
            assert upstream_column["name"] == "Ready" and "Ready" not in by_name
            continue
        assert by_name.get(upstream_column["name"]) == upstream_column


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_crd_printer_columns_put_the_ready_reason_beside_the_state_and_age_last(our_crds, kind):
    columns = printer_columns(our_crds[kind])
    names = [c["name"] for c in columns]
    state = names.index("State")
    assert columns[state] == {"jsonPath": STATE_PATH, "name": "State", "type": "string"}
    assert columns[state + 1] == {"jsonPath": READY_REASON_PATH, "name": "Reason", "type": "string"}
    storage = columns[names.index("Storage")]
    assert storage["jsonPath"] == ".spec.storage.storageUri" and storage["priority"] == 1
    assert columns[-1] == {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}


def test_docs_list_the_columns_kubectl_get_prints(our_crds):
    found = re.search(r"`kubectl get basemodels` prints one column per fact: (.*?) \(", docs.text(), re.S)
    assert found, "the docs no longer list the columns of `kubectl get basemodels`"
    listed = re.findall(r"`([A-Z]+)`", found.group(1))
    default_columns = [c["name"].upper() for c in printer_columns(our_crds["BaseModel"]) if not c.get("priority")]
    assert listed == ["NAME", *default_columns]


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_status_schema_accepts_a_full_realistic_status(our_crds, kind):
    status_schema = crd_schema(our_crds[kind])["properties"]["status"]
    assert errors_of(status_schema, realistic_status()) == []
    ready = realistic_status()
    ready.update(state="Ready")
    ready["metadataExtraction"].update(result="Succeeded")
    assert errors_of(status_schema, ready) == []


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_status_schema_accepts_an_upstream_node_flow_status(our_crds, upstream_crds, kind):
    status = {"state": "Ready", "lifecycle": "Public", "nodesReady": ["node-a", "node-b"], "nodesFailed": []}
    for crds in (our_crds, upstream_crds):
        assert errors_of(crd_schema(crds[kind])["properties"]["status"], status) == []


@pytest.mark.parametrize(
    "where",
    [(), ("conditions", 0), ("storage",), ("metadataExtraction",)],
    ids=["status", "condition", "storage", "metadataExtraction"],
)
@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_status_schema_rejects_unknown_fields_the_api_server_would_prune(our_crds, kind, where):
    status_schema = crd_schema(our_crds[kind])["properties"]["status"]
    status = realistic_status()
    node = status
    for step in where:
        node = node[step]
    node["debugInfo"] = "x"
    assert any("debugInfo" in e for e in errors_of(status_schema, status))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.pop("state"),
        lambda s: s.update(state="MetadataPending"),
        lambda s: s["conditions"][0].update(reason="PVC Bound"),
        lambda s: s["conditions"][0].update(reason="Bound."),
        lambda s: s["conditions"][0].update(message=""),
        lambda s: s["conditions"][0].update(status="true"),
        lambda s: s["conditions"][0].pop("lastTransitionTime"),
        lambda s: s["conditions"][0].update(lastTransitionTime="yesterday"),
        lambda s: s["metadataExtraction"].update(attempts=-1),
        lambda s: s["metadataExtraction"].update(result="Unknown"),
        lambda s: s["storage"].update(type="S3"),
        lambda s: s.update(observedGeneration="3"),
        lambda s: s.update(
            conditions=[dict(s["conditions"][0], type=f"Extra{i}") for i in range(9)]
        ),
        lambda s: s["conditions"].append(dict(s["conditions"][0])),
    ],
    ids=[
        "no-state",
        "state-not-in-enum",
        "reason-with-space",
        "reason-ending-in-dot",
        "empty-message",
        "lowercase-status",
        "no-lastTransitionTime",
        "bad-date-time",
        "negative-attempts",
        "unknown-result",
        "storage-type-not-pvc",
        "string-generation",
        "more-than-8-conditions",
        "duplicate-condition-type",
    ],
)
def test_status_schema_rejects_invalid_values(our_crds, mutate):
    status_schema = crd_schema(our_crds["BaseModel"])["properties"]["status"]
    status = realistic_status()
    mutate(status)
    assert errors_of(status_schema, status) != []


def test_upstream_status_schema_would_prune_the_hooks_status(upstream_crds):
    # Why the CRD is replaced: upstream's status keeps only state/lifecycle/nodes*.
    upstream_status = crd_schema(upstream_crds["BaseModel"])["properties"]["status"]
    errors = errors_of(upstream_status, realistic_status())
    for field in ("conditions", "storage", "metadataExtraction", "observedGeneration"):
        assert any(field in e for e in errors), field


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_the_simulators_ome_status_schema_is_the_one_of_omes_own_crd(upstream_crds, kind):
    """The lifecycle scenarios prune a model's status as a cluster with OME's CRD does: the
    status schema the simulator gives OME (tests/metacontroller/cluster.py, used by
    tests/lifecycle.py) is the one upstream's CRD declares."""
    assert ome_status_schema(kind) == crd_schema(upstream_crds[kind])["properties"]["status"]


# --------------------------------------------------------------------------
# samples
# --------------------------------------------------------------------------

SAMPLE_FILES = {
    "BaseModel": SAMPLES / "basemodel-pvc.yaml",
    "ClusterBaseModel": SAMPLES / "clusterbasemodel-pvc.yaml",
}


@pytest.mark.parametrize("kind", sorted(SAMPLE_FILES))
def test_sample_model_validates_against_upstream_and_our_crd(our_crds, upstream_crds, kind):
    sample = load_yaml(SAMPLE_FILES[kind])
    assert sample["apiVersion"] == "ome.io/v1beta1"
    assert sample["kind"] == kind
    assert errors_of(crd_schema(upstream_crds[kind]), sample) == []
    assert errors_of(crd_schema(our_crds[kind]), sample) == []


def test_sample_models_use_the_pvc_uri_form_their_scope_requires():
    namespaced = load_yaml(SAMPLE_FILES["BaseModel"])
    cluster = load_yaml(SAMPLE_FILES["ClusterBaseModel"])
    # BaseModel: no namespace in the URI, and none in metadata (apply with -n).
    assert re.fullmatch(r"pvc://[a-z0-9.-]+/[^/].*", namespaced["spec"]["storage"]["storageUri"])
    assert "namespace" not in namespaced["metadata"]
    # ClusterBaseModel: the namespace is mandatory.
    assert re.fullmatch(r"pvc://[a-z0-9-]+:[a-z0-9.-]+/[^/].*", cluster["spec"]["storage"]["storageUri"])
    for sample in (namespaced, cluster):
        # Metadata left out, so the hook has to run its metadata Job.
        assert not {"modelType", "modelArchitecture", "modelParameterSize"} & set(sample["spec"])
