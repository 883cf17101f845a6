"""The controllers the install gives Metacontroller: a CompositeController per model kind,
and the label keeper's DecoratorController. Each validates against Metacontroller's CRD
(closed, so a typo'd field, which the API server would prune, fails), calls the hook's
Service, and looks at exactly the models and children it should.
"""

from __future__ import annotations

import pytest

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL
from tests.manifests import HOOK_NAME, crd_schema, one, upstream_crd
from tests.schemas import GO_DURATION, errors_of

CHILDREN = {
    "ome-basemodels": (
        "basemodels",
        [
            ("batch/v1", "jobs"),
            ("v1", "serviceaccounts"),
            ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords"),
            ("rbac.authorization.k8s.io/v1", "roles"),
            ("rbac.authorization.k8s.io/v1", "rolebindings"),
        ],
    ),
    "ome-clusterbasemodels": (
        "clusterbasemodels",
        [
            ("batch/v1", "jobs"),
            ("v1", "serviceaccounts"),
            ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords"),
            ("rbac.authorization.k8s.io/v1", "clusterroles"),
            ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
        ],
    ),
}
HOOK_PATHS = {"sync": "/sync", "customize": "/customize", "finalize": "/finalize"}

# DecoratorControllerResource in Metacontroller's pkg/apis/metacontroller/v1alpha1/types.go.
DECORATOR_RESOURCE_FIELDS = {"apiVersion", "resource", "labelSelector", "annotationSelector", "ignoreStatusChanges"}


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
    changes); the record, the hook's memory, is updated in place."""
    parent, children = CHILDREN[name]
    spec = controllers[name]["spec"]
    assert spec["parentResource"] == {"apiVersion": "ome.io/v1beta1", "resource": parent, "ignoreStatusChanges": True,
                                      "labelSelector": {"matchLabels": {STORAGE_LABEL: PVC_STORAGE}}}
    assert spec["generateSelector"] is True
    declared = [(c["apiVersion"], c["resource"]) for c in spec["childResources"]]
    assert sorted(declared) == sorted(children)
    for child in spec["childResources"]:
        method = "InPlace" if child["resource"] == "extractionrecords" else "OnDelete"
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


def test_compositecontrollers_select_exactly_the_models_the_keeper_labels(controllers):
    for controller in controllers.values():
        assert controller["spec"]["parentResource"]["labelSelector"] == {"matchLabels": {STORAGE_LABEL: PVC_STORAGE}}


# --------------------------------------------------------------------------
# The label keeper: DecoratorController
# --------------------------------------------------------------------------


def test_decoratorcontroller_validates_against_metacontrollers_crd(decorator):
    assert errors_of(crd_schema(upstream_crd("metacontroller.k8s.io_decoratorcontrollers.yaml")), decorator) == []


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


def test_label_keeper_has_a_sync_and_a_customize_hook_and_no_attachments(decorator, rendered):
    """A finalize hook would put Metacontroller's finalizer on every model, OME's too;
    attachments would make it own objects. It labels, and asks for what the why is read
    from."""
    assert set(decorator["spec"]) == {"resources", "hooks"}
    assert set(decorator["spec"]["hooks"]) == {"sync", "customize"}
    service = one(rendered, "Service", HOOK_NAME)
    for name, path in (("sync", "/label"), ("customize", "/label-customize")):
        hook = decorator["spec"]["hooks"][name]
        assert hook["version"] == "v2"
        assert hook["webhook"]["service"] == {
            "name": service["metadata"]["name"], "namespace": service["metadata"]["namespace"], "port": 80, "protocol": "http",
        }
        assert hook["webhook"]["path"] == path
        assert hook["webhook"]["responseUnMarshallMode"] == "strict"
        assert GO_DURATION.match(hook["webhook"]["timeout"]) and "etag" not in hook["webhook"]