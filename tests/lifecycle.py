"""Lifecycle scenarios: models' lives in a simulated cluster where OME runs beside the hook.

Every world holds the simulated Metacontroller with the shipped label keeper and
CompositeControllers calling the hook, OME's manager (its BaseModel and ClusterBaseModel
reconcilers, ``tests/metacontroller/ome.py``) behind the shipped status fence, two nodes
with OME's model agents, the Job, TTL and PVC controllers and the metadata agent. A
scenario plays its story on the simulator's clock and returns what the models went
through and what it cost. ``python -m tests.lifecycle`` prints the costs beside their
budgets (``BUDGETS``, which ``tests/simulation/test_lifecycle.py`` holds every run to).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hooks.http.app import create_app
from hooks.settings import Settings
from tests.extras import needs_test_extra

with needs_test_extra("python -m tests.lifecycle"):
    from tests.metacontroller import MANIFESTS, Simulator, core_hook, flask_hook, manifests
    from tests.metacontroller.cluster import ome_status_schema, prune
    from tests.metacontroller.kubernetes import Agent, JobController, PVCBinder, Run, TTLController
    from tests.metacontroller.ome import NodeAgents, OMEManager
    from tests.metacontroller.perturbation import Perturbation
    from tests.metacontroller.simulator import V4_16, V4_17_2, MetacontrollerVersion
    from tests.metacontroller.webhook import Hook

SETTINGS = Settings()
REPO = MANIFESTS.parent
NAMESPACE = "models"
PVC = "model-storage"
PVC_MODEL = "llama"
HF_MODEL = "mistral"
HF_URI = "hf://mistralai/Mistral-7B-Instruct-v0.3"
NODES = ("node-a", "node-b")
KINDS = ("BaseModel", "ClusterBaseModel")
DAY = 86400.0
COLUMNS = ("sync", "finalize", "customize", "label", "create", "delete", "update", "status write", "label write",
           "OME status write", "OME refused")


@dataclass
class World:
    """The simulator and its stand-ins, with what the models went through: for each model,
    (seconds, state, Ready reason, whether the status holds the hook's conditions) at every
    change of its status; and when each Job was created."""

    kind: str
    sim: Simulator
    binder: PVCBinder
    agent: Agent
    ome: OMEManager
    nodes: NodeAgents
    hook: Hook
    jobs_created: list[float] = field(default_factory=list)
    transitions: dict[str, list[tuple[float, str, str, bool]]] = field(default_factory=dict)

    @property
    def namespace(self) -> str | None:
        return NAMESPACE if self.kind == "BaseModel" else None

    def uri(self, sub_path: str = "llama-3.1-8b") -> str:
        """The PVC URI in the form each kind needs (a ClusterBaseModel must name the namespace)."""
        where = f"{NAMESPACE}:{PVC}" if self.kind == "ClusterBaseModel" else PVC
        return f"pvc://{where}/{sub_path}"

    def create_model(self, uri: str | None = None, name: str = PVC_MODEL) -> None:
        """A model as the samples write one: its format named, so OME's first write of it (its
        finalizer) leaves the spec as it is and changes no generation."""
        metadata: dict[str, Any] = {"name": name, **({"namespace": NAMESPACE} if self.namespace else {})}
        self.sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": self.kind, "metadata": metadata,
                                 "spec": {"modelFormat": {"name": "safetensors"}, "storage": {"storageUri": uri or self.uri()}}})

    def model(self, name: str = PVC_MODEL) -> dict[str, Any] | None:
        return self.sim.cluster.find("ome.io/v1beta1", self.kind, self.namespace, name)

    def set_uri(self, uri: str, name: str = PVC_MODEL) -> None:
        model = self.model(name)
        assert model is not None
        model["spec"]["storage"]["storageUri"] = uri
        self.sim.cluster.update(model)

    def touch(self, name: str = PVC_MODEL) -> None:
        """Any annotation, which calls the model's controllers as docs/install.md says."""
        model = self.model(name)
        assert model is not None
        model["metadata"].setdefault("annotations", {})["touched-at"] = str(self.sim.clock.now.timestamp())
        self.sim.cluster.update(model)

    def delete_model(self, name: str = PVC_MODEL) -> None:
        self.sim.cluster.delete("ome.io/v1beta1", self.kind, self.namespace, name)

    def report(self, name: str, status: str) -> None:
        """Every node's model agent reports the model (``Deleted`` removes its entry)."""
        for node in NODES:
            self.nodes.report(node, self.namespace, name, status)

    def state(self, name: str = PVC_MODEL) -> tuple[str, str]:
        """The state and the Ready condition's reason ("" for a status without conditions)."""
        model = self.model(name)
        assert model is not None
        status = model.get("status", {})
        ready = next((item for item in status.get("conditions", []) if item["type"] == "Ready"), {})
        return status["state"], ready.get("reason", "")

    def jobs(self) -> list[dict[str, Any]]:
        return self.sim.cluster.list("batch/v1", "Job", NAMESPACE)

    def owned(self) -> list[str]:
        """The kinds of every object the hook's models own (its children, any namespace)."""
        return sorted(obj["kind"] for (api, kind, _, _), obj in self.sim.cluster.objects.items()
                      if kind in ("Job", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
                      or (kind == "ExtractionRecord" and obj["metadata"].get("namespace") == NAMESPACE))

    def install_ome_crds(self) -> None:
        """OME's ``ome-crd`` chart applies its own CRDs again: the API server prunes every
        status field OME's schema does not name, from stored objects and later writes."""
        schema = ome_status_schema(self.kind)
        self.sim.cluster.status_schemas[self.kind] = schema
        for key, obj in self.sim.cluster.objects.items():
            if key[1] == self.kind and "status" in obj:
                obj["status"] = prune(schema, obj["status"])

    def install_hook(self, resync_period: int | None = None) -> None:
        """The fence and the hook's controllers, as ``kubectl apply -k metacontroller/``
        creates them (with a ``resyncPeriodSeconds`` where given)."""
        for manifest in manifests("fence.yaml"):
            self.sim.cluster.create(manifest)
        for manifest in manifests("label-keeper.yaml") + manifests("compositecontrollers.yaml"):
            if resync_period is not None:
                manifest["spec"]["resyncPeriodSeconds"] = resync_period
            self.sim.add_controller(manifest, self.hook)

    def _watch(self) -> None:
        origin = self.sim.clock.now

        def record(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            seconds = (self.sim.clock.now - origin).total_seconds()
            if event == "ADDED" and new is not None and new["kind"] == "Job":
                self.jobs_created.append(seconds)
            if new is not None and new["kind"] == self.kind and new.get("status") != (old or {}).get("status"):
                conditions = new["status"].get("conditions", [])
                ready = next((item for item in conditions if item["type"] == "Ready"), {})
                self.transitions.setdefault(new["metadata"]["name"], []).append(
                    (seconds, new["status"].get("state", ""), ready.get("reason", ""), bool(conditions)))
        self.sim.cluster.watchers.append(record)


def world(kind: str, plan: list[Run] | None = None, *, pvc: str | None = "Bound", installed: bool = True,
          resync_period: int | None = None, hook: Callable[[Simulator], Hook] | None = None,
          version: MetacontrollerVersion = V4_16, perturbation: Perturbation | None = None) -> World:
    """A cluster with the PVC (``Bound``, ``Pending`` or ``None`` for none yet), OME, and,
    unless not ``installed`` yet, the hook: its controllers and the fence; Metacontroller
    as ``version`` runs it, its view changed by ``perturbation``."""
    sim = Simulator(version=version, perturbation=perturbation)
    sim.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    binder = PVCBinder(sim, bind_after=None)
    agent = Agent(sim)
    JobController(sim, plan, agent=agent)
    TTLController(sim)
    nodes = NodeAgents(sim)
    for node in NODES:
        nodes.add_node(node)
    if pvc is not None:
        binder.create(NAMESPACE, PVC, phase="Pending")
        if pvc == "Bound":
            binder.bind(NAMESPACE, PVC)
    built = World(kind, sim, binder, agent, OMEManager(sim), nodes, hook(sim) if hook else core_hook(SETTINGS, sim.clock))
    built._watch()
    if installed:
        built.install_hook(resync_period)
    sim.settle()
    return built


def ready_world(kind: str, **options: Any) -> World:
    """A model that went the happy way to Ready, its Job finished and not yet removed."""
    built = world(kind, **options)
    built.create_model()
    built.sim.advance(600)
    return built


@dataclass
class Outcome:
    """The world after the story, and what the story cost (``COLUMNS``)."""

    world: World
    counts: dict[str, int]


def measured(built: World, *steps: Callable[[], Any]) -> Outcome:
    """Run the story's steps in order and count what they cost: the CompositeControllers'
    hook calls, child creates, deletes and in-place updates and status writes; the label
    keeper's calls and label writes; OME's status writes that went through and those the
    fence refused."""
    sim, ome = built.sim, built.ome
    sim.perturbation.story_begins()
    before = (Counter(sim.counts), Counter(sim.decorator_counts), Counter(ome.counts))
    for step in steps:
        step()
    composite, keeper, manager = (now - then for now, then in zip((sim.counts, sim.decorator_counts, ome.counts), before, strict=True))
    counts = {key: composite[key] for key in ("sync", "finalize", "customize", "create", "delete", "update", "status write")}
    counts |= {"label": keeper["sync"], "label write": keeper["parent write"],
               "OME status write": manager["status write"] - manager["status write refused"],
               "OME refused": manager["status write refused"]}
    return Outcome(built, counts)


# --- the scenarios ---------------------------------------------------------------------------

def happy_path(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, perturbation=perturbation)
    return measured(built, built.create_model, lambda: built.sim.advance(600))


def a_day_after_ready(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """Ready, then a day with OME beside: its status writes refused, backing off."""
    built = world(kind, perturbation=perturbation)
    return measured(built, built.create_model, lambda: built.sim.advance(DAY))


def steady_state(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """100 resyncs of a Ready model whose Job is gone (``resyncPeriodSeconds: 60``; the
    releases before v4.17.2 drop them)."""
    built = ready_world(kind, resync_period=60, version=V4_17_2, perturbation=perturbation)
    built.sim.advance(3600)
    return measured(built, lambda: built.sim.advance(100 * 60))


def ttl_removes_job(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = ready_world(kind, perturbation=perturbation)
    return measured(built, lambda: built.sim.advance(3600))


def fails_twice_then_succeeds(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, [Run("fail", 20), Run("fail", 20), Run("succeed", 30)], perturbation=perturbation)
    return measured(built, built.create_model, lambda: built.sim.advance(1200))


def deadline_exceeded(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, [Run("hang")], perturbation=perturbation)
    return measured(built, built.create_model, lambda: built.sim.advance(320))


def pvc_late_binds_then_deleted(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """Model first, PVC 30 s later (Pending), bound at 60 s, deleted at 900 s."""
    built = world(kind, pvc=None, perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(30)
        built.binder.create(NAMESPACE, PVC, phase="Pending")
        built.sim.advance(30)
        built.binder.bind(NAMESPACE, PVC)
        built.sim.advance(840)
        built.sim.cluster.delete("v1", "PersistentVolumeClaim", NAMESPACE, PVC)
        built.sim.advance(60)
    return measured(built, story)


def uri_changed_mid_job(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, [Run("succeed", 120), Run("succeed", 30)], perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(30)
        built.set_uri(built.uri("llama-3.1-8b-instruct"))
        built.sim.advance(600)
    return measured(built, story)


def hf_ready_by_ome(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """An hf:// model the nodes' agents report Ready: OME's alone, the hook never called."""
    built = world(kind, perturbation=perturbation)

    def story() -> None:
        built.create_model(HF_URI, HF_MODEL)
        built.sim.advance(20)
        built.report(HF_MODEL, "Ready")
        built.sim.advance(600)
    return measured(built, story)


def hf_to_pvc(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, perturbation=perturbation)

    def story() -> None:
        built.create_model(HF_URI)
        built.sim.advance(20)
        built.report(PVC_MODEL, "Ready")
        built.sim.advance(20)
        built.set_uri(built.uri())
        built.sim.advance(600)
    return measured(built, story)


def pvc_to_hf_mid_job(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """The URI leaves pvc:// while the Job runs; no node ever reports the new storage
    (v0.1.5's agents start no download after such a change), for an hour."""
    built = world(kind, [Run("succeed", 120)], perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(30)
        built.set_uri(HF_URI)
        built.sim.advance(3600)
    return measured(built, story)


def pvc_to_hf_then_nodes_report(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """A Ready pvc:// model moves to hf://; later the nodes report it Ready."""
    built = ready_world(kind, perturbation=perturbation)

    def story() -> None:
        built.set_uri(HF_URI)
        built.sim.advance(60)
        built.report(PVC_MODEL, "Ready")
        built.sim.advance(600)
    return measured(built, story)


def delete_pvc_model(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = ready_world(kind, perturbation=perturbation)
    return measured(built, built.delete_model, lambda: built.sim.advance(60))


def delete_hf_model(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """OME's model deleted: OME waits for the nodes' entries to go, the hook never called."""
    built = world(kind, perturbation=perturbation)
    built.create_model(HF_URI, HF_MODEL)
    built.report(HF_MODEL, "Ready")
    built.sim.advance(60)

    def story() -> None:
        built.delete_model(HF_MODEL)
        built.sim.advance(40)
        built.report(HF_MODEL, "Deleted")
        built.sim.advance(60)
    return measured(built, story)


def install_over_existing_models(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """A pvc:// model OME left In_Transit and an hf:// model OME made Ready, both there an
    hour before the hook is installed."""
    built = world(kind, installed=False, perturbation=perturbation)
    built.create_model()
    built.create_model(HF_URI, HF_MODEL)
    built.report(HF_MODEL, "Ready")
    built.sim.advance(3600)
    return measured(built, built.install_hook, lambda: built.sim.advance(600))


def ome_crds_after_a_failure(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """Extraction fails every time; after the first failure OME's chart applies its own
    CRDs, which prune the status to OME's fields. A day passes."""
    built = world(kind, [Run("fail", 20)] * 10, perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(100)
        built.install_ome_crds()
        built.sim.advance(DAY)
    return measured(built, story)


def metacontroller_restart_mid_job(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    built = world(kind, perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(15)
        built.sim.restart_metacontroller()
        built.sim.advance(585)
    return measured(built, story)


def hook_restart_mid_job(kind: str, perturbation: Perturbation | None = None) -> Outcome:
    """The hook through Flask; 15 s into the Job every replica is replaced by a new app."""
    built = world(kind, hook=lambda sim: flask_hook(create_app(SETTINGS, clock=sim.clock)), perturbation=perturbation)

    def story() -> None:
        built.create_model()
        built.sim.advance(15)
        fresh = flask_hook(create_app(SETTINGS, clock=built.sim.clock))
        for controller in built.sim.controllers:
            controller.use_hook(fresh)
        built.sim.advance(585)
    return measured(built, story)


Scenario = Callable[[str, "Perturbation | None"], Outcome]
"""A story for one kind of model, in a world whose view ``perturbation`` may change."""
SCENARIOS: dict[str, Scenario] = {
    "happy path to Ready": happy_path,
    "a day after Ready": a_day_after_ready,
    "100 resyncs, steady state": steady_state,
    "TTL removes the finished Job": ttl_removes_job,
    "Job fails twice, then succeeds": fails_twice_then_succeeds,
    "Job deadline exceeded": deadline_exceeded,
    "PVC late, bound later, deleted": pvc_late_binds_then_deleted,
    "URI changed mid-Job": uri_changed_mid_job,
    "hf:// model made Ready by OME": hf_ready_by_ome,
    "hf:// -> pvc://": hf_to_pvc,
    "pvc:// -> hf:// mid-Job": pvc_to_hf_mid_job,
    "pvc:// -> hf://, then the nodes report it": pvc_to_hf_then_nodes_report,
    "deletion of a pvc:// model": delete_pvc_model,
    "deletion of an hf:// model": delete_hf_model,
    "install over existing models": install_over_existing_models,
    "OME's CRDs after a failed extraction, a day": ome_crds_after_a_failure,
    "Metacontroller restart mid-Job": metacontroller_restart_mid_job,
    "hook restart mid-Job": hook_restart_mid_job,
}


def table(outcomes: dict[tuple[str, str], Outcome]) -> list[str]:
    """What each story cost, both kinds on one row where they cost the same."""
    lines = ["| scenario | kind | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    for name in SCENARIOS:
        rows = {kind: tuple(outcomes[(name, kind)].counts[column] for column in COLUMNS) for kind in KINDS}
        kinds = ["both"] if len(set(rows.values())) == 1 else list(KINDS)
        for kind in kinds:
            lines.append(f"| {name} | {kind} | " + " | ".join(map(str, rows[KINDS[0] if kind == 'both' else kind])) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the cost table; the hook's own log lines (one per call answered through its HTTP
    shell) only when asked, since they would bury the table."""
    parser = argparse.ArgumentParser(prog="python -m tests.lifecycle", description="What each lifecycle scenario costs.")
    parser.add_argument("--log", action="store_true", help="also write the hook's JSON log lines to stderr")
    quiet = contextlib.nullcontext() if parser.parse_args(argv).log else contextlib.redirect_stderr(io.StringIO())
    with quiet:
        outcomes = {(name, kind): scenario(kind, None) for name, scenario in SCENARIOS.items() for kind in KINDS}
    for line in table(outcomes):
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
