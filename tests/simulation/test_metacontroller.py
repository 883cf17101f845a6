"""The simulator behaves as Metacontroller v4.17 does, shown with small hooks of our own."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.metacontroller import Simulator, manifests

Body = dict[str, Any]

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "models", "labels": {"team": "ml"}}}


def hooks(*names: str, version: str = "v2") -> Body:
    """``spec.hooks`` with a webhook per hook; only the URL's path reaches the callable."""
    return {name: {"version": version, "webhook": {"url": f"http://hook.example/{name}"}} for name in names}


def composite(**spec: Any) -> Body:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": "models"},
        "spec": {
            "generateSelector": True,
            "parentResource": {"apiVersion": "ome.io/v1beta1", "resource": "basemodels"},
            "childResources": [{"apiVersion": "v1", "resource": "serviceaccounts"},
                               {"apiVersion": "batch/v1", "resource": "jobs"}],
            "hooks": hooks("sync", "customize"),
            **spec,
        },
    }


def model(name: str, pvc: str = "store") -> Body:
    return {"apiVersion": "ome.io/v1beta1", "kind": "BaseModel", "metadata": {"name": name, "namespace": "models"},
            "spec": {"storage": {"storageUri": f"pvc://{pvc}/m"}}}


def pvc(name: str, namespace: str = "models") -> Body:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}}}


class Recorder:
    """A hook that asks for its PVC by name and answers with ``children`` and ``status``."""

    def __init__(self, children: list[Body] | None = None, status: Body | None = None, rules: Any = None) -> None:
        self.children = children or []
        self.status = {"state": "Ready"} if status is None else status
        self.rules = rules
        self.requests: list[tuple[str, Body]] = []

    def __call__(self, path: str, body: Body) -> tuple[int, Any]:
        self.requests.append((path, body))
        if path == "/customize":
            if self.rules is not None:
                return 200, {"relatedResources": self.rules}
            claim = body["parent"]["spec"]["storage"]["storageUri"].removeprefix("pvc://").split("/")[0]
            return 200, {"relatedResources": [{"apiVersion": "v1", "resource": "persistentvolumeclaims",
                                               "namespace": "models", "names": [claim]}]}
        answer: Body = {"status": self.status, "children": copy.deepcopy(self.children)}
        if path == "/finalize":
            answer["finalized"] = not any(body["children"].values())
        return 200, answer

    def syncs(self) -> list[Body]:
        return [body for path, body in self.requests if path != "/customize"]


def started(hook: Recorder, *objects: Body, **spec: Any) -> Simulator:
    sim = Simulator()
    sim.cluster.create(NAMESPACE)
    sim.add_controller(composite(**spec), hook)
    for obj in objects:
        sim.cluster.create(obj)
    sim.run_until_quiet()
    return sim


def test_customize_is_asked_once_per_generation_and_again_after_a_spec_change() -> None:
    hook = Recorder()
    sim = started(hook, model("a"))
    assert sim.counts["customize"] == 1
    stored = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    stored["spec"]["storage"]["storageUri"] = "pvc://other/m"
    sim.cluster.update(stored)
    sim.run_until_quiet()
    assert sim.counts["customize"] == 2
    assert list(hook.syncs()[-1]["related"]) == ["PersistentVolumeClaim.v1"]


def test_every_rule_and_every_child_type_has_a_group_even_when_empty() -> None:
    hook = Recorder()
    started(hook, model("a"))
    request = hook.syncs()[-1]
    assert request["related"] == {"PersistentVolumeClaim.v1": {}}
    assert request["children"] == {"ServiceAccount.v1": {}, "Job.batch/v1": {}}


def test_the_first_use_of_a_related_type_fails_once_until_its_informer_has_synced() -> None:
    sim = started(Recorder(), model("a"))
    assert sim.counts["sync error"] == 1
    assert "related informer not synced yet: persistentvolumeclaims" in sim.errors[0]


def test_a_related_change_enqueues_only_the_parents_whose_rules_match() -> None:
    hook = Recorder()
    sim = started(hook, model("a", pvc="store-a"), model("b", pvc="store-b"), pvc("store-a"), pvc("store-b"))
    before = len(hook.syncs())
    claim = sim.cluster.get("v1", "PersistentVolumeClaim", "models", "store-a")
    claim["metadata"]["labels"] = {"changed": "yes"}
    sim.cluster.update(claim)
    sim.run_until_quiet()
    synced = [body["parent"]["metadata"]["name"] for body in hook.syncs()[before:]]
    assert synced == ["a"]


def test_v2_keys_are_namespace_and_name_and_v1_keys_are_names() -> None:
    rules = [{"apiVersion": "v1", "resource": "persistentvolumeclaims", "labelSelector": {}}]
    objects = (model("a"), pvc("store"), pvc("far", namespace="elsewhere"))
    v2 = Recorder(rules=rules)
    started(v2, {**NAMESPACE, "metadata": {"name": "elsewhere"}}, *objects)
    assert set(v2.syncs()[-1]["related"]["PersistentVolumeClaim.v1"]) == {"models/store", "elsewhere/far"}
    v1 = Recorder(rules=rules)
    started(v1, {**NAMESPACE, "metadata": {"name": "elsewhere"}}, *objects, hooks=hooks("sync", "customize", version="v1"))
    assert set(v1.syncs()[-1]["related"]["PersistentVolumeClaim.v1"]) == {"store"}


def test_a_rule_mixing_names_and_a_label_selector_fails_the_sync() -> None:
    rules = [{"apiVersion": "v1", "resource": "persistentvolumeclaims", "names": ["x"], "labelSelector": {}}]
    sim = started(Recorder(rules=rules), model("a"))
    assert sim.counts["sync"] == 0 and sim.counts["sync error"] > 1
    assert "cannot have both names and labelSelector" in sim.errors[-1]


def service_account(name: str, **labels: str) -> Body:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "labels": labels}}


def test_children_get_the_controller_uid_label_owner_and_namespace_on_create() -> None:
    sim = started(Recorder(children=[service_account("sa")]), model("a"))
    [created] = sim.cluster.list("v1", "ServiceAccount")
    parent = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    assert created["metadata"]["labels"] == {"controller-uid": parent["metadata"]["uid"]}
    assert created["metadata"]["namespace"] == "models"
    assert created["metadata"]["ownerReferences"][0]["uid"] == parent["metadata"]["uid"]
    assert sim.counts["create"] == 1 and sim.counts["delete"] == 0


def test_a_child_whose_labels_break_the_selector_fails_the_sync_before_any_write() -> None:
    sim = started(Recorder(children=[service_account("sa", **{"controller-uid": "someone-else"})]), model("a"))
    assert sim.counts["create"] == 0 and sim.counts["status write"] == 0
    assert "don't match parent selector" in sim.errors[-1]


def test_a_child_the_api_server_refuses_fails_the_sync_but_the_status_is_written() -> None:
    refused = {**service_account("sa"), "automountToken": False}
    sim = started(Recorder(children=[refused]), model("a"))
    assert sim.counts["create refused"] >= 1 and sim.counts["status write"] == 1
    assert "can't reconcile children" in sim.errors[-1] and sim.cluster.list("v1", "ServiceAccount") == []


def test_an_observed_child_missing_from_the_answer_is_deleted() -> None:
    hook = Recorder(children=[service_account("sa")])
    sim = started(hook, model("a"))
    hook.children = []
    stored = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    stored["spec"]["modelType"] = "llama"
    sim.cluster.update(stored)
    sim.run_until_quiet()
    assert sim.counts["delete ServiceAccount"] == 1 and sim.cluster.list("v1", "ServiceAccount") == []


def test_on_delete_never_updates_an_existing_child() -> None:
    hook = Recorder(children=[service_account("sa", team="a")])
    sim = started(hook, model("a"))
    hook.children = [service_account("sa", team="b")]
    sim.advance(1)
    stored = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    stored["spec"]["modelType"] = "llama"
    sim.cluster.update(stored)
    sim.run_until_quiet()
    [child] = sim.cluster.list("v1", "ServiceAccount")
    assert child["metadata"]["labels"]["team"] == "a" and sim.counts["update"] == 0


def test_status_gets_observed_generation_and_an_equal_status_is_not_written_again() -> None:
    sim = started(Recorder(), model("a"), resyncPeriodSeconds=60)
    assert sim.counts["status write"] == 1
    sim.advance(600)
    assert sim.counts["status write"] == 1 and sim.counts["sync"] == 2 + 10
    status = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")["status"]
    assert status == {"state": "Ready", "observedGeneration": 1}


def test_a_status_field_the_crd_prunes_is_written_again_on_every_sync() -> None:
    sim = started(Recorder(status={"state": "Ready", "note": "pruned"}), model("a"), resyncPeriodSeconds=60)
    writes = sim.counts["status write"]
    sim.advance(600)
    assert sim.counts["status write"] == writes + 10
    assert "note" not in sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")["status"]


def test_a_status_the_crd_refuses_fails_every_sync() -> None:
    sim = started(Recorder(status={"state": "Sleeping"}), model("a"))
    assert "is invalid" in sim.errors[-1] and "status" not in sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")


def test_a_status_write_refused_by_admission_fails_the_sync_and_is_retried_with_backoff() -> None:
    """``updateParentStatus`` swallows only NotFound and Conflict: behind a fence whose owner
    names another ServiceAccount (an overlay for a Helm install), every attempt costs a sync
    error and a rate-limited retry."""
    sim = Simulator()
    for manifest in manifests("fence.yaml"):
        for variable in manifest["spec"].get("variables") or []:
            variable["expression"] = "'system:serviceaccount:metacontroller:mc-metacontroller-helm'"
        sim.cluster.create(manifest)
    sim.cluster.create(NAMESPACE)
    sim.add_controller(composite(hooks=hooks("sync")), Recorder())
    sim.cluster.create(model("a"))
    sim.advance(1)
    assert sim.counts["status write refused"] == sim.counts["status write"] == sim.counts["sync error"] == 8
    assert "ValidatingAdmissionPolicy 'ome-basemodel-hook-status-fence'" in sim.errors[-1]


def test_each_status_write_costs_one_more_sync_unless_status_changes_are_ignored() -> None:
    counted = started(Recorder(), model("a"))
    ignoring = started(Recorder(), model("a"), parentResource={
        "apiVersion": "ome.io/v1beta1", "resource": "basemodels", "ignoreStatusChanges": True})
    assert counted.counts["status write"] == ignoring.counts["status write"] == 1
    assert counted.counts["sync"] == ignoring.counts["sync"] + 1


def test_deletion_finalizes_with_the_generation_bump_and_removes_the_finalizer() -> None:
    hook = Recorder(children=[service_account("sa")])
    sim = started(hook, model("a"), hooks=hooks("sync", "customize", "finalize"))
    stored = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    assert stored["metadata"]["finalizers"] == ["metacontroller.io/compositecontroller-models"]
    hook.children = []
    sim.cluster.delete("ome.io/v1beta1", "BaseModel", "models", "a")
    sim.run_until_quiet()
    finals = [body for path, body in hook.requests if path == "/finalize"]
    assert [body["finalizing"] for body in finals] == [True, True]
    assert finals[0]["parent"]["metadata"]["generation"] == 2
    assert sim.counts["customize"] == 2 and sim.counts["delete ServiceAccount"] == 1
    assert sim.cluster.find("ome.io/v1beta1", "BaseModel", "models", "a") is None


# --- DecoratorController ------------------------------------------------------------------

def decorator(**spec: Any) -> Body:
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "DecoratorController",
        "metadata": {"name": "node-status"},
        "spec": {
            "resources": [{"apiVersion": "v1", "resource": "configmaps",
                           "labelSelector": {"matchLabels": {"models.ome/basemodel-status": "true"}}}],
            "attachments": [{"apiVersion": "v1", "resource": "serviceaccounts"}],
            "hooks": hooks("sync", "finalize"),
            **spec,
        },
    }


def configmap(name: str, **labels: str) -> Body:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ome", "labels": labels},
            "data": {}}


class Decorating:
    def __init__(self, answer: Body) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Body]] = []

    def __call__(self, path: str, body: Body) -> tuple[int, Any]:
        self.requests.append((path, body))
        answer = copy.deepcopy(self.answer)
        if path == "/finalize":
            answer["finalized"] = not any(body["attachments"].values())
        return 200, answer


def decorated(hook: Decorating, *objects: Body) -> Simulator:
    sim = Simulator()
    sim.add_controller(decorator(), hook)
    for obj in objects:
        sim.cluster.create(obj)
    sim.run_until_quiet()
    return sim


def test_decorator_syncs_only_selected_parents_with_every_attachment_group() -> None:
    hook = Decorating({"attachments": []})
    decorated(hook, configmap("node-a", **{"models.ome/basemodel-status": "true"}), configmap("other"))
    names = {body["object"]["metadata"]["name"] for _, body in hook.requests}
    assert names == {"node-a"}
    assert hook.requests[-1][1]["attachments"] == {"ServiceAccount.v1": {}}


@pytest.mark.parametrize(("version", "key"), [("v2", "ome/watcher"), ("v1", "watcher")])
def test_decorator_request_carries_object_and_attachments_for_both_hook_versions(version: str, key: str) -> None:
    """``decorator/api/v2/hooks.go`` names its Go fields ``Parent`` and ``Children`` but keeps
    the JSON keys ``object`` and ``attachments`` (since v4.15.0); only the map keys differ."""
    hook = Decorating({"attachments": [service_account("watcher")]})
    sim = Simulator()
    sim.add_controller(decorator(hooks=hooks("sync", version=version)), hook)
    sim.cluster.create(configmap("node-a", **{"models.ome/basemodel-status": "true"}))
    sim.run_until_quiet()
    body = hook.requests[-1][1]
    assert set(body) == {"controller", "object", "attachments", "related", "finalizing"}
    assert set(body["attachments"]["ServiceAccount.v1"]) == {key}


def test_decorator_without_status_or_labels_never_writes_the_parent() -> None:
    sim = decorated(Decorating({"attachments": []}), configmap("node-a", **{"models.ome/basemodel-status": "true"}))
    assert sim.decorator_counts["parent write"] == 1  # the finalizer
    assert sim.decorator_counts["status write"] == 0


def test_decorator_merges_labels_and_owns_its_attachments() -> None:
    hook = Decorating({"labels": {"seen": "yes", "models.ome/basemodel-status": "true"},
                       "attachments": [service_account("watcher")]})
    sim = decorated(hook, configmap("node-a", **{"models.ome/basemodel-status": "true", "gone": "x"}))
    parent = sim.cluster.get("v1", "ConfigMap", "ome", "node-a")
    assert parent["metadata"]["labels"] == {"models.ome/basemodel-status": "true", "gone": "x", "seen": "yes"}
    [attachment] = sim.cluster.list("v1", "ServiceAccount")
    assert attachment["metadata"]["namespace"] == "ome"
    assert attachment["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"] == "node-status"
    assert sim.decorator_counts["create ServiceAccount"] == 1 and sim.decorator_counts["parent write"] == 2
    assert [body["attachments"] for _, body in hook.requests][-1]["ServiceAccount.v1"].keys() == {"ome/watcher"}


def test_decorator_finalizes_its_parent_and_lets_it_go() -> None:
    hook = Decorating({"attachments": []})
    sim = decorated(hook, configmap("node-a", **{"models.ome/basemodel-status": "true"}))
    sim.cluster.delete("v1", "ConfigMap", "ome", "node-a")
    sim.run_until_quiet()
    assert [path for path, _ in hook.requests][-1] == "/finalize"
    assert sim.cluster.find("v1", "ConfigMap", "ome", "node-a") is None


@pytest.mark.parametrize("status", [None, {"state": "x"}])
def test_decorator_status_null_leaves_it_and_a_configmap_has_none_to_write(status: Body | None) -> None:
    sim = decorated(Decorating({"status": status}), configmap("node-a", **{"models.ome/basemodel-status": "true"}))
    assert "status" not in sim.cluster.get("v1", "ConfigMap", "ome", "node-a")
    assert sim.decorator_counts["status write"] == 0


def test_a_failing_hook_changes_nothing_and_is_retried_with_client_gos_backoff() -> None:
    calls: list[float] = []

    def broken(path: str, body: Body) -> tuple[int, Any]:
        calls.append(0.0)
        return 500, {"error": "boom"}

    sim = Simulator()
    sim.add_controller(composite(hooks=hooks("sync")), broken)
    sim.cluster.create(NAMESPACE)
    sim.cluster.create(model("a"))
    sim.advance(1)
    # 5 ms doubling: tries at 0, 0.005, 0.015, 0.035, 0.075, 0.155, 0.315 and 0.635 s.
    assert sim.counts["sync"] == len(calls) == 8
    assert sim.counts["status write"] == sim.counts["create"] == 0
    assert "unsupported status code: 500" in sim.errors[-1]


def test_an_unknown_field_in_a_strict_answer_fails_the_sync() -> None:
    def chatty(path: str, body: Body) -> tuple[int, Any]:
        return 200, {"status": {"state": "Ready"}, "children": [], "resyncAfter": 5}

    sim = Simulator()
    sim.add_controller(composite(hooks=hooks("sync")), chatty)
    sim.cluster.create(NAMESPACE)
    sim.cluster.create(model("a"))
    sim.settle()
    assert "strict validation failed: unknown fields ['resyncAfter']" in sim.errors[0]
    assert sim.counts["status write"] == 0


def answering(answer: Any) -> Simulator:
    """A model whose hook created one child, then answers its next sync with ``answer``."""
    recorder, switched = Recorder(children=[service_account("sa")]), []

    def hook(path: str, body: Body) -> tuple[int, Any]:
        return (200, answer) if switched and path == "/sync" else recorder(path, body)

    sim = started(hook, model("a"))  # type: ignore[arg-type]
    switched.append(True)
    parent = sim.cluster.get("ome.io/v1beta1", "BaseModel", "models", "a")
    parent["metadata"]["labels"] = {"touched": "yes"}
    sim.cluster.update(parent)
    sim.run_until_quiet()
    return sim


def test_a_null_answer_is_the_empty_answer_so_every_child_goes_and_the_status_empties() -> None:
    """``kjson.Unmarshal`` of ``null`` leaves the response at its zero value, no error: the
    child is deleted, and the status written is ``{observedGeneration}`` alone, which the
    CRD refuses (``state`` is required), so the sync fails again and again."""
    sim = answering(None)
    assert sim.cluster.list("v1", "ServiceAccount") == []
    assert "'state' is a required property" in sim.errors[-1]


@pytest.mark.parametrize("answer", [{"status": [], "children": []}, {"children": {}}, {"finalized": "false"},
                                    {"resyncAfterSeconds": "5"}])
def test_a_field_of_another_type_fails_the_sync_and_changes_nothing(answer: Body) -> None:
    sim = answering(answer)
    assert "can't unmarshal webhookResponse: wrong type" in sim.errors[-1]
    assert len(sim.cluster.list("v1", "ServiceAccount")) == 1


def test_resync_after_seconds_calls_back_once_at_that_time() -> None:
    times: list[float] = []
    sim = Simulator()

    def waiting(path: str, body: Body) -> tuple[int, Any]:
        times.append(sim.clock.now.timestamp())
        return 200, {"status": {"state": "In_Transit"}, "children": [], "resyncAfterSeconds": 30 if len(times) == 1 else 0}

    sim.add_controller(composite(hooks=hooks("sync"), parentResource={
        "apiVersion": "ome.io/v1beta1", "resource": "basemodels", "ignoreStatusChanges": True}), waiting)
    sim.cluster.create(NAMESPACE)
    sim.cluster.create(model("a"))
    start = sim.clock.now.timestamp()
    sim.run_until_quiet()
    assert [round(moment - start, 3) for moment in times] == [0.0, 30.0]


def test_namespace_selector_rules_select_by_the_namespaces_labels() -> None:
    rules = [{"apiVersion": "v1", "resource": "persistentvolumeclaims", "namespaceSelector": {"matchLabels": {"team": "ml"}}}]
    hook = Recorder(rules=rules)
    started(hook, {**NAMESPACE, "metadata": {"name": "elsewhere"}}, model("a"), pvc("store"), pvc("far", namespace="elsewhere"))
    assert set(hook.syncs()[-1]["related"]["PersistentVolumeClaim.v1"]) == {"models/store"}


def test_decorator_selects_by_annotations_too() -> None:
    hook = Decorating({"attachments": []})
    sim = Simulator()
    manifest = decorator()
    manifest["spec"]["resources"][0]["annotationSelector"] = {"matchAnnotations": {"models.ome.io/managed-by": "model-agent"}}
    sim.add_controller(manifest, hook)
    labelled = configmap("node-a", **{"models.ome/basemodel-status": "true"})
    annotated = copy.deepcopy(labelled)
    annotated["metadata"].update(name="node-b", annotations={"models.ome.io/managed-by": "model-agent"})
    sim.cluster.create(labelled)
    sim.cluster.create(annotated)
    sim.run_until_quiet()
    assert {body["object"]["metadata"]["name"] for _, body in hook.requests} == {"node-b"}


def test_v1_refuses_a_rule_naming_another_namespace_for_a_namespaced_parent() -> None:
    rules = [{"apiVersion": "v1", "resource": "persistentvolumeclaims", "namespace": "elsewhere", "names": ["far"]}]
    v1 = started(Recorder(rules=rules), model("a"), hooks=hooks("sync", "customize", version="v1"))
    assert v1.counts["sync"] == 0 and "differs from parent object namespace" in v1.errors[-1]
    v2 = Recorder(rules=rules)
    started(v2, {**NAMESPACE, "metadata": {"name": "elsewhere"}}, model("a"), pvc("far", namespace="elsewhere"))
    assert set(v2.syncs()[-1]["related"]["PersistentVolumeClaim.v1"]) == {"elsewhere/far"}
