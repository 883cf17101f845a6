"""What the kustomizations in metacontroller/ install, as a whole: exactly the expected
objects, the CRDs in a layer of their own, no sample, every object in its namespace and
with the common labels, and every built-in object valid by Kubernetes' strict schemas.

Everything here is offline: `kubectl kustomize` renders, kubernetes-validate checks.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.manifests import HOOK_NAME, HOOK_NS, LABEL_KEEPER, METACONTROLLER_ROLE, group_of
from tests.schemas import KUBERNETES_VERSIONS, served

COMMON_LABELS = {"app.kubernetes.io/name": HOOK_NAME, "app.kubernetes.io/part-of": "ome"}
RECORD_CRD = "extractionrecords.ome-basemodel-hook.ome.io"


def test_kustomize_renders_exactly_the_expected_objects(rendered):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered)
    assert kinds == sorted(
        [
            ("Namespace", HOOK_NS),
            ("CustomResourceDefinition", RECORD_CRD),
            ("ServiceAccount", HOOK_NAME),
            ("Deployment", HOOK_NAME),
            ("Service", HOOK_NAME),
            ("PodDisruptionBudget", HOOK_NAME),
            ("NetworkPolicy", HOOK_NAME),
            ("ClusterRole", METACONTROLLER_ROLE),
            ("ClusterRoleBinding", METACONTROLLER_ROLE),
            ("CompositeController", "ome-basemodels"),
            ("CompositeController", "ome-clusterbasemodels"),
            ("DecoratorController", LABEL_KEEPER),
            ("ValidatingAdmissionPolicy", "ome-basemodel-hook-status-fence"),
            ("ValidatingAdmissionPolicyBinding", "ome-basemodel-hook-status-fence"),
        ]
    )


def test_the_crds_are_a_layer_of_their_own_so_removing_the_hook_deletes_no_model(rendered, rendered_crds):
    """Deleting a CRD deletes every object of its kind: `kubectl delete -k metacontroller/`
    must never reach the BaseModel CRDs, which only `metacontroller/crds` renders. It
    removes only the CRD of the hook's own records, which go with the hook."""
    assert [o["metadata"]["name"] for o in rendered if o["kind"] == "CustomResourceDefinition"] == [RECORD_CRD]
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


# The oldest Kubernetes we support and the newest kubernetes-validate knows.
@pytest.mark.parametrize("k8s_version", KUBERNETES_VERSIONS)
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
