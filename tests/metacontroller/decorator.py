"""A DecoratorController (``pkg/controller/decorator/controller.go``, v4.17).

``syncParentObject`` in order: ignore a parent neither selected (``spec.resources``: its
type, ``labelSelector`` and ``annotationSelector``) nor carrying our finalizer; sync the
finalizer; the attachments (``getChildren``: objects of the declared types in the
parent's namespace whose controllerRef is the parent and that carry the
``metacontroller.k8s.io/decorator-controller`` annotation naming this controller; a
group for every declared type); the related objects; the hook (request ``controller``,
``object``, ``attachments``, ``related``, ``finalizing`` for hook versions v1 and v2
alike: ``api/v2/hooks.go`` names the Go fields ``Parent`` and ``Children`` but keeps the
JSON keys ``object`` and ``attachments``; v2 keys the maps ``namespace/name``);
``resyncAfterSeconds``; then the parent: labels and
annotations merged (``null`` deletes), a ``null`` or absent status left as it is, and a
write only when something changed (``UpdateStatus`` for a status change where the type
has a status subresource, then ``Update`` with the labels, annotations and the finalizer
removed on ``finalized``); then the annotation on every desired attachment and
``ManageChildren``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from tests.metacontroller import selection, webhook
from tests.metacontroller.cluster import ApiError, Resource, resource_of
from tests.metacontroller.controller import Controller, SyncFailure, declared, strategies
from tests.metacontroller.manage_children import manage_children
from tests.metacontroller.selection import Obj, ObjectMap, clone

if TYPE_CHECKING:
    from tests.metacontroller.simulator import Simulator

DECORATOR_ANNOTATION = "metacontroller.k8s.io/decorator-controller"
# decorator/api/v2/hooks.go SyncHookResponse: its JSON fields and their Go types.
SYNC_FIELDS = {
    "labels": webhook.is_string_map,
    "annotations": webhook.is_string_map,
    "status": webhook.is_object,
    "attachments": webhook.is_list_of_objects,
    "resyncAfterSeconds": webhook.is_number,
    "finalized": webhook.is_boolean,
}


class DecoratorController(Controller):
    kind_prefix = "decoratorcontroller"

    def __init__(self, sim: Simulator, manifest: Obj, hook: webhook.Hook) -> None:
        self.rules = manifest["spec"]["resources"]
        self.parent_types = [resource_of(rule["apiVersion"], rule["resource"]) for rule in self.rules]
        self.attachments = declared(manifest["spec"].get("attachments") or [])
        self.strategies = strategies(manifest["spec"].get("attachments") or [])
        super().__init__(sim, manifest, hook)

    def counter(self, sim: Simulator) -> Counter[str]:
        """Apart from the CompositeControllers': a model's story is counted without the
        node index's own work, which follows the nodes, not the models."""
        return sim.decorator_counts

    def parent_resources(self) -> list[Resource]:
        return list(dict.fromkeys(self.parent_types))

    def child_resources(self) -> list[Resource]:
        return self.attachments

    def _rules_for(self, parent: Obj) -> list[dict[str, Any]]:
        return [rule for rule, resource in zip(self.rules, self.parent_types, strict=True)
                if (resource.api_version, resource.kind) == (parent["apiVersion"], parent["kind"])]

    def selects(self, parent: Obj) -> bool:
        """``decoratorSelector.Matches``: any rule of the parent's type whose selectors both match."""
        metadata = parent["metadata"]
        for rule in self._rules_for(parent):
            annotation_selector = rule.get("annotationSelector") or {}
            as_labels = {"matchLabels": annotation_selector.get("matchAnnotations"),
                         "matchExpressions": annotation_selector.get("matchExpressions")}
            if selection.matches(rule.get("labelSelector"), metadata.get("labels")) \
                    and selection.matches(as_labels, metadata.get("annotations")):
                return True
        return False

    def ignores_status_changes(self, parent: Obj) -> bool:
        return any(rule.get("ignoreStatusChanges") is True for rule in self._rules_for(parent))

    def sync_parent(self, parent: Obj) -> None:
        observed = self.get_children(parent)
        related = self.related(parent)
        finalizing = self.finalizing(parent)
        spec = self.hook_spec(finalizing)
        version = spec.get("version") or "v1"
        body = {
            "controller": self.manifest,
            "object": parent,
            "attachments": selection.rekey(parent, observed, version),
            "related": selection.rekey(parent, related, version),
            "finalizing": finalizing,
        }
        self.sim.perturbation.before_call(self, parent, "finalize" if finalizing else "sync")
        answer = webhook.call(self.hook, spec, body, SYNC_FIELDS, self.counts, "finalize" if finalizing else "sync")
        self.sim.perturbation.answered(self, parent, answer)
        desired = selection.uniform_map(parent, clone(answer.get("attachments") or []))
        resync = answer.get("resyncAfterSeconds") or 0
        if resync > 0:
            self.enqueue_after(parent, float(resync))
        self._update_parent(parent, answer)
        for group in desired.values():
            for child in group.values():
                child["metadata"].setdefault("annotations", {})[DECORATOR_ANNOTATION] = self.name
        if not parent["metadata"].get("deletionTimestamp") or self.should_finalize(parent):
            errors = manage_children(self.cluster, self.strategies, parent, observed, desired, self.counts)
            if errors:
                raise SyncFailure(f"can't reconcile children for {parent['kind']} {parent['metadata']['name']}: "
                                  f"{'; '.join(errors)}")

    def _update_parent(self, parent: Obj, answer: dict[str, Any]) -> None:
        updated = clone(parent)
        metadata = updated["metadata"]
        labels_changed = _merge_strings(metadata, "labels", answer.get("labels") or {})
        annotations_changed = _merge_strings(metadata, "annotations", answer.get("annotations") or {})
        status = answer.get("status")
        if status is None:
            status = parent.get("status")
        status_changed = status != parent.get("status")
        finalized = answer.get("finalized") is True and selection.has_finalizer(parent, self.finalizer)
        if not (labels_changed or annotations_changed or status_changed or finalized):
            return
        if status is not None:
            updated["status"] = status
        resource = resource_of_kind(self.parent_types, parent)
        try:
            if status_changed and resource.status_subresource:
                updated["metadata"]["resourceVersion"] = self.write_status(updated)["metadata"]["resourceVersion"]
            if finalized:
                metadata["finalizers"] = [item for item in metadata.get("finalizers") or [] if item != self.finalizer]
            self.write_parent(updated)
        except ApiError as error:
            if error.code not in (404, 409):
                raise SyncFailure(f"can't update {parent['kind']} {parent['metadata']['name']}: {error}") from error

    def get_children(self, parent: Obj) -> ObjectMap:
        """``getChildren``: only what this decorator made for this parent."""
        groups: ObjectMap = {}
        namespace = parent["metadata"].get("namespace")
        for resource in self.attachments:
            selection.init_group(groups, resource.type_key)
            for obj in self.observe(parent, resource, namespace):
                if (selection.controller_of(obj) or {}).get("uid") != parent["metadata"]["uid"] \
                        or (obj["metadata"].get("annotations") or {}).get(DECORATOR_ANNOTATION) != self.name:
                    continue
                selection.insert(groups, parent, obj, "v2")
        return groups


def resource_of_kind(resources: list[Resource], obj: Obj) -> Resource:
    return next(item for item in resources if (item.api_version, item.kind) == (obj["apiVersion"], obj["kind"]))


def _merge_strings(metadata: dict[str, Any], field: str, updates: dict[str, str | None]) -> bool:
    """``updateStringMap``: set each key, delete it for ``null``; True when anything changed."""
    current = dict(metadata.get(field) or {})
    for key, value in updates.items():
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
    changed = current != (metadata.get(field) or {})
    if changed:
        metadata[field] = current
    return changed
