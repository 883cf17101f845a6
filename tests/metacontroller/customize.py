"""The customize manager (``pkg/controller/common/customize/manager.go``).

One per controller. It asks the customize hook once per (parent uid, generation) and
keeps the answer 20 minutes (``newResponseCache``), selects the related objects rule by
rule (``GetRelatedObjects``), and when a related object changes it enqueues exactly the
parents whose cached rules match it (``findRelatedParents`` / ``matchesRelatedRule``).
An informer for a related type is the shared one of that type (``dynamicinformer``'s
factory): where another controller already runs it (its parents' or children's type, or a
type another customize hook asked for), it has synced; otherwise it starts on first use,
and until it has synced that sync fails and is retried (``ErrRelatedInformerNotSynced``).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any, Callable

from tests.metacontroller import selection, webhook
from tests.metacontroller.cluster import ApiError, Cluster, Resource, resource_of
from tests.metacontroller.selection import Obj, ObjectMap

CACHE_TTL = timedelta(minutes=20)
Lister = Callable[[Resource, "str | None"], list[Obj]]
"""An informer's list of one resource, in one namespace or (None) all."""
RULE_FIELDS = {"apiVersion", "resource", "labelSelector", "namespaceSelector", "namespace", "names"}


class RuleError(Exception):
    """A rule Metacontroller refuses (``determineSelectionType`` or a v1 namespace restriction)."""


def selection_type(rule: dict[str, Any]) -> str:
    """``determineSelectionType``: which of the four modes a rule uses, refusing mixtures."""
    has_labels, has_ns_selector = rule.get("labelSelector") is not None, rule.get("namespaceSelector") is not None
    has_namespace, has_names = bool(rule.get("namespace")), bool(rule.get("names"))
    if has_names and (has_labels or has_ns_selector):
        raise RuleError(f"related rule cannot have both names and labelSelector/namespaceSelector specified: {rule}")
    if has_namespace and has_ns_selector:
        raise RuleError(f"related rule cannot have both namespace and namespaceSelector specified: {rule}")
    if has_ns_selector:
        return "NamespaceSelector"
    if has_labels and has_namespace:
        return "NamespaceAndLabels"
    if has_namespace or has_names:
        return "NamespacesAndNames"
    return "Labels"


class CustomizeManager:
    def __init__(
        self,
        cluster: Cluster,
        controller: Obj,
        hook: webhook.Hook,
        counts: Counter[str],
        parents: Callable[[], list[Obj]],
        enqueue: Callable[[Obj], None],
        shared: set[tuple[str, str]],
    ) -> None:
        self.cluster = cluster
        self.controller = controller
        self.spec: dict[str, Any] | None = (controller["spec"].get("hooks") or {}).get("customize")
        self.hook = hook
        self.counts = counts
        self.parents = parents
        self.enqueue = enqueue
        self.cache: dict[tuple[str, int], tuple[datetime, list[dict[str, Any]], str]] = {}
        self.informers: set[tuple[str, str]] = set()
        """The related types this manager handles the events of."""
        self.shared = shared
        """Every type Metacontroller's shared informer factory runs, synced (``Simulator.informers``)."""
        cluster.watchers.append(self._on_related)

    @property
    def enabled(self) -> bool:
        return self.spec is not None

    def rules(self, parent: Obj) -> tuple[list[dict[str, Any]], str]:
        """``getCustomizeHookResponse``: the cached answer for this uid and generation, or a new call."""
        key = (parent["metadata"]["uid"], parent["metadata"].get("generation", 0))
        now = self.cluster.clock.now
        cached = self.cache.get(key)
        if cached is not None and now < cached[0] + CACHE_TTL:
            return cached[1], cached[2]
        assert self.spec is not None, "no customize hook"
        body = {"controller": self.controller, "parent": parent}
        answer = webhook.call(self.hook, self.spec, body, {"relatedResources": webhook.is_list_of_objects}, self.counts, "customize")
        rules = answer.get("relatedResources") or []
        if webhook.is_strict(self.spec):
            for rule in rules:
                if set(rule) - RULE_FIELDS:
                    raise webhook.HookError(f"customize hook: strict validation failed: unknown fields in {rule}")
        version = self.spec.get("version") or "v1"
        self.cache[key] = (now, rules, version)
        return rules, version

    def _cached(self, parent: Obj) -> tuple[datetime, list[dict[str, Any]], str] | None:
        return self.cache.get((parent["metadata"]["uid"], parent["metadata"].get("generation", 0)))

    def related(self, parent: Obj, lister: Lister) -> ObjectMap:
        """``GetRelatedObjects``: every rule's group initialised, then filled by its mode from
        the informers ``lister`` reads."""
        groups: ObjectMap = {}
        if not self.enabled:
            return groups
        rules, version = self.rules(parent)
        for rule in rules:
            resource = resource_of(rule["apiVersion"], rule["resource"])
            self._informer(resource)
            selection.init_group(groups, resource.type_key)
            for obj in self._selected(parent, rule, version, resource, lister):
                selection.insert(groups, parent, obj, "v2")
        return groups

    def select(self, parent: Obj, type_key: tuple[str, str], lister: Lister) -> list[Obj]:
        """The related objects of one type the cached rules select from ``lister``."""
        cached = self._cached(parent)
        if cached is None:
            return []
        found = []
        for rule in cached[1]:
            resource = resource_of(rule["apiVersion"], rule["resource"])
            if (resource.api_version, resource.kind) == type_key:
                found.extend(self._selected(parent, rule, cached[2], resource, lister))
        return found

    def _selected(self, parent: Obj, rule: dict[str, Any], version: str, resource: Resource, lister: Lister) -> list[Obj]:
        """One rule's objects, by its selection mode."""
        namespaced_parent = bool(parent["metadata"].get("namespace"))
        parent_namespace = parent["metadata"].get("namespace")
        mode = selection_type(rule)
        if mode == "Labels":
            scoped = version == "v1" and namespaced_parent and resource.namespaced
            return [obj for obj in lister(resource, parent_namespace if scoped else None)
                    if selection.matches(rule.get("labelSelector"), obj["metadata"].get("labels"))]
        if mode == "NamespaceAndLabels":
            return [obj for obj in lister(resource, rule["namespace"])
                    if selection.matches(rule.get("labelSelector"), obj["metadata"].get("labels"))]
        if mode == "NamespaceSelector":
            namespaces = [ns["metadata"]["name"] for ns in self.cluster.list("v1", "Namespace")
                          if selection.matches(rule["namespaceSelector"], ns["metadata"].get("labels"))]
            return [obj for ns in namespaces for obj in lister(resource, ns)
                    if selection.matches(rule.get("labelSelector"), obj["metadata"].get("labels"))]
        if (version == "v1" and namespaced_parent and resource.namespaced and rule.get("namespace")
                and rule["namespace"] != parent_namespace):
            raise RuleError(f"requested related object namespace {rule['namespace']} differs from "
                            f"parent object namespace {parent_namespace}")
        found = lister(resource, rule.get("namespace") or None)
        return [obj for obj in found if obj["metadata"]["name"] in rule["names"]] if rule.get("names") else found

    def _list(self, resource: Resource, namespace: str | None) -> list[Obj]:
        return self.cluster.list(resource.api_version, resource.kind, namespace)

    def _informer(self, resource: Resource) -> None:
        """``getRelatedClient``: the first use adds this manager's handlers to the type's
        shared informer, which replays every object it holds to them as an add event; where
        no controller ran that informer yet, it starts now and has not synced."""
        key = (resource.api_version, resource.kind)
        if key in self.informers:
            return
        self.informers.add(key)
        for obj in self._list(resource, None):
            self._notify([obj])
        if key not in self.shared:
            self.shared.add(key)
            raise InformerNotSynced(f"related informer not synced yet: {resource.resource}")

    def _on_related(self, event: str, old: Obj | None, new: Obj | None) -> None:
        """``onRelatedAdd`` / ``onRelatedUpdate`` (both old and new state) / ``onRelatedDelete``."""
        obj = new or old
        assert obj is not None
        if (obj["apiVersion"], obj["kind"]) not in self.informers:
            return
        self._notify([item for item in (old, new) if item is not None])

    def _notify(self, objects: list[Obj]) -> None:
        for parent in self.find_related_parents(objects):
            self.enqueue(parent)

    def find_related_parents(self, objects: list[Obj]) -> list[Obj]:
        """``findRelatedParents``: parents whose (possibly newly fetched) rules match any of the objects.
        A parent whose customize call fails is skipped."""
        matching = []
        for parent in self.parents():
            try:
                rules, version = self.rules(parent)
            except webhook.HookError:
                continue
            if any(self._matches(version, parent, obj, rule) for rule in rules for obj in objects):
                matching.append(parent)
        return matching

    def _matches(self, version: str, parent: Obj, related: Obj, rule: dict[str, Any]) -> bool:
        """``matchesRelatedRule``."""
        try:
            resource = resource_of(rule["apiVersion"], rule["resource"])
            mode = selection_type(rule)
        except (ApiError, RuleError):
            return False
        if related["apiVersion"] != rule["apiVersion"] or related["kind"] != resource.kind:
            return False
        labels = related["metadata"].get("labels")
        namespace = related["metadata"].get("namespace")
        parent_namespace = parent["metadata"].get("namespace")
        if mode == "Labels":
            if not selection.matches(rule.get("labelSelector"), labels):
                return False
            return not (version == "v1" and parent_namespace and namespace and namespace != parent_namespace)
        if mode == "NamespaceAndLabels":
            return selection.matches(rule.get("labelSelector"), labels) and namespace == rule["namespace"]
        if mode == "NamespaceSelector":
            if not selection.matches(rule.get("labelSelector"), labels):
                return False
            if not namespace:
                return True
            ns = self.cluster.find("v1", "Namespace", None, namespace)
            return ns is not None and selection.matches(rule["namespaceSelector"], ns["metadata"].get("labels"))
        if version == "v1" and parent_namespace:
            if rule.get("namespace") and rule["namespace"] != parent_namespace:
                return False
            if namespace and namespace != parent_namespace:
                return False
        elif rule.get("namespace") and namespace != rule["namespace"]:
            return False
        return not rule.get("names") or related["metadata"]["name"] in rule["names"]


class InformerNotSynced(Exception):
    """``ErrRelatedInformerNotSynced``: the sync fails and is retried once the informer has listed."""
