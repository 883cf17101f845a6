"""Tests for the install manifests in metacontroller/ and the Dockerfile.

Everything here is offline: `kubectl kustomize` renders metacontroller/ once per
module, built-in objects are checked with kubernetes-validate (strict schemas),
custom resources with jsonschema against the CRDs, closed so that an unknown
(typo'd, or about-to-be-pruned) field fails.

shared/ (the reference pack with upstream's CRDs) sits beside the repository:
`Path(__file__).resolve().parents[2] / "shared"`. A clone without it skips the checks
against upstream's CRDs and runs the rest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL
from tests import dockerfile
from tests.kustomize import documented_kustomization, render, write_overlay
from tests.schemas import GO_DURATION, KUBERNETES_VERSIONS, errors_of, served

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "metacontroller"
SAMPLES = MANIFESTS / "samples"
SHARED = Path(__file__).resolve().parents[2] / "shared"
UPSTREAM_CRDS = SHARED / "reference" / "crds"

HOOK_NS = "ome-basemodel-hook"
HOOK_NAME = "ome-basemodel-hook"
HOOK_IMAGE = "ghcr.io/ome-basemodel-hook/ome-basemodel-hook:0.1.0"
COMMON_LABELS = {"app.kubernetes.io/name": HOOK_NAME, "app.kubernetes.io/part-of": "ome"}

# Kubernetes versions every built-in object must validate against: the oldest
# we support and the newest kubernetes-validate knows.
K8S_VERSIONS = KUBERNETES_VERSIONS

CHILDREN = {
    "ome-basemodels": (
        "basemodels",
        [
            ("batch/v1", "jobs"),
            ("v1", "serviceaccounts"),
            ("v1", "configmaps"),
            ("rbac.authorization.k8s.io/v1", "roles"),
            ("rbac.authorization.k8s.io/v1", "rolebindings"),
        ],
    ),
    "ome-clusterbasemodels": (
        "clusterbasemodels",
        [
            ("batch/v1", "jobs"),
            ("v1", "serviceaccounts"),
            ("v1", "configmaps"),
            ("rbac.authorization.k8s.io/v1", "clusterroles"),
            ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
        ],
    ),
}
HOOK_PATHS = {"sync": "/sync", "customize": "/customize", "finalize": "/finalize"}

# The condition reason pattern of upstream OME's newest CRD (CONTRACT §5).
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def crd_schema(crd):
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def walk_schema(node, path="$"):
    """Yield (path, node) for every schema node reachable by schema keywords."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk_schema(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{path}{{*}}")


def matches(selector, labels):
    """matchLabels-only LabelSelector matching (the manifests use no expressions)."""
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def allows(rules, group, resource, verb, resource_name=None):
    for rule in rules:
        if rule.get("nonResourceURLs"):
            continue
        if not ({"*", group} & set(rule.get("apiGroups", []))):
            continue
        if not ({"*", resource} & set(rule.get("resources", []))):
            continue
        if not ({"*", verb} & set(rule.get("verbs", []))):
            continue
        names = rule.get("resourceNames")
        if names and resource_name not in names:
            continue
        return True
    return False


def group_of(api_version):
    return api_version.split("/")[0] if "/" in api_version else ""


def one(objects, kind, name=None):
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected exactly one {kind} {name or ''}, found {len(found)}"
    return found[0]


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered():
    return render(MANIFESTS)


def upstream_crd(filename):
    """One of upstream's CRDs from the reference pack, which a user's clone does not have."""
    if not UPSTREAM_CRDS.is_dir():
        pytest.skip(f"needs upstream's CRDs in {UPSTREAM_CRDS} (the shared/ reference pack beside the repository)")
    return load_yaml(UPSTREAM_CRDS / filename)


@pytest.fixture(scope="module")
def upstream_crds():
    return {
        "BaseModel": upstream_crd("ome.io_basemodels.yaml"),
        "ClusterBaseModel": upstream_crd("ome.io_clusterbasemodels.yaml"),
    }


@pytest.fixture(scope="module")
def rendered_crds():
    return render(MANIFESTS / "crds")


@pytest.fixture(scope="module")
def our_crds(rendered_crds):
    return {c["spec"]["names"]["kind"]: c for c in rendered_crds}


@pytest.fixture(scope="module")
def compositecontroller_schema():
    crd = upstream_crd("metacontroller.k8s.io_compositecontrollers.yaml")
    assert crd["metadata"]["name"] == "compositecontrollers.metacontroller.k8s.io"
    return crd_schema(crd)


@pytest.fixture(scope="module")
def controllers(rendered):
    return {
        o["metadata"]["name"]: o for o in rendered if o["kind"] == "CompositeController"
    }


@pytest.fixture(scope="module")
def deployment(rendered):
    return one(rendered, "Deployment", HOOK_NAME)


@pytest.fixture(scope="module")
def pod_spec(deployment):
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def container(pod_spec):
    (c,) = pod_spec["containers"]
    return c


@pytest.fixture(scope="module")
def metacontroller_role(rendered):
    return one(rendered, "ClusterRole", "ome-basemodel-hook-metacontroller")


def realistic_status():
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
# rendering and schema validity of built-in objects
# --------------------------------------------------------------------------


def test_kustomize_renders_exactly_the_expected_objects(rendered):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered)
    assert kinds == sorted(
        [
            ("Namespace", HOOK_NS),
            ("ServiceAccount", HOOK_NAME),
            ("Deployment", HOOK_NAME),
            ("Service", HOOK_NAME),
            ("PodDisruptionBudget", HOOK_NAME),
            ("NetworkPolicy", HOOK_NAME),
            ("ClusterRole", "ome-basemodel-hook-metacontroller"),
            ("ClusterRoleBinding", "ome-basemodel-hook-metacontroller"),
            ("CompositeController", "ome-basemodels"),
            ("CompositeController", "ome-clusterbasemodels"),
            ("DecoratorController", "ome-basemodel-storage-label"),
            ("ValidatingAdmissionPolicy", "ome-basemodel-hook-status-fence"),
            ("ValidatingAdmissionPolicyBinding", "ome-basemodel-hook-status-fence"),
        ]
    )


def test_the_crds_are_a_layer_of_their_own_so_removing_the_hook_deletes_no_model(rendered, rendered_crds):
    """Deleting a CRD deletes every object of its kind: `kubectl delete -k metacontroller/`
    must never reach the BaseModel CRDs, which only `metacontroller/crds` renders."""
    assert not [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rendered_crds) == [
        ("CustomResourceDefinition", "basemodels.ome.io"),
        ("CustomResourceDefinition", "clusterbasemodels.ome.io"),
    ]


def test_samples_are_not_installed_by_the_kustomization(rendered):
    assert not [o for o in rendered if o["kind"] in ("BaseModel", "ClusterBaseModel")]


def test_namespaced_objects_live_in_the_hook_namespace(rendered):
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "CompositeController",
        "DecoratorController",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for o in rendered:
        ns = o["metadata"].get("namespace")
        if o["kind"] in cluster_scoped:
            assert ns is None, f"{o['kind']} {o['metadata']['name']} is cluster-scoped"
        else:
            assert ns == HOOK_NS, f"{o['kind']} {o['metadata']['name']} has namespace {ns!r}"


def test_every_object_carries_the_common_labels(rendered):
    for o in rendered:
        labels = o["metadata"].get("labels", {})
        for key, value in COMMON_LABELS.items():
            assert labels.get(key) == value, f"{o['kind']} {o['metadata']['name']} lacks {key}={value}"


@pytest.mark.parametrize("k8s_version", K8S_VERSIONS)
def test_builtin_objects_validate_strictly_against_kubernetes_schemas(rendered, rendered_crds, k8s_version):
    builtin = [o for o in rendered + rendered_crds
               if group_of(o["apiVersion"]) != "metacontroller.k8s.io" and served(o, k8s_version)]
    assert {o["kind"] for o in builtin} >= {
        "CustomResourceDefinition",
        "Deployment",
        "NetworkPolicy",
        "ClusterRole",
    }
    failures = []
    for o in builtin:
        try:
            kubernetes_validate.validate(o, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            failures.append(f"{o['kind']} {o['metadata']['name']}: {e.message} at {list(e.path)}")
        except kubernetes_validate.SchemaNotFoundError as e:
            failures.append(f"{o['kind']} {o['metadata']['name']}: {e.message}")
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------
# CompositeControllers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_compositecontroller_validates_against_metacontrollers_crd(
    controllers, compositecontroller_schema, name
):
    assert errors_of(compositecontroller_schema, controllers[name]) == []


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_compositecontroller_declares_exactly_the_hooks_children_only_the_record_in_place(controllers, name):
    """OnDelete: Metacontroller never edits a Job or RBAC object (the hook renames what
    changes); the record ConfigMap, the hook's memory, is updated in place."""
    parent, children = CHILDREN[name]
    spec = controllers[name]["spec"]
    assert spec["parentResource"] == {"apiVersion": "ome.io/v1beta1", "resource": parent, "ignoreStatusChanges": True,
                                      "labelSelector": {"matchLabels": {STORAGE_LABEL: PVC_STORAGE}}}
    assert spec["generateSelector"] is True
    declared = [(c["apiVersion"], c["resource"]) for c in spec["childResources"]]
    assert sorted(declared) == sorted(children)
    for child in spec["childResources"]:
        method = "InPlace" if child["resource"] == "configmaps" else "OnDelete"
        assert child["updateStrategy"] == {"method": method}, child


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_compositecontroller_calls_the_hook_service_with_v2_strict_and_a_timeout(
    controllers, rendered, name
):
    hooks = controllers[name]["spec"]["hooks"]
    assert set(hooks) == set(HOOK_PATHS)
    service = one(rendered, "Service", HOOK_NAME)
    (port,) = service["spec"]["ports"]
    for hook, path in HOOK_PATHS.items():
        spec = hooks[hook]
        assert spec["version"] == "v2", hook
        webhook = spec["webhook"]
        assert "url" not in webhook, hook
        assert webhook["service"] == {
            "name": service["metadata"]["name"],
            "namespace": service["metadata"]["namespace"],
            "port": port["port"],
            "protocol": "http",
        }
        assert webhook["path"] == path
        assert webhook["responseUnMarshallMode"] == "strict"
        assert GO_DURATION.match(webhook["timeout"]) and webhook["timeout"] not in ("0", "0s")
        # etag would need both cache settings (Metacontroller nil-pointer bug); unused.
        assert "etag" not in webhook


# --------------------------------------------------------------------------
# The label keeper: DecoratorController
# --------------------------------------------------------------------------

DECORATOR_CRD = UPSTREAM_CRDS / "metacontroller.k8s.io_decoratorcontrollers.yaml"
# DecoratorControllerResource in Metacontroller's pkg/apis/metacontroller/v1alpha1/types.go.
DECORATOR_RESOURCE_FIELDS = {"apiVersion", "resource", "labelSelector", "annotationSelector", "ignoreStatusChanges"}


@pytest.fixture(scope="module")
def decorator(rendered):
    return one(rendered, "DecoratorController", "ome-basemodel-storage-label")


def test_decoratorcontroller_validates_against_metacontrollers_crd(decorator):
    if not DECORATOR_CRD.exists():
        pytest.skip(f"{DECORATOR_CRD} is absent: Metacontroller's DecoratorController CRD is not in the reference pack")
    assert errors_of(crd_schema(load_yaml(DECORATOR_CRD)), decorator) == []


def test_decoratorcontroller_hooks_validate_as_metacontroller_hooks(decorator, compositecontroller_schema):
    """Both controllers share Metacontroller's Hook type, so the CompositeController CRD's
    hook schema checks the decorator's hooks (a typo'd field would be pruned)."""
    hook_schema = compositecontroller_schema["properties"]["spec"]["properties"]["hooks"]["properties"]["sync"]
    for name, hook in decorator["spec"]["hooks"].items():
        assert errors_of(hook_schema, hook) == [], name


def test_label_keeper_looks_at_every_model_of_both_kinds_but_not_at_status_writes(decorator):
    """No selector: a model created before the keeper, or whose label someone removed, is
    labelled again; a status write (OME's or Metacontroller's) does not call it."""
    assert decorator["spec"]["resources"] == [
        {"apiVersion": "ome.io/v1beta1", "resource": resource, "ignoreStatusChanges": True}
        for resource in ("basemodels", "clusterbasemodels")
    ]
    for resource in decorator["spec"]["resources"]:
        assert set(resource) <= DECORATOR_RESOURCE_FIELDS


def test_label_keeper_has_only_a_sync_hook_and_no_attachments(decorator, rendered):
    """A finalize hook would put Metacontroller's finalizer on every model, OME's too;
    attachments would make it own objects. It only labels."""
    assert set(decorator["spec"]) == {"resources", "hooks"}
    (hook,) = decorator["spec"]["hooks"].values()
    assert set(decorator["spec"]["hooks"]) == {"sync"}
    service = one(rendered, "Service", HOOK_NAME)
    assert hook["version"] == "v2"
    assert hook["webhook"]["service"] == {
        "name": service["metadata"]["name"], "namespace": service["metadata"]["namespace"], "port": 80, "protocol": "http",
    }
    assert hook["webhook"]["path"] == "/label"
    assert hook["webhook"]["responseUnMarshallMode"] == "strict"
    assert GO_DURATION.match(hook["webhook"]["timeout"]) and "etag" not in hook["webhook"]


def test_compositecontrollers_select_exactly_the_models_the_keeper_labels(controllers):
    for controller in controllers.values():
        assert controller["spec"]["parentResource"]["labelSelector"] == {"matchLabels": {STORAGE_LABEL: PVC_STORAGE}}


# --------------------------------------------------------------------------
# CRDs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
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


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_crd_status_schema_is_structural_and_never_preserves_unknown_fields(our_crds, kind):
    status = crd_schema(our_crds[kind])["properties"]["status"]
    for path, node in walk_schema(status, "status"):
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
        assert "type" in node, f"{path} has no type (not structural)"
        assert not ("properties" in node and "additionalProperties" in node), path


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
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


def printer_columns(crd):
    (version,) = crd["spec"]["versions"]
    return version["additionalPrinterColumns"]


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
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


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_crd_printer_columns_put_the_ready_reason_beside_the_state_and_age_last(our_crds, kind):
    columns = printer_columns(our_crds[kind])
    names = [c["name"] for c in columns]
    state = names.index("State")
    assert columns[state] == {"jsonPath": STATE_PATH, "name": "State", "type": "string"}
    assert columns[state + 1] == {"jsonPath": READY_REASON_PATH, "name": "Reason", "type": "string"}
    storage = columns[names.index("Storage")]
    assert storage["jsonPath"] == ".spec.storage.storageUri" and storage["priority"] == 1
    assert columns[-1] == {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}


def test_readme_lists_the_columns_kubectl_get_prints(our_crds):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`kubectl get basemodels` prints one column per fact: (.*?) \(", readme, re.S)
    assert found, "README no longer lists the columns of `kubectl get basemodels`"
    listed = re.findall(r"`([A-Z]+)`", found.group(1))
    default_columns = [c["name"].upper() for c in printer_columns(our_crds["BaseModel"]) if not c.get("priority")]
    assert listed == ["NAME", *default_columns]


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_status_schema_accepts_a_full_realistic_status(our_crds, kind):
    status_schema = crd_schema(our_crds[kind])["properties"]["status"]
    assert errors_of(status_schema, realistic_status()) == []
    ready = realistic_status()
    ready.update(state="Ready")
    ready["metadataExtraction"].update(result="Succeeded")
    assert errors_of(status_schema, ready) == []


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_status_schema_accepts_an_upstream_node_flow_status(our_crds, upstream_crds, kind):
    status = {"state": "Ready", "lifecycle": "Public", "nodesReady": ["node-a", "node-b"], "nodesFailed": []}
    for crds in (our_crds, upstream_crds):
        assert errors_of(crd_schema(crds[kind])["properties"]["status"], status) == []


@pytest.mark.parametrize(
    "where",
    [(), ("conditions", 0), ("storage",), ("metadataExtraction",)],
    ids=["status", "condition", "storage", "metadataExtraction"],
)
@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
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


# --------------------------------------------------------------------------
# the hook's Deployment, Service, PDB, NetworkPolicy
# --------------------------------------------------------------------------


def test_hook_namespace_enforces_pod_security_restricted(rendered):
    labels = one(rendered, "Namespace", HOOK_NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_deployment_runs_the_hook_image_with_two_replicas_and_probes(deployment, container):
    assert deployment["spec"]["replicas"] == 2
    assert container["image"] == HOOK_IMAGE
    assert container["command"] + container["args"] == [
        "basemodel-hook",
        "serve",
        "--bind",
        "0.0.0.0:8080",
    ]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}, kind


def test_deployment_selector_is_stable_and_matches_its_pods(deployment):
    selector = deployment["spec"]["selector"]
    assert selector == {
        "matchLabels": {
            "app.kubernetes.io/name": HOOK_NAME,
            "app.kubernetes.io/component": "webhook",
        }
    }
    assert matches(selector, deployment["spec"]["template"]["metadata"]["labels"])


def test_deployment_pod_meets_pod_security_restricted(pod_spec):
    pod_sc = pod_spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] == 10001 and pod_sc["runAsGroup"] == 10001
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod_spec.get(key), key
    allowed_volumes = {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
        "persistentVolumeClaim", "projected", "secret",
    }
    for volume in pod_spec.get("volumes", []):
        assert set(volume) - {"name"} <= allowed_volumes, volume
    containers = pod_spec["containers"] + pod_spec.get("initContainers", [])
    for c in containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, c["name"]
        assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
        assert set(sc["capabilities"].get("add", [])) <= {"NET_BIND_SERVICE"}, c["name"]
        assert sc["readOnlyRootFilesystem"] is True, c["name"]
        assert not sc.get("privileged"), c["name"]
        assert sc.get("runAsUser", 10001) != 0, c["name"]
        assert sc.get("seccompProfile", {"type": "RuntimeDefault"})["type"] in (
            "RuntimeDefault",
            "Localhost",
        )


def test_deployment_writes_only_to_a_tmp_emptydir_holding_the_metrics_dir(pod_spec, container):
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/metrics"


def test_deployment_pins_the_worker_count_instead_of_following_the_nodes_cpus(container):
    # `serve` defaults to 2 x node CPUs + 1 workers, which on a large node would
    # not fit the container's memory limit.
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert 1 <= int(env["HOOK_WORKERS"]) <= 4


def test_deployment_has_no_api_token_and_spreads_across_nodes(rendered, pod_spec, deployment):
    assert pod_spec["automountServiceAccountToken"] is False
    sa = one(rendered, "ServiceAccount", pod_spec["serviceAccountName"])
    assert sa["automountServiceAccountToken"] is False
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    spread = [
        t for t in pod_spec.get("topologySpreadConstraints", [])
        if t["topologyKey"] == "kubernetes.io/hostname" and matches(t["labelSelector"], pod_labels)
    ]
    anti = pod_spec.get("affinity", {}).get("podAntiAffinity")
    assert spread or anti, "replicas are not spread across nodes"


def test_service_and_pdb_select_the_hook_pods(rendered, deployment, container):
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(rendered, "Service", HOOK_NAME)
    assert matches({"matchLabels": service["spec"]["selector"]}, pod_labels)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    pdb = one(rendered, "PodDisruptionBudget", HOOK_NAME)
    assert pdb["spec"]["minAvailable"] == 1
    assert matches(pdb["spec"]["selector"], pod_labels)


def test_networkpolicy_admits_only_metacontroller_to_port_8080(rendered, deployment):
    policy = one(rendered, "NetworkPolicy", HOOK_NAME)["spec"]
    assert matches(policy["podSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert "Ingress" in policy["policyTypes"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert rule["from"], "an empty `from` admits everyone"
    for peer in rule["from"]:
        assert set(peer) == {"namespaceSelector", "podSelector"}, peer
        assert peer["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": "metacontroller"}
        }
        assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "metacontroller"}}


# --------------------------------------------------------------------------
# RBAC for Metacontroller
# --------------------------------------------------------------------------


def test_metacontroller_clusterrole_is_bound_to_metacontrollers_serviceaccount(rendered):
    binding = one(rendered, "ClusterRoleBinding", "ome-basemodel-hook-metacontroller")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "ome-basemodel-hook-metacontroller",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}
    ]


@pytest.mark.parametrize("resource", ["basemodels", "clusterbasemodels"])
def test_metacontroller_holds_what_the_job_roles_grant_so_it_may_create_them(
    metacontroller_role, resource
):
    # RBAC escalation prevention: the hook's Roles/ClusterRoles grant these verbs.
    for verb in ("get", "update", "patch"):
        assert allows(metacontroller_role["rules"], "ome.io", resource, verb, "any-model"), verb


def test_metacontroller_clusterrole_covers_parents_children_and_related(
    metacontroller_role, controllers, decorator
):
    rules = metacontroller_role["rules"]
    needed = []
    for cc in controllers.values():
        parent = cc["spec"]["parentResource"]["resource"]
        needed += [("ome.io", parent, v) for v in ("get", "list", "watch", "update", "patch")]
        needed += [("ome.io", f"{parent}/status", v) for v in ("get", "update", "patch")]
        needed += [("ome.io", f"{parent}/finalizers", "update")]
        for child in cc["spec"]["childResources"]:
            group = group_of(child["apiVersion"])
            needed += [
                (group, child["resource"], v)
                for v in ("get", "list", "watch", "create", "update", "patch", "delete")
            ]
    needed += [
        ("", r, v)
        for r in ("persistentvolumeclaims", "pods")
        for v in ("get", "list", "watch")
    ]
    needed += [("", "namespaces", v) for v in ("list", "watch")]
    needed += [("", "events", v) for v in ("create", "patch")]
    needed += [("metacontroller.k8s.io", r, v) for r in ("compositecontrollers", "decoratorcontrollers")
               for v in ("get", "list", "watch")]
    for parent in decorator["spec"]["resources"]:
        needed += [(group_of(parent["apiVersion"]), parent["resource"], v) for v in ("list", "watch", "update")]
    missing = [n for n in needed if not allows(rules, *n)]
    assert not missing, missing


def test_metacontroller_clusterrole_grants_no_wildcards_or_escalation_shortcuts(metacontroller_role):
    for rule in metacontroller_role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert "secrets" not in rule["resources"], rule


# --------------------------------------------------------------------------
# Dockerfile
# --------------------------------------------------------------------------


def test_dockerfile_runs_the_console_script_as_non_root_like_the_deployment(container):
    instructions = dockerfile.instructions()
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert len(froms) >= 2, "multi-stage build expected"
    args = dict(
        rest.split("=", 1) for word, rest in instructions if word == "ARG" and "=" in rest
    )
    assert args.get("PYTHON_IMAGE") == "python:3.11-slim"
    final = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    final_stage = instructions[final:]
    words = [w for w, _ in final_stage]
    assert ("USER", "10001:10001") in final_stage or ("USER", "10001") in final_stage
    assert words.index("USER") > max(i for i, w in enumerate(words) if w in ("COPY", "RUN"))
    assert not [r for w, r in final_stage if w == "RUN"], "no build steps in the final stage"
    entrypoint = json.loads(dict(final_stage)["ENTRYPOINT"])
    cmd = json.loads(dict(final_stage)["CMD"])
    assert entrypoint == container["command"] == ["basemodel-hook"]
    assert cmd == container["args"]
    assert ("EXPOSE", "8080") in final_stage
    env = " ".join(r for w, r in final_stage if w == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env


def test_dockerfile_installs_dependencies_before_copying_the_code():
    instructions = dockerfile.instructions()
    copies = [r for w, r in instructions if w == "COPY"]
    first_code = next(i for i, r in enumerate(copies) if r.startswith("hooks/"))
    assert copies.index("pyproject.toml ./") < first_code
    runs = [(i, r) for i, (w, r) in enumerate(instructions) if w == "RUN"]
    deps_install = next(i for i, r in runs if "pip install -r" in r)
    code_copy = next(i for i, (w, r) in enumerate(instructions) if w == "COPY" and r.startswith("hooks/"))
    assert deps_install < code_copy


def test_readme_overlay_points_the_deployment_at_the_readers_own_image(tmp_path):
    kustomization = documented_kustomization("images:")
    (entry,) = kustomization["images"]
    assert entry["name"] == HOOK_IMAGE.split(":")[0]
    objects = render(write_overlay(tmp_path / "my-cluster", kustomization))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{entry['newName']}:{entry['newTag']}"
    built = re.findall(r"^docker build -t (\S+) \.$", (REPO / "README.md").read_text(encoding="utf-8"), re.M)
    assert built == [container["image"]], "the README builds the image the overlay names"


def test_dockerignore_keeps_venv_git_and_caches_out_of_the_build_context():
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "allow-list: exclude everything, then re-include"
    reincluded = {line[1:] for line in lines if line.startswith("!")}
    assert reincluded == {"requirements.lock", "pyproject.toml", "README.md", "hooks/"}
    for pattern in (".git", ".venv", "**/__pycache__", "**/.pytest_cache"):
        assert pattern in lines


def _readme_overlay_webhooks(tmp_path: Path, containing: str) -> dict[str, dict]:
    """Every webhook of every controller after the README's overlay holding ``containing``
    (its own RBAC files, which the reader writes beside it, left out)."""
    kustomization = documented_kustomization(containing)
    kustomization["resources"] = [entry for entry in kustomization["resources"] if isinstance(entry, Path)]
    objects = render(write_overlay(tmp_path / "my-cluster", kustomization))
    return {
        f"{obj['metadata']['name']}/{hook}": spec["webhook"]
        for obj in objects
        if obj["kind"] in ("CompositeController", "DecoratorController")
        for hook, spec in obj["spec"]["hooks"].items()
    }


def test_readme_authentication_overlay_covers_every_hook_the_controllers_call(tmp_path):
    """The label keeper calls the hook too: without the token it gets a 401."""
    webhooks = _readme_overlay_webhooks(tmp_path, "HOOK_AUTH_TOKEN_FILE")
    assert len(webhooks) == 7
    assert {name for name, webhook in webhooks.items() if "authorization" not in webhook} == set()


def test_readme_mutual_tls_overlay_covers_every_hook_the_controllers_call(tmp_path):
    webhooks = _readme_overlay_webhooks(tmp_path, "HOOK_TLS_CLIENT_CA_FILE")
    assert len(webhooks) == 7
    for name, webhook in webhooks.items():
        assert webhook["service"]["protocol"] == "https", name
        assert "caBundle" in webhook and "clientTLS" in webhook, name


def test_readme_own_url_overlay_moves_every_hook_the_controllers_call(tmp_path):
    webhooks = _readme_overlay_webhooks(tmp_path, "basemodel-hook.example.com/sync")
    assert len(webhooks) == 7
    for name, webhook in webhooks.items():
        assert "service" not in webhook and "path" not in webhook, name
        assert webhook["url"].startswith("https://basemodel-hook.example.com/"), name
    assert webhooks["ome-basemodel-storage-label/sync"]["url"].endswith("/label")
