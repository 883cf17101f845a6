"""The status fence (``metacontroller/fence.yaml``): only Metacontroller writes a pvc:// model's status.

Its CEL runs in a real CEL implementation, with the policy evaluated as the API server
does (``tests/admission.py``), over the admission requests each writer sends.
"""

from __future__ import annotations

import copy

import pytest

from hooks.pvc.storage_uri import is_pvc_uri
from tests.admission import POLICY, Attributes, matches, validate
from tests.metacontroller.identities import KUBECTL, METACONTROLLER, OME_MANAGER, service_account
from tests.fence_review import BINDING_OBJECT, FENCE, HF_URI, HOOK_STATUS, KINDS, POLICY_OBJECT, Obj, refusal_of, review, write
from tests.schemas import kubernetes_errors, versions_serving

@pytest.mark.parametrize(("obj", "version"), [(obj, version) for obj in FENCE for version in versions_serving(obj)],
                         ids=lambda value: value if isinstance(value, str) else value["kind"])
def test_the_fence_validates_strictly_against_the_kubernetes_versions_that_serve_it(obj: Obj, version: str) -> None:
    """1.30, where ValidatingAdmissionPolicy became GA, and the newest kubernetes-validate knows."""
    assert kubernetes_errors(obj, version) == []


def test_the_binding_denies_with_the_policy_it_names_and_a_policy_that_cannot_evaluate_refuses() -> None:
    assert BINDING_OBJECT["metadata"]["name"] == POLICY_OBJECT["metadata"]["name"] == "ome-basemodel-hook-status-fence"
    assert BINDING_OBJECT["spec"] == {"policyName": POLICY_OBJECT["metadata"]["name"], "validationActions": ["Deny"]}
    assert POLICY_OBJECT["spec"]["failurePolicy"] == "Fail"


def test_the_policy_matches_only_an_update_of_the_two_status_subresources() -> None:
    constraints = POLICY_OBJECT["spec"]["matchConstraints"]
    matched = {(attributes.operation, attributes.resource, attributes.subresource)
               for operation in ("CREATE", "UPDATE", "DELETE")
               for kind in KINDS for subresource in ("", "status", "finalizers")
               if matches(constraints, attributes := write(kind, OME_MANAGER, operation, subresource))}
    assert matched == {("UPDATE", "basemodels", "status"), ("UPDATE", "clusterbasemodels", "status")}
    other_group = Attributes("UPDATE", "batch/v1", "jobs", "Job", "llama", "models", "status", OME_MANAGER, {}, {})
    assert not matches(constraints, other_group)


@pytest.mark.parametrize("kind", KINDS)
def test_omes_manager_is_refused_a_pvc_models_status_with_a_message_naming_the_owner(kind: str) -> None:
    assert review(write(kind, OME_MANAGER)) == refusal_of(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_cluster_admins_status_edit_of_a_pvc_model_is_refused_too(kind: str) -> None:
    assert review(write(kind, KUBECTL, status={"state": "Failed"})) == refusal_of(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_metacontroller_writes_a_pvc_models_status(kind: str) -> None:
    assert review(write(kind, METACONTROLLER, status=HOOK_STATUS)) is None


@pytest.mark.parametrize("kind", KINDS)
def test_ome_writes_the_status_of_its_own_models(kind: str) -> None:
    assert review(write(kind, OME_MANAGER, spec={"storage": {"storageUri": HF_URI}})) is None


# What OME v1.2.2's PVC backend writes: its typed status, stamped on every write.
OMES_PVC_BACKEND_STATUS = {"state": "Ready", "lastReconcileTime": "2026-11-30T12:00:00Z",
                           "conditions": [{"type": "Ready", "status": "True", "reason": "PVCMetadataReady", "message": "m"}]}


@pytest.mark.parametrize("kind", KINDS)
def test_omes_own_pvc_backend_writes_a_pvc_models_status_which_the_hook_hands_back_to_it(kind: str) -> None:
    """Its stamp is admitted before the label keeper's hand-back lands; OME v0.1.5's typed
    write, which cannot carry it, is still refused."""
    assert review(write(kind, OME_MANAGER, status=OMES_PVC_BACKEND_STATUS)) is None
    unstamped = {key: value for key, value in OMES_PVC_BACKEND_STATUS.items() if key != "lastReconcileTime"}
    assert review(write(kind, OME_MANAGER, status=unstamped)) == refusal_of(kind)


@pytest.mark.parametrize("spec", [{}, {"storage": {}}, {"storage": {"path": "/models/llama"}}],
                         ids=["no storage", "storage without a URI", "storage with a path only"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_model_without_a_storage_uri_is_admitted_without_an_evaluation_error(kind: str, spec: Obj) -> None:
    attributes = write(kind, OME_MANAGER, spec=spec)
    assert validate(POLICY_OBJECT, attributes) == []
    assert review(attributes) is None


@pytest.mark.parametrize(("operation", "subresource", "user"), [
    ("UPDATE", "", OME_MANAGER),               # OME adds or removes its finalizer, fills the spec
    ("UPDATE", "", service_account("models", "llama-metadata")),  # the metadata agent's spec write
    ("UPDATE", "", METACONTROLLER),            # the label keeper's label, Metacontroller's finalizer
    ("UPDATE", "", KUBECTL),                   # a user edits the model
    ("CREATE", "", KUBECTL),
    ("DELETE", "", OME_MANAGER),
])
@pytest.mark.parametrize("kind", KINDS)
def test_nothing_but_a_status_write_is_refused(kind: str, operation: str, subresource: str, user: str) -> None:
    assert review(write(kind, user, operation, subresource)) is None


@pytest.mark.parametrize("uri", ["pvc://model-storage/llama", "pvc://", "PVC://model-storage/llama", " pvc://a/b",
                                 "pvc:/model-storage", "hf://meta-llama/Llama-3.1-8B", "oci://models/llama", ""])
def test_the_fence_and_the_label_keeper_agree_on_which_models_are_pvc(uri: str) -> None:
    refused = review(write("BaseModel", OME_MANAGER, spec={"storage": {"storageUri": uri}})) is not None
    assert refused == is_pvc_uri(uri)


def test_an_overlay_changes_the_owner_in_its_one_variable() -> None:
    """Metacontroller installed by its Helm chart as release ``mc``: the username is named
    once, so one expression changes, and the fence then admits that ServiceAccount alone."""
    assert str(FENCE).count(METACONTROLLER) == 1
    helm = service_account("metacontroller", "mc-metacontroller-helm")
    overlaid = copy.deepcopy(FENCE)
    policy = next(item for item in overlaid if item["kind"] == POLICY)
    (owner,) = [item for item in policy["spec"]["variables"] if item["name"] == "owner"]
    assert owner["expression"] == f"'{METACONTROLLER}'"
    owner["expression"] = f"'{helm}'"
    assert review(write("BaseModel", helm, status=HOOK_STATUS), overlaid) is None
    assert review(write("BaseModel", METACONTROLLER, status=HOOK_STATUS), overlaid) == refusal_of("BaseModel", helm)
