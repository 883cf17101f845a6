"""What CompositeController and DecoratorController share: the queue loop, event handlers,
the finalizer and the customize manager.

Mirrors ``processNextWorkItem`` / ``sync`` (a failed sync gets a ``SyncError`` event and a
rate-limited requeue, a 429 a plain requeue after its delay; a status write refused by
admission is such a failure, as ``updateParentStatus`` swallows only NotFound and
Conflict), ``enqueueParentObject``,
``updateParentObject`` (``ignoreStatusChanges``), ``onChildAdd`` / ``onChildUpdate`` /
``onChildDelete`` and ``finalizer.SyncObject`` / ``ShouldFinalize`` of
``pkg/controller/{composite,decorator}/controller.go`` and ``common/finalizer``, and
``AtomicUpdate`` / ``AtomicStatusUpdate`` of ``pkg/dynamic/clientset`` (a fresh read, the
change, the write; a Conflict tried again as ``retry.DefaultBackoff`` allows).

What a controller reads of the cluster it reads through ``observe``, its informers: the
present, unless the simulator's perturbation makes one of them lag for one sync; the
events it had not seen then reach its handlers after that sync (``catch_up``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from tests.metacontroller import selection, webhook
from tests.metacontroller.cluster import ApiError, Cluster, Resource, group_of, ref, resource_of
from tests.metacontroller.customize import CustomizeManager, InformerNotSynced, RuleError
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.manage_children import MANAGER
from tests.metacontroller.selection import Obj, clone

if TYPE_CHECKING:
    from tests.metacontroller.simulator import Simulator

GC_FINALIZERS = ("foregroundDeletion", "orphan")
CONFLICT_ATTEMPTS = 4
"""``retry.DefaultBackoff``'s steps: a write that meets a Conflict is tried on a fresh read up to four times."""
TypeKey = tuple[str, str]


class SyncFailure(Exception):
    """An error Metacontroller reports as a ``SyncError`` event before retrying."""


class Controller:
    """One CompositeController or DecoratorController, with its own queue."""

    kind_prefix = ""

    def __init__(self, sim: Simulator, manifest: Obj, hook: webhook.Hook) -> None:
        self.sim = sim
        self.cluster: Cluster = sim.cluster
        self.counts: Counter[str] = self.counter(sim)
        self.manifest = manifest
        self.name: str = manifest["metadata"]["name"]
        self.spec: dict[str, Any] = manifest["spec"]
        self.hooks: dict[str, Any] = self.spec.get("hooks") or {}
        self.hook = hook
        self.finalizer = f"metacontroller.io/{self.kind_prefix}-{self.name}"
        self.queue = sim.new_queue()
        self.customize = CustomizeManager(self.cluster, manifest, hook, self.counts, self.parents, self.enqueue, sim.informers)
        sim.informers.update((resource.api_version, resource.kind) for resource in (*self.parent_resources(), *self.child_resources()))
        self.stopped = False
        self.started_at = self.cluster.sequence
        """The change at which its informers listed: no view of it is older."""
        self.caught_up: dict[TypeKey, int] = {}
        """Per type, the change up to which this controller's informer had caught up when it last read."""
        self.lagging: set[TypeKey] = set()
        self.cluster.watchers.append(self._on_event)
        period = self.spec.get("resyncPeriodSeconds")
        self._schedule_resync(max(float(period), 1.0) if period is not None else sim.cache_flush_seconds)
        for parent in self.parents():
            self.enqueue(parent)

    # --- what the subclasses say ---------------------------------------------------------

    def counter(self, sim: Simulator) -> Counter[str]:
        """Where this controller's calls and writes are counted (``Simulator.counts``)."""
        return sim.counts

    def parent_resources(self) -> list[Resource]:
        raise NotImplementedError

    def child_resources(self) -> list[Resource]:
        raise NotImplementedError

    def selects(self, parent: Obj) -> bool:
        """Whether the controller's parent selector matches (labels, and annotations for a decorator)."""
        raise NotImplementedError

    def ignores_status_changes(self, parent: Obj) -> bool:
        raise NotImplementedError

    def sync_parent(self, parent: Obj) -> None:
        """The rest of ``syncParentObject``, once the parent holds the finalizer it should."""
        raise NotImplementedError

    def stop(self) -> None:
        """Metacontroller's process is gone: no more watches, resyncs or syncs; whatever it
        had in its queues and caches (the customize answers, the related informers) goes too."""
        self.stopped = True
        self.cluster.watchers.remove(self._on_event)
        self.cluster.watchers.remove(self.customize._on_related)

    def use_hook(self, hook: webhook.Hook) -> None:
        """The hook redeployed: later calls reach ``hook``; Metacontroller keeps its customize cache."""
        self.hook = hook
        self.customize.hook = hook

    # --- the loop -------------------------------------------------------------------------

    def parents(self) -> list[Obj]:
        return [obj for resource in self.parent_resources() for obj in self.cluster.list(resource.api_version, resource.kind)]

    def process_one(self) -> bool:
        """``processNextWorkItem``: sync one key; False when the queue is empty."""
        key = self.queue.get()
        if key is None:
            return False
        self._process(key)
        return True

    def process_now(self, parent: Obj) -> None:
        """A worker syncs ``parent`` now, ahead of the queue (unless one already is)."""
        key = self._key(parent)
        if self.queue.take(key):
            self._process(key)

    def _process(self, key: str) -> None:
        try:
            try:
                self._sync_key(key)
            finally:
                self.catch_up()
        except webhook.TooManyRequests as busy:
            self.queue.add_after(key, busy.after)
        except (SyncFailure, webhook.HookError, ApiError, RuleError, InformerNotSynced) as error:
            self.counts["sync error"] += 1
            self.sim.errors.append(f"{self.name} {key}: {error}")
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
        finally:
            self.queue.done(key)

    def _sync_key(self, key: str) -> None:
        """``sync`` then the start of ``syncParentObject``: a parent that is gone, or neither
        selected nor ours, is left alone; otherwise the finalizer is synced first."""
        api_version, kind, namespace, name = key.split("|")
        parent = self.observe_parent(api_version, kind, namespace or None, name)
        if parent is None or not self.cares_about(parent):
            return
        parent = self.sync_finalizer(parent)
        if self.cares_about(parent):
            self.sync_parent(parent)

    # --- the informers ---------------------------------------------------------------------

    def observe(self, parent: Obj, resource: Resource, namespace: str | None) -> list[Obj]:
        """What this controller's informer of ``resource`` holds while it syncs ``parent``:
        the present, unless the perturbation makes it lag."""
        sequence = self.sim.perturbation.view(self, parent, (resource.api_version, resource.kind))
        return self._informer_list(resource.api_version, resource.kind, namespace, sequence)

    def observe_parent(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """The parent from the parent informer's cache (``common.GetObject``)."""
        present = self.cluster.find(api_version, kind, namespace, name)
        sequence = self.sim.perturbation.view(self, present, (api_version, kind)) if present is not None else None
        if sequence is None:
            self.caught_up[(api_version, kind)] = self.cluster.sequence
            return present
        found = [obj for obj in self._informer_list(api_version, kind, namespace, sequence) if obj["metadata"]["name"] == name]
        return found[0] if found else None

    def _informer_list(self, api_version: str, kind: str, namespace: str | None, sequence: int | None) -> list[Obj]:
        if sequence is None:
            self.caught_up[(api_version, kind)] = self.cluster.sequence
            return self.cluster.list(api_version, kind, namespace)
        self.caught_up[(api_version, kind)] = sequence
        self.lagging.add((api_version, kind))
        return self.cluster.list_as_of(sequence, api_version, kind, namespace)

    def view_at(self, parent: Obj, type_key: TypeKey, sequence: int) -> list[Obj]:
        """What this controller would pass its hook of ``type_key`` for ``parent``, had its
        informer caught up only to change ``sequence``; a perturbation compares these to
        find the lags that change what the hook sees. Without side effects."""
        api_version, kind = type_key
        listed = self.cluster.list_as_of(sequence, api_version, kind)
        if type_key == (parent["apiVersion"], parent["kind"]):
            return [obj for obj in listed if ref(obj) == ref(parent)]
        if type_key in {(resource.api_version, resource.kind) for resource in self.child_resources()}:
            return [obj for obj in listed if (selection.controller_of(obj) or {}).get("uid") == parent["metadata"]["uid"]]
        return self.customize.select(parent, type_key, lambda resource, namespace: [
            obj for obj in listed if namespace is None or obj["metadata"].get("namespace") == namespace])

    def catch_up(self) -> None:
        """A lagging informer delivers, after the sync, the changes it had not seen, in order,
        to this controller's handlers."""
        for type_key in sorted(self.lagging):
            for change in self.cluster.changes_since(self.caught_up[type_key]):
                if change.key[:2] != type_key:
                    continue
                event = "ADDED" if change.old is None else "DELETED" if change.new is None else "MODIFIED"
                old, new = clone(change.old), clone(change.new)
                self._on_event(event, old, new)
                self.customize._on_related(event, old, new)
            self.caught_up[type_key] = self.cluster.sequence
        self.lagging.clear()

    def cares_about(self, parent: Obj) -> bool:
        return self.selects(parent) or selection.has_finalizer(parent, self.finalizer)

    @staticmethod
    def _key(parent: Obj) -> str:
        api_version, kind, namespace, name = ref(parent)
        return f"{api_version}|{kind}|{namespace or ''}|{name}"

    def enqueue(self, parent: Obj) -> None:
        """``enqueueParentObject``: a parent neither selected nor carrying our finalizer is ignored."""
        if self.cares_about(parent):
            self.queue.add(self._key(parent))

    def enqueue_after(self, parent: Obj, seconds: float) -> None:
        self.queue.add_after(self._key(parent), seconds)

    def _schedule_resync(self, period: float) -> None:
        """The informer's resync: an update event with the same object for every parent, every
        ``resyncPeriodSeconds`` or else every ``--cache-flush-interval`` (the shared informers'
        default resync). From v4.17.2 (#1252) it passes the ``ignoreStatusChanges`` filter,
        which lets through an event whose old and new object are the same pointer; before,
        the filter drops it for a parent whose rule ignores status changes. Children and
        related objects resync too, but their handlers skip an update with an unchanged
        resourceVersion."""
        def resync() -> None:
            if self.stopped:
                return
            for parent in self.parents():
                if self.sim.version.resyncs_pass_filter or not self.ignores_status_changes(parent):
                    self.enqueue(parent)
            self._schedule_resync(period)
        self.sim.after(period, resync, periodic=True)

    def _on_event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        types = {(resource.api_version, resource.kind) for resource in self.parent_resources()}
        if (obj["apiVersion"], obj["kind"]) in types:
            if event == "MODIFIED":
                assert old is not None and new is not None
                self._on_parent_update(old, new)
            else:
                self.enqueue(obj)
        if (obj["apiVersion"], obj["kind"]) in {(r.api_version, r.kind) for r in self.child_resources()}:
            if event == "MODIFIED" and old is not None and new is not None \
                    and old["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]:
                return
            self.on_child(event, obj)

    def _on_parent_update(self, old: Obj, new: Obj) -> None:
        """``updateParentObject``: with ``ignoreStatusChanges`` only a new generation, new labels or
        annotations, or a deletion timestamp enqueue the parent (or a resync, above)."""
        if self.ignores_status_changes(new):
            same = (old["metadata"].get("generation") == new["metadata"].get("generation")
                    and old["metadata"].get("labels") == new["metadata"].get("labels")
                    and old["metadata"].get("annotations") == new["metadata"].get("annotations")
                    and not new["metadata"].get("deletionTimestamp"))
            if same:
                return
        self.enqueue(new)

    def on_child(self, event: str, child: Obj) -> None:
        """``onChildAdd`` / ``onChildDelete``: the controllerRef's parent, if it is one of ours."""
        owner = selection.controller_of(child)
        if owner is not None:
            parent = self.resolve(child, owner)
            if parent is not None:
                self.enqueue(parent)

    def resolve(self, child: Obj, owner: dict[str, Any]) -> Obj | None:
        """``resolveControllerRef``: by name (in the child's namespace for a namespaced parent), then uid."""
        for resource in self.parent_resources():
            if owner.get("kind") != resource.kind or group_of(owner.get("apiVersion", "")) != group_of(resource.api_version):
                continue
            namespace = child["metadata"].get("namespace") if resource.namespaced else None
            parent = self.cluster.find(resource.api_version, resource.kind, namespace, owner["name"])
            if parent is not None and parent["metadata"]["uid"] == owner.get("uid"):
                return parent
        return None

    # --- finalizer ------------------------------------------------------------------------

    @property
    def finalize_enabled(self) -> bool:
        return self.hooks.get("finalize") is not None

    def sync_finalizer(self, parent: Obj) -> Obj:
        """``finalizer.SyncObject``: add ours (not on a parent already being deleted) or remove it,
        judged on the cached parent, written by ``AtomicUpdate``."""
        if selection.has_finalizer(parent, self.finalizer) == self.finalize_enabled:
            return parent
        if self.finalize_enabled and parent["metadata"].get("deletionTimestamp"):
            return parent
        if self.finalize_enabled:
            return self.atomic_update(parent, self._with_finalizer)
        return self.remove_finalizer(parent)

    def remove_finalizer(self, parent: Obj) -> Obj:
        """``RemoveFinalizer``: an ``AtomicUpdate``."""
        return self.atomic_update(parent, self._without_finalizer)

    def _with_finalizer(self, current: Obj) -> bool:
        if selection.has_finalizer(current, self.finalizer):
            return False
        current["metadata"]["finalizers"] = [*(current["metadata"].get("finalizers") or []), self.finalizer]
        return True

    def _without_finalizer(self, current: Obj) -> bool:
        if not selection.has_finalizer(current, self.finalizer):
            return False
        current["metadata"]["finalizers"] = [item for item in current["metadata"]["finalizers"] if item != self.finalizer]
        return True

    def atomic_update(self, parent: Obj, change: Callable[[Obj], bool], status: bool = False) -> Obj:
        """``AtomicUpdate`` (``AtomicStatusUpdate`` with ``status``): read the parent afresh (a
        new uid is NotFound), apply ``change``, write only if it changed something; a
        Conflict starts again, ``CONFLICT_ATTEMPTS`` times in all."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            current = self.cluster.get(*ref(parent))
            if current["metadata"]["uid"] != parent["metadata"]["uid"]:
                raise ApiError(404, f"{parent['kind']} {parent['metadata']['name']} not found (replaced)")
            if not change(current):
                return current
            try:
                return self.write_status(current) if status else self.write_parent(current)
            except ApiError as error:
                if error.code != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def write_parent(self, parent: Obj) -> Obj:
        self.counts["parent write"] += 1
        return self.cluster.update(parent, manager=MANAGER, user=METACONTROLLER)

    def write_status(self, parent: Obj) -> Obj:
        """``UpdateStatus``. A write refused by admission (403, as behind a fence whose owner
        names another ServiceAccount) is counted as ``status write refused``, then raised."""
        self.counts["status write"] += 1
        try:
            return self.cluster.update_status(parent, manager=MANAGER, user=METACONTROLLER)
        except ApiError as error:
            if error.code == 403:
                self.counts["status write refused"] += 1
            raise

    def should_finalize(self, parent: Obj) -> bool:
        """``ShouldFinalize``: manage children while deleting only with our finalizer and no GC finalizer."""
        finalizers = parent["metadata"].get("finalizers") or []
        if any(item in GC_FINALIZERS for item in finalizers):
            return False
        return self.finalizer in finalizers and self.finalize_enabled

    def finalizing(self, parent: Obj) -> bool:
        """The finalize hook is called for a parent being deleted, or no longer selected but still ours."""
        if not self.finalize_enabled:
            return False
        return bool(parent["metadata"].get("deletionTimestamp")) or not self.selects(parent)

    def hook_spec(self, finalizing: bool) -> dict[str, Any]:
        return self.hooks["finalize"] if finalizing else self.hooks["sync"]

    def related(self, parent: Obj) -> selection.ObjectMap:
        return self.customize.related(parent, lambda resource, namespace: self.observe(parent, resource, namespace))


def declared(items: list[dict[str, Any]]) -> list[Resource]:
    return [resource_of(item["apiVersion"], item["resource"]) for item in items]


def strategies(items: list[dict[str, Any]]) -> dict[str, str]:
    """``makeUpdateStrategyMap``: ``Kind.group`` → method, ``OnDelete`` when unset."""
    found = {}
    for item, resource in zip(items, declared(items)):
        found[f"{resource.kind}.{group_of(resource.api_version)}"] = (item.get("updateStrategy") or {}).get("method") or "OnDelete"
    return found
