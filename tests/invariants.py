"""What must hold of the models, whatever the order the controllers ran in.

Safety, checked as every write arrives and every change is stored: no Job of the current
URI is deleted while it runs, no Job is created twice and no two run at once for one
model, no ServiceAccount or grant is removed while a Job that uses it runs, a status
never says Ready without the metadata in the spec (unless a Job of the URI completed:
the agent found all it could) nor Failed without a reason, never lacks a state, and
Metacontroller creates no child the hook did not ask for.

Liveness, checked once everything is quiet: every model is labelled as its URI says (and
no later than ``LABEL_SECONDS`` after its URI last said otherwise), a ``pvc://`` model is
Ready or Failed with a reason, a model that left ``pvc://`` is handed back (no child, no
finalizer of Metacontroller's), and the children are exactly those the hook asks for now.

The checks read the objects' own fields (the Job's URI annotation, its attempt label, its
conditions) and never the hook's messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL
from hooks.pvc.metadata_job import ATTEMPT_LABEL, STORAGE_URI_ANNOTATION
from hooks.reasons import Reason
from hooks.states import State
from tests.metacontroller.cluster import Obj, Resource, resource_of
from tests.metacontroller.composite import CompositeController, sync_request
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.selection import ObjectMap, controller_of, init_group, insert, uniform_map
from tests.metacontroller.simulator import Simulator

MODEL_KINDS = ("BaseModel", "ClusterBaseModel")
ACCESS_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
METADATA_FIELDS = ("modelType", "modelArchitecture", "modelParameterSize")
FINISHED = ("Complete", "Failed", "FailureTarget")
FAILURE_REASONS = {str(reason) for reason in Reason if reason.condition is not None and reason.state is State.FAILED}
"""The reasons that say why a model failed, as the hook's catalogue gives them."""
LABEL_SECONDS = 600.0
"""How long a model's label may disagree with its URI: the issue's bound, ten minutes."""
METACONTROLLER_FINALIZER_PREFIX = "metacontroller.io/"


def is_pvc(model: Obj) -> bool:
    return str(((model.get("spec") or {}).get("storage") or {}).get("storageUri") or "").startswith("pvc://")


def storage_uri(model: Obj) -> str:
    return str(((model.get("spec") or {}).get("storage") or {}).get("storageUri") or "")


def finished(job: Obj) -> bool:
    return any(item.get("type") in FINISHED and item.get("status") == "True"
               for item in (job.get("status") or {}).get("conditions") or [])


def labelled_pvc(model: Obj) -> bool:
    return (model["metadata"].get("labels") or {}).get(STORAGE_LABEL) == PVC_STORAGE


def model_ref(model: Obj) -> tuple[str, str | None, str]:
    return model["kind"], model["metadata"].get("namespace"), model["metadata"]["name"]


@dataclass
class Checker:
    """Watches one simulated cluster; ``violations`` says what broke, when and how."""

    sim: Simulator | None = None
    violations: list[str] = field(default_factory=list)
    created_jobs: set[tuple[str, str, str]] = field(default_factory=set)
    extracted: set[tuple[str | None, str | None]] = field(default_factory=set)
    """(model uid, URI) of every Job that completed."""
    desired: dict[str, set[tuple[str, str | None, str]]] = field(default_factory=dict)
    disagreeing_since: dict[tuple[str, str | None, str], datetime] = field(default_factory=dict)

    def attach(self, sim: Simulator) -> None:
        self.sim = sim
        sim.cluster.watchers.append(self.on_change)

    @property
    def cluster(self) -> Any:
        assert self.sim is not None
        return self.sim.cluster

    def fail(self, message: str) -> None:
        assert self.sim is not None
        self.violations.append(f"{self.sim.clock.now:%H:%M:%S} {message}")

    # --- safety: as a write arrives --------------------------------------------------------

    def before_write(self, user: str, verb: str, obj: Obj) -> None:
        if verb == "delete" and user == METACONTROLLER:
            if obj["kind"] == "Job" and not finished(obj) and not obj["metadata"].get("deletionTimestamp"):
                self._job_deleted(obj)
            if obj["kind"] in ACCESS_KINDS:
                self._access_deleted(obj)
        if verb == "create" and user == METACONTROLLER:
            self._child_created(obj)

    def _owner(self, obj: Obj) -> Obj | None:
        owner = controller_of(obj)
        if owner is None or owner.get("kind") not in MODEL_KINDS:
            return None
        namespace = obj["metadata"].get("namespace") if owner["kind"] == "BaseModel" else None
        model = self.cluster.find(owner["apiVersion"], owner["kind"], namespace, owner["name"])
        return model if model is not None and model["metadata"]["uid"] == owner.get("uid") else None

    def _job_deleted(self, job: Obj) -> None:
        """A running Job may go only when its model no longer wants it: gone, being deleted,
        handed back, or its URI changed."""
        model = self._owner(job)
        if model is None or model["metadata"].get("deletionTimestamp") or not labelled_pvc(model) or not is_pvc(model):
            return
        if (job["metadata"].get("annotations") or {}).get(STORAGE_URI_ANNOTATION) == storage_uri(model):
            self.fail(f"running Job {job['metadata']['name']} of {model_ref(model)} deleted though its URI is current")

    def _access_deleted(self, access: Obj) -> None:
        """The ServiceAccount and its grant share their name; none goes while a Job using it runs."""
        name = access["metadata"]["name"]
        namespace = access["metadata"].get("namespace")
        for job in self.cluster.list("batch/v1", "Job", namespace):
            uses = job["spec"]["template"]["spec"].get("serviceAccountName") == name
            if uses and not finished(job) and not job["metadata"].get("deletionTimestamp"):
                self.fail(f"{access['kind']} {name} deleted while Job {job['metadata']['name']} runs")

    def _child_created(self, child: Obj) -> None:
        owner = controller_of(child)
        if owner is None or owner.get("kind") not in MODEL_KINDS:
            return
        identity = (child["kind"], child["metadata"].get("namespace"), child["metadata"]["name"])
        if identity not in self.desired.get(owner["uid"], set()):
            self.fail(f"{identity} created for {owner['name']} though the hook's last answer did not ask for it")

    def answered(self, parent: Obj, answer: dict[str, Any]) -> None:
        """The children the hook asked for, by the parent's uid, as Metacontroller will place them."""
        self.desired[parent["metadata"]["uid"]] = placed(parent, answer.get("children") or [])

    # --- safety: as a change is stored -------------------------------------------------------

    def on_change(self, event: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None and new["kind"] == "Job":
            if event == "ADDED":
                self._job_created(new)
            if any(item.get("type") == "Complete" and item.get("status") == "True"
                   for item in (new.get("status") or {}).get("conditions") or []):
                owner = controller_of(new) or {}
                self.extracted.add((owner.get("uid"), (new["metadata"].get("annotations") or {}).get(STORAGE_URI_ANNOTATION)))
        if new is None or new["kind"] not in MODEL_KINDS:
            return
        self._label_lag(new)
        status = new.get("status")
        if status is None or status == (old or {}).get("status") or not is_pvc(new):
            return
        if "state" not in status:
            self.fail(f"{model_ref(new)} has a status without a state: {status}")
        extracted = (new["metadata"]["uid"], storage_uri(new)) in self.extracted
        if status.get("state") == "Ready" and not extracted and not all(new["spec"].get(name) for name in METADATA_FIELDS):
            self.fail(f"{model_ref(new)} is Ready without {METADATA_FIELDS} in its spec, and no Job of its URI completed")
        if status.get("state") == "Failed" and "conditions" in status:
            ready = next((item for item in status["conditions"] if item.get("type") == "Ready"), {})
            if ready.get("reason") not in FAILURE_REASONS or not ready.get("message"):
                self.fail(f"{model_ref(new)} is Failed without a failure reason: {ready}")

    def _job_created(self, job: Obj) -> None:
        """A Job name is an attempt: created once per model, and never beside a running Job of it."""
        owner = controller_of(job)
        if owner is None or owner.get("kind") not in MODEL_KINDS:
            return
        created = (owner["uid"], job["metadata"]["namespace"], job["metadata"]["name"])
        if created in self.created_jobs:
            self.fail(f"Job {job['metadata']['name']} created a second time for {owner['name']}")
        self.created_jobs.add(created)
        running = [other["metadata"]["name"] for other in self.cluster.list("batch/v1", "Job", job["metadata"]["namespace"])
                   if (controller_of(other) or {}).get("uid") == owner["uid"] and not finished(other)
                   and not other["metadata"].get("deletionTimestamp") and other["metadata"]["name"] != job["metadata"]["name"]]
        if running:
            self.fail(f"Job {job['metadata']['name']} created while {running} of {owner['name']} run")

    def _label_lag(self, model: Obj) -> None:
        identity = model_ref(model)
        assert self.sim is not None
        if labelled_pvc(model) == is_pvc(model) or model["metadata"].get("deletionTimestamp"):
            self.disagreeing_since.pop(identity, None)
        else:
            self.disagreeing_since.setdefault(identity, self.sim.clock.now)

    # --- liveness: once quiet -----------------------------------------------------------------

    def check_quiet(self) -> None:
        """Everything is quiet: every model as its URI says, its children as the hook wants."""
        assert self.sim is not None
        now = self.sim.clock.now
        for kind in MODEL_KINDS:
            for model in self.cluster.list("ome.io/v1beta1", kind):
                identity = model_ref(model)
                since = self.disagreeing_since.get(identity)
                if since is not None and (now - since).total_seconds() > LABEL_SECONDS:
                    self.fail(f"{identity} labelled {labelled_pvc(model)} for {now - since} though its URI is "
                              f"{storage_uri(model)!r}")
                if model["metadata"].get("deletionTimestamp"):
                    continue
                if is_pvc(model):
                    self._settled(model)
                else:
                    self._handed_back(model)

    def _settled(self, model: Obj) -> None:
        status = model.get("status") or {}
        if status.get("state") not in ("Ready", "Failed"):
            self.fail(f"{model_ref(model)} is not Ready nor Failed once quiet: {status.get('state')}")
        composite = self._composite(model["kind"])
        owned = self._owned(model)
        wanted = self._wanted_now(composite, model)
        if owned != wanted:
            self.fail(f"{model_ref(model)} owns {sorted(owned)} once quiet, but the hook asks for {sorted(wanted)}")

    def _handed_back(self, model: Obj) -> None:
        finalizers = [item for item in model["metadata"].get("finalizers") or []
                      if item.startswith(METACONTROLLER_FINALIZER_PREFIX)]
        owned = self._owned(model)
        if finalizers or owned:
            self.fail(f"{model_ref(model)} left pvc:// but keeps {finalizers} and children {sorted(owned)}")

    def _owned(self, model: Obj) -> set[tuple[str, str | None, str]]:
        uid = model["metadata"]["uid"]
        return {(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
                for obj in self.cluster.objects.values() if (controller_of(obj) or {}).get("uid") == uid}

    def _composite(self, kind: str) -> CompositeController:
        assert self.sim is not None
        return next(item for item in self.sim.controllers
                    if isinstance(item, CompositeController) and item.parent_resource.kind == kind)

    def _wanted_now(self, composite: CompositeController, model: Obj) -> set[tuple[str, str | None, str]]:
        """The children the hook asks for in the present state, asked without applying."""
        def listed(resource: Resource, namespace: str | None) -> list[Obj]:
            return self.cluster.list(resource.api_version, resource.kind, namespace)
        observed: ObjectMap = {}
        for resource in composite.children:
            init_group(observed, resource.type_key)
            for obj in composite.view_at(model, (resource.api_version, resource.kind), self.cluster.sequence):
                insert(observed, model, obj, "v2")
        related: ObjectMap = {}
        for rule in composite.customize.rules(model)[0]:
            resource = resource_of(rule["apiVersion"], rule["resource"])
            init_group(related, resource.type_key)
            for obj in composite.customize.select(model, (resource.api_version, resource.kind), listed):
                insert(related, model, obj, "v2")
        status, answer = composite.hook("/sync", sync_request(composite.manifest, model, observed, related, False, "v2"))
        assert status == 200, answer
        return placed(model, answer.get("children") or [])


def placed(parent: Obj, children: list[Any]) -> set[tuple[str, str | None, str]]:
    """Each child of an answer as Metacontroller places it: (kind, namespace, name)."""
    mapped = uniform_map(parent, [dict(item, metadata=dict(item.get("metadata") or {}))
                                  for item in children if isinstance(item, dict)])
    return {(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
            for group in mapped.values() for obj in group.values()}


def summary(model: Obj, cluster: Any) -> tuple[Any, ...]:
    """What a model ended as, to compare a perturbed run with the calm one: its state and
    Ready reason, its label, finalizers and children, and how many attempts its record counts."""
    status = model.get("status") or {}
    ready = next((item for item in status.get("conditions") or [] if item.get("type") == "Ready"), {})
    uid = model["metadata"]["uid"]
    children = sorted(obj["kind"] for obj in cluster.objects.values() if (controller_of(obj) or {}).get("uid") == uid)
    jobs = sorted((obj["metadata"].get("labels") or {}).get(ATTEMPT_LABEL, "") for obj in cluster.objects.values()
                  if obj["kind"] == "Job" and (controller_of(obj) or {}).get("uid") == uid)
    return (model_ref(model), status.get("state"), ready.get("reason"), labelled_pvc(model),
            sorted(model["metadata"].get("finalizers") or []), children, jobs,
            (status.get("metadataExtraction") or {}).get("attempts"))
