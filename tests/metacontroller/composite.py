"""A CompositeController (``pkg/controller/composite/controller.go``, v4.17).

``syncParentObject`` in order: ignore a parent neither selected nor ours; sync the
finalizer; claim the children (``claimChildren``: owned ones matching the selector, orphans
matching it adopted, owned ones no longer matching released; a group for every
``childResources`` type); the related objects; the sync or finalize hook
(``callHook`` from ``syncRevisions``, the request built by
``composite/api/{v1,v2}/hooks.go``); ``resyncAfterSeconds``; ``finalized`` removes the finalizer; the
``controller-uid`` label added to every desired child and each one checked against the
selector (a mismatch fails the sync before any child or status is written);
``ManageChildren`` unless the parent is being deleted without a reason to finalize; then
``updateParentStatus`` even when managing the children failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.metacontroller import selection, webhook
from tests.metacontroller.cluster import ApiError, Resource, resource_of
from tests.metacontroller.controller import Controller, SyncFailure, declared, strategies
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.manage_children import MANAGER, controller_ref, manage_children
from tests.metacontroller.selection import Obj, ObjectMap, clone

if TYPE_CHECKING:
    from tests.metacontroller.simulator import Simulator

# composite/api/v2/hooks.go SyncHookResponse: its JSON fields and their Go types.
SYNC_FIELDS = {
    "status": webhook.is_object,
    "children": webhook.is_list_of_objects,
    "resyncAfterSeconds": webhook.is_number,
    "finalized": webhook.is_boolean,
}


class CompositeController(Controller):
    kind_prefix = "compositecontroller"

    def __init__(self, sim: Simulator, manifest: Obj, hook: webhook.Hook) -> None:
        parent = manifest["spec"]["parentResource"]
        self.parent_resource = resource_of(parent["apiVersion"], parent["resource"])
        self.children = declared(manifest["spec"].get("childResources") or [])
        self.strategies = strategies(manifest["spec"].get("childResources") or [])
        super().__init__(sim, manifest, hook)

    def parent_resources(self) -> list[Resource]:
        return [self.parent_resource]

    def child_resources(self) -> list[Resource]:
        return self.children

    def selects(self, parent: Obj) -> bool:
        return selection.matches(self.spec["parentResource"].get("labelSelector"), parent["metadata"].get("labels"))

    def ignores_status_changes(self, parent: Obj) -> bool:
        return self.spec["parentResource"].get("ignoreStatusChanges") is True

    def selector(self, parent: Obj) -> dict[str, Any]:
        """``makeSelector``: ``controller-uid`` with ``generateSelector``, else the parent's ``spec.selector``."""
        if self.spec.get("generateSelector"):
            return {"matchLabels": {"controller-uid": parent["metadata"]["uid"]}}
        chosen = (parent.get("spec") or {}).get("selector") or {}
        if not chosen.get("matchLabels") and not chosen.get("matchExpressions"):
            raise SyncFailure(".spec.selector must have either matchLabels, matchExpressions, or both")
        return chosen

    def on_child(self, event: str, child: Obj) -> None:
        """An orphan enqueues every parent whose selector matches it (``findPotentialParents``)."""
        if selection.controller_of(child) is not None or event == "DELETED":
            super().on_child(event, child)
            return
        namespace = child["metadata"].get("namespace") if self.parent_resource.namespaced else None
        for parent in self.cluster.list(self.parent_resource.api_version, self.parent_resource.kind, namespace):
            try:
                chosen = self.selector(parent)
            except SyncFailure:
                continue
            if selection.matches(chosen, child["metadata"].get("labels")):
                self.enqueue(parent)

    # --- one sync -----------------------------------------------------------------------

    def sync_parent(self, parent: Obj) -> None:
        observed = self.claim_children(parent)
        related = self.related(parent)
        finalizing = self.finalizing(parent)
        spec = self.hook_spec(finalizing)
        body = sync_request(self.manifest, parent, observed, related, finalizing, spec.get("version") or "v1")
        self.sim.perturbation.before_call(self, parent, "finalize" if finalizing else "sync")
        answer = webhook.call(self.hook, spec, body, SYNC_FIELDS, self.counts, "finalize" if finalizing else "sync")
        self.sim.perturbation.answered(self, parent, answer)
        self.apply_answer(parent, observed, answer)

    def apply_answer(self, parent: Obj, observed: ObjectMap, answer: dict[str, Any]) -> None:
        """Everything after the hook answered: requeue, finalizer, selector check, children, status."""
        desired = selection.uniform_map(parent, clone(answer.get("children") or []))
        resync = answer.get("resyncAfterSeconds") or 0
        if resync > 0:
            self.enqueue_after(parent, float(resync))
        if answer.get("finalized"):
            parent = self.remove_finalizer(parent)
        chosen = self.selector(parent)
        for group in desired.values():
            for child in group.values():
                labels = child["metadata"].get("labels") or {}
                if self.spec.get("generateSelector") and "controller-uid" not in labels:
                    labels = child["metadata"]["labels"] = {**labels, "controller-uid": parent["metadata"]["uid"]}
                if not selection.matches(chosen, labels):
                    raise SyncFailure(f"labels on desired child {child['kind']} {child['metadata'].get('namespace')}/"
                                      f"{child['metadata']['name']} don't match parent selector")
        errors: list[str] = []
        if not parent["metadata"].get("deletionTimestamp") or self.should_finalize(parent):
            errors = manage_children(self.cluster, self.strategies, parent, observed, desired, self.counts)
        self.update_status(parent, answer.get("status"))
        if errors:
            raise SyncFailure(f"can't reconcile children for {parent['kind']} {parent['metadata']['name']}: {'; '.join(errors)}")

    def claim_children(self, parent: Obj) -> ObjectMap:
        """``claimChildren`` with ``ClaimChildren`` of the dynamic controllerref manager."""
        chosen = self.selector(parent)
        namespace = parent["metadata"].get("namespace") if self.parent_resource.namespaced else None
        groups: ObjectMap = {}
        for resource in self.children:
            selection.init_group(groups, resource.type_key)
            for obj in self.observe(parent, resource, namespace):
                claimed = self._claim(parent, chosen, obj)
                if claimed is not None:
                    selection.insert(groups, parent, claimed, "v2")
        return groups

    def _claim(self, parent: Obj, chosen: dict[str, Any], obj: Obj) -> Obj | None:
        owner = selection.controller_of(obj)
        labels = obj["metadata"].get("labels")
        if owner is not None:
            if owner.get("uid") != parent["metadata"]["uid"]:
                return None
            if selection.matches(chosen, labels):
                return obj
            if not parent["metadata"].get("deletionTimestamp"):
                released = clone(obj)
                released["metadata"]["ownerReferences"] = [
                    item for item in obj["metadata"]["ownerReferences"] if item.get("uid") != parent["metadata"]["uid"]]
                self.counts["release"] += 1
                self._patch_owner(released)
            return None
        if not selection.matches(chosen, labels) or parent["metadata"].get("deletionTimestamp") \
                or obj["metadata"].get("deletionTimestamp"):
            return None
        adopted = clone(obj)
        adopted["metadata"]["ownerReferences"] = [*(obj["metadata"].get("ownerReferences") or []), controller_ref(parent)]
        self.counts["adopt"] += 1
        return self._patch_owner(adopted)

    def _patch_owner(self, obj: Obj) -> Obj | None:
        try:
            return self.cluster.update(obj, manager=MANAGER, user=METACONTROLLER)
        except ApiError:
            return None

    def update_status(self, parent: Obj, status: dict[str, Any] | None) -> None:
        """``updateParentStatus``: the whole status replaced, ``observedGeneration`` injected, by
        ``AtomicStatusUpdate`` (a fresh read compared first, no write when equal, a Conflict
        tried again); NotFound and a Conflict left after the retries are swallowed, any other
        refusal (the fence's 403 among them) fails the sync."""
        wanted = clone(status) if isinstance(status, dict) else {}
        wanted["observedGeneration"] = parent["metadata"].get("generation", 0)

        def replace(current: Obj) -> bool:
            if current.get("status") == wanted:
                return False
            current["status"] = clone(wanted)
            return True
        try:
            self.atomic_update(parent, replace, status=True)
        except ApiError as error:
            if error.code not in (404, 409):
                raise


def sync_request(controller: Obj, parent: Obj, children: ObjectMap, related: ObjectMap, finalizing: bool,
                 version: str) -> dict[str, Any]:
    """The body of a sync or finalize call, keyed as the hook's version says."""
    return {
        "controller": controller,
        "parent": parent,
        "children": selection.rekey(parent, children, version),
        "related": selection.rekey(parent, related, version),
        "finalizing": finalizing,
    }
