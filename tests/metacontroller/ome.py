"""OME beside the hook: its model agents' ConfigMaps and its manager's model reconcilers.

Follows sgl-project/ome v0.1.5 (``pkg/controller/v1beta1/basemodel/controller.go``,
``pkg/constants/constants.go``, ``pkg/modelagent/model_data.go`` and
``configmap_reconciler.go``, ``pkg/apis/ome/v1beta1/model.go``) and the controller-runtime it
builds on (v0.19.7: ``pkg/internal/controller/controller.go``,
``pkg/handler/enqueue_mapped.go``, ``pkg/cache/internal/informers.go``).

- ``NodeAgents``: the model agents, one per node, each keeping one ConfigMap in ``ome``
  named for its node, labelled ``models.ome/basemodel-status: "true"``, with one
  ``ModelEntry`` JSON per model under ``model_key``; a ``Deleted`` status removes the key.
  They write as ``OME_MODEL_AGENT``; a Node is registered by its kubelet.
- ``OMEManager``: the BaseModel and ClusterBaseModel reconcilers, as ``OME_MANAGER``. Each
  has its own controller (``SetupWithManager``) and work queue on the simulator's clock.
  Watches: every event of its model kind (status writes included); the status ConfigMaps
  in ``ome`` (an update maps the old and the new object's keys, creates and deletes the
  object's, every parseable entry of the reconciler's kind); a Node's deletion, which
  deletes that node's status ConfigMap. Every informer resyncs every ``SyncPeriod``
  (10 h; controller-runtime draws each informer's period from 0.9 to 1.1 times it, the
  simulator takes the middle). ``reconcileHandler``: an error is retried with the
  queue's per-item backoff (5 ms doubling to 1000 s), and the ``RequeueAfter`` returned
  with it is ignored; otherwise the item is forgotten and requeued after ``RequeueAfter``.

``Reconcile``: a missing model is done. A deleting one (``handleModelDeletion``) waits,
30 s at a time, while a status ConfigMap (whatever its Node) holds its key with a status
other than ``Deleted``, then loses OME's finalizer. Otherwise the finalizer is added when
missing; then ``processModelStatus``: for each status ConfigMap whose Node exists and
that holds the model's key, the entry's ``config`` fills the empty spec fields and the
node joins ``nodesReady`` or ``nodesFailed``; the state is Ready if a node is ready, else
Failed if one failed, else In_Transit; a fresh read, and a status write only when state or
either list differs. A model whose state was In_Transit or Importing when it was read is
requeued after 5 s. Writes go through ``retryUpdate`` (three attempts on a fresh read while
they meet a Conflict; its 100 ms and 200 ms sleeps take no simulated time) and through
OME's Go types (``typed``), so a status write replaces every status field but
``lifecycle``, ``state``, ``nodesReady`` and ``nodesFailed``.

Counts (``OMEManager.counts``): ``reconcile``; ``finalizer write`` (added or removed),
``spec write``, ``status write`` and, of those, ``status write refused`` (by admission:
the fence); ``error`` (a reconcile that failed, retried with backoff); ``configmap delete``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from tests.metacontroller.selection import clone
from tests.metacontroller.cluster import ApiError, Obj
from tests.metacontroller.identities import OME_MANAGER, OME_MODEL_AGENT, kubelet

if TYPE_CHECKING:
    from tests.metacontroller.simulator import Simulator

API_VERSION = "ome.io/v1beta1"
NAMESPACE = "ome"
"""``constants.OMENamespace``: the manager's ``POD_NAMESPACE``, the agents' ``--namespace``."""
STATUS_LABEL = "models.ome/basemodel-status"
FINALIZERS = {"BaseModel": "basemodels.ome.io/finalizer", "ClusterBaseModel": "clusterbasemodels.ome.io/finalizer"}
FIELD_MANAGER = "manager"
"""The manager binary's name, which the API server records for a client that names no field manager."""
MAX_KEY_LENGTH = 253
HASH_PREFIX_LENGTH = 8
MIN_NAMESPACE_LENGTH = 8
IN_PROGRESS = ("In_Transit", "Importing")
IN_PROGRESS_REQUEUE_SECONDS = 5.0
DELETION_REQUEUE_SECONDS = 30.0
SYNC_PERIOD_SECONDS = 10 * 3600.0
CONFLICT_ATTEMPTS = 3


# --- the ConfigMap keys (pkg/constants/constants.go) ------------------------------------------
# Kubernetes names are ASCII, so Go's byte lengths are Python's string lengths.

def truncate_with_hash(original: str, max_length: int) -> str:
    """``truncateWithHash``: unchanged when it fits, else the first 8 hex digits of its
    SHA-256, ``-`` and as much of its end as fits."""
    if len(original) <= max_length:
        return original
    prefix = hashlib.sha256(original.encode()).hexdigest()[:HASH_PREFIX_LENGTH]
    keep = max_length - HASH_PREFIX_LENGTH - 1
    return prefix[:max_length] if keep <= 0 else f"{prefix}-{original[-keep:]}"


def model_key(namespace: str | None, name: str) -> str:
    """``GetModelConfigMapKey``: ``clusterbasemodel.<name>`` for a ClusterBaseModel (``namespace``
    None), ``<namespace>.basemodel.<name>`` for a BaseModel, truncated to 253 characters with
    the namespace given at least 8 (its equal-split branch needs a budget under 16: never)."""
    if namespace is None:
        return f"clusterbasemodel.{truncate_with_hash(name, MAX_KEY_LENGTH - len('clusterbasemodel') - 1)}"
    budget = MAX_KEY_LENGTH - len("basemodel.") - 1
    if len(namespace) + len(name) <= budget:
        return f"{namespace}.basemodel.{name}"
    namespace_length = min(len(namespace), MIN_NAMESPACE_LENGTH)
    return (f"{truncate_with_hash(namespace, namespace_length)}.basemodel."
            f"{truncate_with_hash(name, budget - namespace_length)}")


def parse_model_key(key: str) -> tuple[str | None, str] | None:
    """``ParseModelInfoFromConfigMapKey``: ``(namespace, name)``, the namespace None for a
    ClusterBaseModel; None for a key that names no model."""
    if key.startswith("clusterbasemodel."):
        return None, key.removeprefix("clusterbasemodel.")
    namespace, separator, name = key.partition(".basemodel.")
    return (namespace, name) if separator else None


def model_entry(data: str) -> dict[str, Any] | None:
    """A ``ModelEntry`` as ``json.Unmarshal`` reads it, or None where it fails (not a JSON
    object, or a status that is not a string)."""
    try:
        entry = json.loads(data)
    except json.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("status", ""), str):
        return None
    return entry


def is_status_configmap(obj: Obj) -> bool:
    """``isModelStatusConfigMap``."""
    return obj["metadata"].get("namespace") == NAMESPACE and \
        (obj["metadata"].get("labels") or {}).get(STATUS_LABEL) == "true"


# --- the model agents ----------------------------------------------------------------------

class NodeAgents:
    """The model agents' ConfigMaps (the ConfigMap writer in ``configmap_reconciler.go``)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def add_node(self, name: str) -> None:
        """A Node, registered by its kubelet, and its agent's empty ConfigMap."""
        self.sim.cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name}}}, user=kubelet(name))
        self.sim.cluster.create({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {STATUS_LABEL: "true", "node": name},
                         "annotations": {"models.ome.io/node-name": name, "models.ome.io/managed-by": "model-agent"}},
            "data": {},
        }, manager="model-agent", user=OME_MODEL_AGENT)

    def report(self, node: str, namespace: str | None, name: str, status: str, config: dict[str, Any] | None = None) -> None:
        """The node's entry for a model (``namespace`` None for a ClusterBaseModel): ``Ready``,
        ``Updating`` or ``Failed`` with the agent's ``config`` if given; ``Deleted`` removes it."""
        configmap = self.sim.cluster.get("v1", "ConfigMap", NAMESPACE, node)
        data = configmap.setdefault("data", {})
        key = model_key(namespace, name)
        if status == "Deleted":
            data.pop(key, None)
        else:
            entry: dict[str, Any] = {"name": name, "status": status}
            if config is not None:
                entry["config"] = config
            data[key] = json.dumps(entry, separators=(",", ":"))
        self.sim.cluster.update(configmap, manager="model-agent", user=OME_MODEL_AGENT)


# --- the manager's model reconcilers ---------------------------------------------------------

def typed(model: Obj) -> Obj:
    """The model as OME's Go types read it and send it back (``model.go``): the status keeps
    only ``ModelStatusSpec``'s fields (``state`` always, the others when set), and the spec
    always carries ``modelFormat``, a struct field without ``omitempty`` (``{"name": ""}``
    for a model that has none, so OME's first write of such a model changes its spec)."""
    result = clone(model)
    status = model.get("status") or {}
    result["status"] = {"state": status.get("state", ""),
                        **{field: status[field] for field in ("lifecycle", "nodesReady", "nodesFailed") if status.get(field)}}
    spec = result.setdefault("spec", {})
    spec["modelFormat"] = {"name": "", **(spec.get("modelFormat") or {})}
    return result


def fill_spec(spec: Obj, config: dict[str, Any]) -> bool:
    """``updateSpecWithConfig``: the agent's findings fill only what the (typed) spec lacks;
    True when anything changed."""
    changed = False
    for field in ("modelType", "modelArchitecture", "modelParameterSize"):
        if spec.get(field) is None and config.get(field):
            spec[field], changed = config[field], True
    if not spec.get("modelCapabilities") and config.get("modelCapabilities"):
        spec["modelCapabilities"], changed = list(config["modelCapabilities"]), True
    framework = config.get("modelFramework") or {}
    if spec.get("modelFramework") is None and framework.get("name"):
        spec["modelFramework"] = {"name": framework["name"], **({"version": framework["version"]} if framework.get("version") else {})}
        changed = True
    model_format = config.get("modelFormat") or {}
    if model_format.get("name") and not spec["modelFormat"].get("name"):
        spec["modelFormat"]["name"], changed = model_format["name"], True
    if model_format.get("version") and spec["modelFormat"].get("version") is None:
        spec["modelFormat"]["version"], changed = model_format["version"], True
    if spec.get("maxTokens") is None and (config.get("maxTokens") or 0) > 0:
        spec["maxTokens"], changed = config["maxTokens"], True
    return changed


def lifecycle_state(ready: list[str], failed: list[str]) -> str:
    """``calculateLifecycleState``."""
    return "Ready" if ready else "Failed" if failed else "In_Transit"


class ModelReconciler:
    """``BaseModelReconciler`` or ``ClusterBaseModelReconciler`` with its controller."""

    def __init__(self, sim: Simulator, kind: str, counts: Counter[str], errors: list[str]) -> None:
        self.sim = sim
        self.cluster = sim.cluster
        self.kind = kind
        self.namespaced = kind == "BaseModel"
        self.finalizer = FINALIZERS[kind]
        self.counts = counts
        self.errors = errors
        self.queue = sim.new_queue()
        self.cluster.watchers.append(self._on_event)
        self._resync()

    # --- the controller ---------------------------------------------------------------------

    def process_one(self) -> bool:
        """``processNextWorkItem`` and ``reconcileHandler``; False when the queue is empty."""
        request = self.queue.get()
        if request is None:
            return False
        self._handle(request)
        return True

    def process_now(self, namespace: str | None, name: str) -> None:
        """A worker reconciles the model now, ahead of the queue (unless one already is)."""
        request = self._request(namespace, name)
        if self.queue.take(request):
            self._handle(request)

    def _handle(self, request: str) -> None:
        try:
            requeue_after = self.reconcile(request)
        except ApiError as error:
            self.counts["error"] += 1
            self.errors.append(f"{self.kind} {request}: {error}")
            self.queue.add_rate_limited(request)
        else:
            self.queue.forget(request)
            if requeue_after is not None:
                self.queue.add_after(request, requeue_after)
        finally:
            self.queue.done(request)

    def _request(self, namespace: str | None, name: str) -> str:
        return f"{namespace or ''}/{name}"

    def _on_event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        if (obj["apiVersion"], obj["kind"]) == (API_VERSION, self.kind):
            self.queue.add(self._request(obj["metadata"].get("namespace"), obj["metadata"]["name"]))
        elif (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap") and is_status_configmap(obj):
            for configmap in (old, new) if event == "MODIFIED" else (obj,):
                assert configmap is not None
                self._enqueue_entries(configmap)
        elif (obj["apiVersion"], obj["kind"]) == ("v1", "Node") and event == "DELETED":
            name = obj["metadata"]["name"]
            self.sim.after(0, lambda: self._forget_node(name))

    def _enqueue_entries(self, configmap: Obj) -> None:
        """``mapConfigMapToModelRequests``: every parseable entry of this reconciler's kind."""
        for key, data in (configmap.get("data") or {}).items():
            parsed = parse_model_key(key)
            if parsed is not None and (parsed[0] is not None) == self.namespaced and model_entry(data) is not None:
                self.queue.add(self._request(*parsed))

    def _forget_node(self, node: str) -> None:
        """``handleNodeDeletion``: the deleted node's status ConfigMap goes (NotFound is no error)."""
        configmap = self.cluster.find("v1", "ConfigMap", NAMESPACE, node)
        if configmap is None or not is_status_configmap(configmap):
            return
        try:
            self.cluster.delete("v1", "ConfigMap", NAMESPACE, node, user=OME_MANAGER)
        except ApiError as error:
            if error.code != 404:
                self.errors.append(f"ConfigMap {NAMESPACE}/{node}: {error}")
            return
        self.counts["configmap delete"] += 1

    def _resync(self) -> None:
        """The informers' list, at start and every ``SyncPeriod``: an event for every model and
        every status ConfigMap."""
        for model in self.cluster.list(API_VERSION, self.kind):
            self.queue.add(self._request(model["metadata"].get("namespace"), model["metadata"]["name"]))
        for configmap in self.cluster.list("v1", "ConfigMap", NAMESPACE):
            if is_status_configmap(configmap):
                self._enqueue_entries(configmap)
        self.sim.after(SYNC_PERIOD_SECONDS, self._resync, periodic=True)

    # --- Reconcile ----------------------------------------------------------------------------

    def reconcile(self, request: str) -> float | None:
        """``Reconcile``: the seconds after which to requeue, or None; an ``ApiError`` is the
        error it returns."""
        self.counts["reconcile"] += 1
        namespace, name = request.split("/")
        model = self.cluster.find(API_VERSION, self.kind, namespace or None, name)
        if model is None:
            return None
        if model["metadata"].get("deletionTimestamp"):
            return self._handle_deletion(model)
        if self.finalizer not in (model["metadata"].get("finalizers") or []):
            updated = typed(model)
            updated["metadata"]["finalizers"] = [*(model["metadata"].get("finalizers") or []), self.finalizer]
            self.counts["finalizer write"] += 1
            model = self.cluster.update(updated, manager=FIELD_MANAGER, user=OME_MANAGER)
        state = (model.get("status") or {}).get("state", "")
        self._process_model_status(model)
        return IN_PROGRESS_REQUEUE_SECONDS if state in IN_PROGRESS else None

    def _key(self, model: Obj) -> str:
        return model_key(model["metadata"].get("namespace") if self.namespaced else None, model["metadata"]["name"])

    def _status_configmaps(self) -> list[Obj]:
        return [item for item in self.cluster.list("v1", "ConfigMap", NAMESPACE)
                if (item["metadata"].get("labels") or {}).get(STATUS_LABEL) == "true"]

    def _handle_deletion(self, model: Obj) -> float | None:
        """``handleModelDeletion``: its ConfigMap check does not skip nodes that are gone."""
        finalizers = model["metadata"].get("finalizers") or []
        if self.finalizer not in finalizers:
            return None
        key = self._key(model)
        for configmap in self._status_configmaps():
            data = (configmap.get("data") or {}).get(key)
            if data is not None and (model_entry(data) or {}).get("status") != "Deleted":
                return DELETION_REQUEUE_SECONDS
        updated = typed(model)
        updated["metadata"]["finalizers"] = [item for item in finalizers if item != self.finalizer]
        self.counts["finalizer write"] += 1
        self.cluster.update(updated, manager=FIELD_MANAGER, user=OME_MANAGER)
        return None

    def _process_model_status(self, model: Obj) -> None:
        """``processModelStatus``: the nodes' entries for this model, then the status."""
        key = self._key(model)
        ready: set[str] = set()
        failed: set[str] = set()
        for configmap in self._status_configmaps():
            node = configmap["metadata"]["name"]
            data = (configmap.get("data") or {}).get(key)
            if self.cluster.find("v1", "Node", None, node) is None or data is None:
                continue
            entry = model_entry(data)
            if entry is None:
                continue
            if isinstance(entry.get("config"), dict):
                self._update_spec(model, entry["config"])
            if entry.get("status") == "Ready":
                ready.add(node)
            elif entry.get("status") == "Failed":
                failed.add(node)
        self._retry_update(model, lambda latest: self._write_status(latest, sorted(ready), sorted(failed)))

    def _update_spec(self, model: Obj, config: dict[str, Any]) -> None:
        """``updateModelSpecWithRetry``: a failure is logged and the status still computed."""
        def write(latest: Obj) -> None:
            updated = typed(latest)
            if fill_spec(updated["spec"], config):
                self.counts["spec write"] += 1
                self.cluster.update(updated, manager=FIELD_MANAGER, user=OME_MANAGER)
        try:
            self._retry_update(model, write)
        except ApiError as error:
            self.errors.append(f"{self.kind} {model['metadata']['name']} spec: {error}")

    def _write_status(self, latest: Obj, ready: list[str], failed: list[str]) -> None:
        """``updateModelStatusWithRetry``'s write: only when the state or a node list differs
        (a missing list equals an empty one)."""
        status = latest.get("status") or {}
        state = lifecycle_state(ready, failed)
        if (status.get("state", ""), status.get("nodesReady") or [], status.get("nodesFailed") or []) == (state, ready, failed):
            return
        updated = typed(latest)
        updated["status"]["state"] = state
        for field, nodes in (("nodesReady", ready), ("nodesFailed", failed)):
            updated["status"].pop(field, None)
            if nodes:
                updated["status"][field] = nodes
        self.counts["status write"] += 1
        try:
            self.cluster.update_status(updated, manager=FIELD_MANAGER, user=OME_MANAGER)
        except ApiError as error:
            if error.code == 403:
                self.counts["status write refused"] += 1
            raise

    def _retry_update(self, model: Obj, write: Callable[[Obj], None]) -> None:
        """``retryUpdate``: each attempt on a fresh read; a Conflict is tried again, three attempts in all."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            latest = self.cluster.get(API_VERSION, self.kind, model["metadata"].get("namespace"), model["metadata"]["name"])
            try:
                write(latest)
                return
            except ApiError as error:
                if error.code != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise


class OMEManager:
    """OME's controller manager as far as models go: both reconcilers, sharing ``counts`` and ``errors``."""

    def __init__(self, sim: Simulator) -> None:
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []
        self.reconcilers = [ModelReconciler(sim, kind, self.counts, self.errors) for kind in FINALIZERS]
        for reconciler in self.reconcilers:
            sim.add_worker(reconciler)
