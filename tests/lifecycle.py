"""Lifecycle scenarios: the hook driven by the simulated Metacontroller through a model's life.

Each scenario builds a cluster (namespace ``models``, a PVC binder, the Job and TTL
controllers, the agent), installs the shipped
CompositeControllers with the hook, plays its story on the simulator's clock and returns
what it cost: hook calls, child creates and deletes, status writes. ``python -m
tests.lifecycle`` prints the table, with and without ``parentResource.ignoreStatusChanges``.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from hooks.http.app import create_app
from hooks.settings import Settings
from tests.metacontroller import MANIFESTS, Simulator, core_hook, flask_hook, manifests
from tests.metacontroller.kubernetes import Agent, JobController, PVCBinder, Run, TTLController
from tests.metacontroller.ome import OMEManager
from tests.metacontroller.webhook import Hook

SETTINGS = Settings()
REPO = MANIFESTS.parent
NAMESPACE = "models"
PVC = "model-storage"
KINDS = ("BaseModel", "ClusterBaseModel")
COLUMNS = ("sync", "finalize", "customize", "create", "delete", "status write")


@dataclass
class World:
    """The simulator and its stand-ins, with a record of what the model went through."""

    kind: str
    sim: Simulator
    binder: PVCBinder
    agent: Agent
    ome: OMEManager | None = None
    jobs_created: list[float] = field(default_factory=list)
    transitions: list[tuple[float, str, str]] = field(default_factory=list)

    def uri(self, sub_path: str = "llama-3.1-8b") -> str:
        """The PVC URI in the form each kind needs (a ClusterBaseModel must name the namespace)."""
        where = f"{NAMESPACE}:{PVC}" if self.kind == "ClusterBaseModel" else PVC
        return f"pvc://{where}/{sub_path}"

    def create_model(self, uri: str | None = None) -> None:
        metadata: dict[str, Any] = {"name": "llama"}
        if self.kind == "BaseModel":
            metadata["namespace"] = NAMESPACE
        self.sim.cluster.create({"apiVersion": "ome.io/v1beta1", "kind": self.kind, "metadata": metadata,
                                 "spec": {"storage": {"storageUri": uri or self.uri()}}})

    def model(self) -> dict[str, Any] | None:
        return self.sim.cluster.find("ome.io/v1beta1", self.kind, NAMESPACE if self.kind == "BaseModel" else None, "llama")

    def set_uri(self, uri: str) -> None:
        model = self.model()
        assert model is not None
        model["spec"]["storage"]["storageUri"] = uri
        self.sim.cluster.update(model)

    def delete_model(self) -> None:
        self.sim.cluster.delete("ome.io/v1beta1", self.kind, NAMESPACE if self.kind == "BaseModel" else None, "llama")

    def state(self) -> tuple[str, str]:
        """The state and the Ready condition's reason ("" for a status without conditions)."""
        model = self.model()
        assert model is not None
        status = model.get("status", {})
        ready = next((item for item in status.get("conditions", []) if item["type"] == "Ready"), {})
        return status["state"], ready.get("reason", "")

    def jobs(self) -> list[dict[str, Any]]:
        return self.sim.cluster.list("batch/v1", "Job", NAMESPACE)

    def _watch(self, origin: datetime) -> None:
        def record(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            seconds = (self.sim.clock.now - origin).total_seconds()
            if event == "ADDED" and new is not None and new["kind"] == "Job":
                self.jobs_created.append(seconds)
            if new is not None and new["kind"] == self.kind and new.get("status") != (old or {}).get("status"):
                ready: dict[str, Any] = next(
                    (item for item in new["status"].get("conditions", []) if item["type"] == "Ready"), {})
                self.transitions.append((seconds, new["status"].get("state", ""), ready.get("reason", "")))
        self.sim.cluster.watchers.append(record)


def world(kind: str, plan: list[Run] | None = None, *, ignore_status_changes: bool | None = None,
          resync_period: int | None = None, pvc: str | None = "Bound", hook: Callable[[Simulator], Hook] | None = None,
          ome: bool = False, fence: bool = False) -> World:
    """A cluster with the PVC (``Bound``, ``Pending`` or ``None`` for none yet) and the controllers;
    with ``ome`` OME's manager runs beside them, and with ``fence`` the API server holds the
    shipped fence (``metacontroller/fence.yaml``)."""
    sim = Simulator()
    sim.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    binder = PVCBinder(sim, bind_after=None)
    agent = Agent(sim)
    JobController(sim, plan, agent=agent)
    TTLController(sim)
    chosen = hook(sim) if hook else core_hook(SETTINGS, sim.clock)
    if pvc is not None:
        binder.create(NAMESPACE, PVC, phase="Pending")
        if pvc == "Bound":
            binder.bind(NAMESPACE, PVC)
    if fence:
        for manifest in manifests("fence.yaml"):
            sim.cluster.create(manifest)
    built = World(kind, sim, binder, agent, OMEManager(sim) if ome else None)
    built._watch(sim.clock.now)
    for manifest in manifests("label-keeper.yaml"):
        sim.add_controller(manifest, chosen)
    for manifest in manifests("compositecontrollers.yaml"):
        manifest = copy.deepcopy(manifest)
        if ignore_status_changes is not None:
            manifest["spec"]["parentResource"]["ignoreStatusChanges"] = ignore_status_changes
        if resync_period is not None:
            manifest["spec"]["resyncPeriodSeconds"] = resync_period
        sim.add_controller(manifest, chosen)
    sim.settle()
    return built


def ready_world(kind: str, **options: Any) -> World:
    """A model that went the happy way to Ready, its Job finished and not yet removed."""
    built = world(kind, **options)
    built.create_model()
    built.sim.advance(600)
    return built


# --- the scenarios -------------------------------------------------------------------------
# Each returns the world after its story and the counts it cost (from ``since``).

@dataclass
class Outcome:
    world: World
    counts: dict[str, int]


def measured(built: World, *steps: Callable[[], Any]) -> Outcome:
    """Run the story's steps in order and count what they cost."""
    before = dict(built.sim.counts)
    for step in steps:
        step()
    return Outcome(built, {key: built.sim.counts[key] - before.get(key, 0) for key in built.sim.counts})


def happy_path(kind: str, **options: Any) -> Outcome:
    built = world(kind, **options)
    return measured(built, built.create_model, lambda: built.sim.advance(600))


def steady_state(kind: str, **options: Any) -> Outcome:
    """100 resyncs of a Ready model whose Job is gone (``resyncPeriodSeconds: 60``)."""
    built = ready_world(kind, resync_period=60, **options)
    built.sim.advance(3600)
    return measured(built, lambda: built.sim.advance(100 * 60))


def ttl_removes_job(kind: str, **options: Any) -> Outcome:
    built = ready_world(kind, **options)
    return measured(built, lambda: built.sim.advance(3600))


def fails_twice_then_succeeds(kind: str, **options: Any) -> Outcome:
    built = world(kind, [Run("fail", 20), Run("fail", 20), Run("succeed", 30)], **options)
    return measured(built, built.create_model, lambda: built.sim.advance(1200))


def deadline_exceeded(kind: str, **options: Any) -> Outcome:
    built = world(kind, [Run("hang")], **options)
    return measured(built, built.create_model, lambda: built.sim.advance(320))


def pvc_late_binds_then_deleted(kind: str, **options: Any) -> Outcome:
    """Model first, PVC 30 s later (Pending), bound at 60 s, deleted at 900 s."""
    built = world(kind, pvc=None, **options)

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


def agent_fills_spec(kind: str, **options: Any) -> Outcome:
    """After the agent's spec write (generation 2), a day passes: no Job again, ever."""
    built = ready_world(kind, **options)
    return measured(built, lambda: built.sim.advance(86400))


def uri_changed_mid_job(kind: str, **options: Any) -> Outcome:
    built = world(kind, [Run("succeed", 120), Run("succeed", 30)], **options)

    def story() -> None:
        built.create_model()
        built.sim.advance(30)
        built.set_uri(built.uri("llama-3.1-8b-instruct"))
        built.sim.advance(600)
    return measured(built, story)


def pvc_to_hf(kind: str, **options: Any) -> Outcome:
    built = ready_world(kind, **options)

    def story() -> None:
        built.set_uri("hf://meta-llama/Llama-3.1-8B")
        built.sim.advance(60)
    return measured(built, story)


def hf_to_pvc(kind: str, **options: Any) -> Outcome:
    built = world(kind, **options)

    def story() -> None:
        built.create_model("hf://meta-llama/Llama-3.1-8B")
        built.sim.advance(40)
        built.set_uri(built.uri())
        built.sim.advance(600)
    return measured(built, story)


def delete_pvc_model(kind: str, **options: Any) -> Outcome:
    built = ready_world(kind, **options)
    return measured(built, built.delete_model, lambda: built.sim.advance(60))


def hook_restart_mid_job(kind: str, **options: Any) -> Outcome:
    """The hook through Flask; 15 s into the Job every replica is replaced by a new app."""
    built = world(kind, hook=lambda sim: flask_hook(create_app(SETTINGS, clock=sim.clock)), **options)

    def story() -> None:
        built.create_model()
        built.sim.advance(15)
        fresh = flask_hook(create_app(SETTINGS, clock=built.sim.clock))
        for controller in built.sim.controllers:
            controller.use_hook(fresh)
        built.sim.advance(585)
    return measured(built, story)


SCENARIOS: dict[str, Callable[..., Outcome]] = {
    "happy path to Ready": happy_path,
    "100 resyncs, steady state": steady_state,
    "TTL removes the finished Job": ttl_removes_job,
    "Job fails twice, then succeeds": fails_twice_then_succeeds,
    "Job deadline exceeded": deadline_exceeded,
    "PVC late, bound later, deleted": pvc_late_binds_then_deleted,
    "agent fills the spec, a day passes": agent_fills_spec,
    "URI changed mid-Job": uri_changed_mid_job,
    "PVC -> hf://": pvc_to_hf,
    "hf:// -> PVC": hf_to_pvc,
    "deletion, PVC flow": delete_pvc_model,
    "hook restart mid-Job": hook_restart_mid_job,
}


def row(outcome: Outcome) -> tuple[int, ...]:
    return tuple(outcome.counts.get(column, 0) for column in COLUMNS)


def hook_calls(outcome: Outcome) -> int:
    return outcome.counts.get("sync", 0) + outcome.counts.get("finalize", 0)


def run_scenario(name: str, kind: str, ignoring: bool) -> Outcome:
    """One story, with the shipped controllers or without ``ignoreStatusChanges``."""
    return SCENARIOS[name](kind, **({} if ignoring else {"ignore_status_changes": False}))


def table(outcome_of: Callable[[str, str, bool], Outcome] = run_scenario) -> list[str]:
    """The table in the README: counts with the shipped controllers, and the hook calls
    the same story costs without ``ignoreStatusChanges``."""
    header = ["scenario", "kind", *COLUMNS, "sync + finalize without ignoreStatusChanges"]
    lines = [header, ["---"] * len(header)]
    for name in SCENARIOS:
        for kind in KINDS:
            shipped, without = outcome_of(name, kind, True), outcome_of(name, kind, False)
            lines.append([name, kind, *map(str, row(shipped)), str(hook_calls(without))])
    return ["| " + " | ".join(line) + " |" for line in lines]


def main() -> int:
    for line in table():
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
