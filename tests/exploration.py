"""Every lifecycle scenario, both kinds, perturbed as Sieve perturbs a controller's view.

Sieve (OSDI 2022, "Automatic Reliability Testing for Cluster Management Controllers")
found 46 bugs in ten controllers by changing what a controller sees in three ways. Here,
deterministically, over every scenario of ``tests/lifecycle.py``:

- **unobserved**: at every write a controller makes after reading what it writes
  (Metacontroller's label keeper and CompositeControllers, OME's manager, the metadata
  agent), another writer of the same model updates it first: OME's manager reconciles it,
  the other Metacontroller controller syncs it, or a user annotates it (and, at a write of
  the record, a user annotates that). Their updates reach every watcher, the
  event filters that drop some of them included, and the write may meet a Conflict.
- **stale**: at every sync, each informer the sync reads (the parent's; the children's and
  the related objects' for a CompositeController) lags by one or two of the changes that
  alter what the hook is shown, no further back than what that controller had already
  seen; and a child's or related object's informer also one or two such changes behind
  that (it listed again from a lagging API server: Sieve's stale state). The changes it
  missed reach its handlers after the sync.
- **intermediate**: Metacontroller stops before each of its writes (between two writes of
  one sync: children, finalizer, status) and starts again with empty caches and queues;
  or the hook does not answer one call.

The calm run of a scenario (``Recording``) lists every such point; the perturbed runs
replay the scenario once per point kept, one perturbation each. Points are pruned as
Sieve prunes: two points of one scenario with the same signature (who writes what, in
which state of the model, perturbed how) are explored once. ``tests/invariants.py``
checks safety at every step; after the story, ``QUIET_SECONDS`` more of simulated time,
then liveness, and each model must end as it did in the calm run.

``python -m tests.exploration`` prints what it explored and any violation.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tests import lifecycle
from tests.invariants import MODEL_KINDS, Checker, is_pvc, labelled_pvc, summary
from tests.metacontroller.cluster import Obj, ref
from tests.metacontroller.composite import CompositeController
from tests.metacontroller.controller import Controller, TypeKey
from tests.metacontroller.decorator import DecoratorController
from tests.metacontroller.identities import KUBECTL, METACONTROLLER, OME_MANAGER
from tests.metacontroller.ome import FINALIZERS, ModelReconciler
from tests.metacontroller.perturbation import Perturbation, Stopped
from tests.metacontroller.selection import controller_of
from tests.metacontroller.simulator import Simulator
from tests.metacontroller.webhook import HookDown

QUIET_SECONDS = 600.0
"""Simulated time after the story before liveness is judged: the issue's ten minutes."""
LAGS = (1, 2)
TRAVEL_WINDOW = 20
"""How many of an informer's latest changes a view behind what it had seen may go back over."""
CLASSES = ("unobserved", "stale", "intermediate")
OME = "OME's manager"
KEEPER = "the label keeper"
COMPOSITE = "the CompositeController"
USER = "a user"
TOUCHED = "example.com/touched"
STORY_WRITERS = (KUBECTL,)
"""The story's own writes (a user's): input to the controllers, not a controller's read and write."""


def model_state(model: Obj | None) -> tuple[Any, ...]:
    """The facts about a model that decide what its controllers do next."""
    if model is None:
        return ("absent",)
    finalizers = model["metadata"].get("finalizers") or []
    return (model["kind"], is_pvc(model), labelled_pvc(model), FINALIZERS[model["kind"]] in finalizers,
            any(item.startswith("metacontroller.io/") for item in finalizers),
            bool(model["metadata"].get("deletionTimestamp")), (model.get("status") or {}).get("state"))


@dataclass(frozen=True)
class Point:
    """One perturbation of one run: its class, the n-th write, view or hook call it acts
    at, how it acts there, and the signature that prunes its likes."""

    cls: str
    index: int
    action: Any
    signature: tuple[Any, ...]
    description: str


class Explored(Perturbation):
    """A run under watch: safety checked at every step, the writes, views and calls counted."""

    def __init__(self) -> None:
        self.checker = Checker()
        self.sim: Simulator | None = None
        self.writes = 0
        self.views = 0
        self.calls = 0
        self.fired = False

    def attach(self, sim: Simulator) -> None:
        self.sim = sim
        self.checker.attach(sim)

    def before_write(self, user: str, verb: str, obj: Obj) -> None:
        """The perturbation acts first; the write is judged as it then lands."""
        self.writes += 1
        if not self.fired:
            self.at_write(self.writes, user, verb, obj)
        self.checker.before_write(user, verb, obj)

    def view(self, controller: Controller, parent: Obj, type_key: TypeKey) -> int | None:
        self.views += 1
        return None if self.fired else self.at_view(self.views, controller, parent, type_key)

    def before_call(self, controller: Controller, parent: Obj, hook: str) -> None:
        self.calls += 1
        if not self.fired:
            self.at_call(self.calls, controller, parent, hook)

    def answered(self, controller: Controller, parent: Obj, answer: dict[str, Any]) -> None:
        if isinstance(controller, CompositeController):
            self.checker.answered(parent, answer)

    def at_write(self, index: int, user: str, verb: str, obj: Obj) -> None:
        """The ``index``-th write arrives."""

    def at_view(self, index: int, controller: Controller, parent: Obj, type_key: TypeKey) -> int | None:
        """The ``index``-th informer read."""
        return None

    def at_call(self, index: int, controller: Controller, parent: Obj, hook: str) -> None:
        """The ``index``-th hook call."""

    # --- what the perturbations use ---------------------------------------------------------

    @property
    def simulator(self) -> Simulator:
        assert self.sim is not None
        return self.sim

    def actor(self, user: str) -> str:
        """Who writes: the controller or worker at work, else the writer's identity."""
        active = self.simulator.active
        if isinstance(active, Controller):
            return active.name
        if isinstance(active, ModelReconciler):
            return f"OME {active.kind} reconciler"
        return user

    def model_of(self, obj: Obj) -> Obj | None:
        """The model ``obj`` is, or whose child it is, as stored now."""
        if obj["kind"] in MODEL_KINDS:
            return self.simulator.cluster.find(*ref(obj))
        owner = controller_of(obj)
        if owner is None or owner.get("kind") not in MODEL_KINDS:
            return None
        namespace = obj["metadata"].get("namespace") if owner["kind"] == "BaseModel" else None
        return self.simulator.cluster.find(owner["apiVersion"], owner["kind"], namespace, owner["name"])

    def running(self, interferer: str, model: Obj) -> Controller | ModelReconciler | None:
        """The controller or reconciler ``interferer`` names for ``model``, if it runs."""
        sim = self.simulator
        if interferer == OME:
            return next((worker for worker in sim.workers
                         if isinstance(worker, ModelReconciler) and worker.kind == model["kind"]), None)
        kind = DecoratorController if interferer == KEEPER else CompositeController
        return next((item for item in sim.controllers if isinstance(item, kind)
                     and (not isinstance(item, CompositeController) or item.parent_resource.kind == model["kind"])), None)

    def interfere(self, interferer: str, model: Obj, obj: Obj) -> None:
        """``interferer`` updates ``model`` (a user: ``obj``) now, as it would have a moment later."""
        if interferer == USER:
            touched = self.simulator.cluster.find(*ref(obj))
            if touched is not None:
                annotations = touched["metadata"].setdefault("annotations", {})
                annotations[TOUCHED] = str(int(annotations.get(TOUCHED, "0")) + 1)
                self.simulator.cluster.update(touched, user=KUBECTL)
            return
        worker = self.running(interferer, model)
        if isinstance(worker, ModelReconciler):
            worker.process_now(model["metadata"].get("namespace"), model["metadata"]["name"])
        elif worker is not None:
            worker.process_now(model)


class Recording(Explored):
    """The calm run: nothing perturbed, every point where a perturbation could act noted."""

    def __init__(self) -> None:
        super().__init__()
        self.points: list[Point] = []
        self.writes_in_sync: Counter[str] = Counter()
        self.story_from = {"write": 0, "view": 0, "call": 0}

    def story_begins(self) -> None:
        """Points before the story are the setup's, which an earlier scenario's story explores."""
        self.story_from = {"write": self.writes + 1, "view": self.views + 1, "call": self.calls + 1}

    def at_write(self, index: int, user: str, verb: str, obj: Obj) -> None:
        actor = self.actor(user)
        model = self.model_of(obj)
        state = model_state(model)
        what = (actor, verb, obj["kind"])
        if user in STORY_WRITERS:
            return
        if model is not None and obj["kind"] in MODEL_KINDS:
            for interferer in interferers(actor, user):
                if interferer != USER and self.running(interferer, model) is None:
                    continue
                self.note("unobserved", index, interferer, (*what, interferer, state),
                          f"{interferer} updates the model before {actor} can {verb} it")
        elif model is not None and obj["kind"] == "ExtractionRecord" and user == METACONTROLLER:
            self.note("unobserved", index, USER, (*what, USER, state), f"{USER} edits the record before {actor} can {verb} it")
        if user == METACONTROLLER:
            self.writes_in_sync[actor] += 1
            self.note("intermediate", index, "stop", (*what, self.writes_in_sync[actor], state),
                      f"Metacontroller stops before {actor} can {verb} {obj['kind']} {obj['metadata']['name']}")

    def at_view(self, index: int, controller: Controller, parent: Obj, type_key: TypeKey) -> int | None:
        behind: Counter[bool] = Counter()
        for lag in lags(controller, parent, type_key):
            behind[lag.travelled] += 1
            what = "behind what it had seen" if lag.travelled else "behind"
            self.note("stale", index, lag.sequence, (controller.name, type_key, lag.travelled, behind[lag.travelled],
                                                     lag.missed, model_state(parent)),
                      f"{controller.name}'s {type_key[1]} informer lags {behind[lag.travelled]} {what}: {lag.missed}")
        return None

    def at_call(self, index: int, controller: Controller, parent: Obj, hook: str) -> None:
        self.writes_in_sync[controller.name] = 0
        self.note("intermediate", index, "hook down", (controller.name, hook, "hook down", model_state(parent)),
                  f"the hook does not answer {controller.name}'s {hook} call")

    def note(self, cls: str, index: int, action: Any, signature: tuple[Any, ...], description: str) -> None:
        self.points.append(Point(cls, index, action, (cls, *signature), description))

    def story_points(self) -> list[Point]:
        """The points from the story's beginning on."""
        def counted(point: Point) -> str:
            return "view" if point.cls == "stale" else "call" if point.action == "hook down" else "write"
        return [point for point in self.points if point.index >= self.story_from[counted(point)]]


def interferers(actor: str, user: str) -> list[str]:
    """The other writers of a model: OME's manager, the other Metacontroller controller, a user."""
    others = [OME, KEEPER, COMPOSITE, USER]
    if user == OME_MANAGER:
        others.remove(OME)
    if user == METACONTROLLER:
        others.remove(KEEPER if actor.endswith("storage-label") else COMPOSITE)
    return others


class Lag(NamedTuple):
    """A view older than the present: the change the informer stands at, what it misses,
    and whether that is behind what the controller had already seen."""

    sequence: int
    missed: str
    travelled: bool


def lags(controller: Controller, parent: Obj, type_key: TypeKey) -> list[Lag]:
    """Up to ``max(LAGS)`` views older than the present that change what the hook sees,
    never older than what ``controller`` had seen; and for a child's or related object's
    informer, up to ``max(LAGS)`` more behind that (one that listed again from a lagging
    API server, Sieve's stale state), among its last ``TRAVEL_WINDOW`` changes."""
    cluster = controller.cluster
    floor = controller.caught_up.get(type_key, controller.started_at)
    travels = type_key != (parent["apiVersion"], parent["kind"])
    found: dict[bool, list[Lag]] = {False: [], True: []}
    shown = controller.view_at(parent, type_key, cluster.sequence)
    considered = 0
    for change in reversed(cluster.history):
        if change.key[:2] != type_key:
            continue
        considered += 1
        travelled = change.sequence - 1 < floor
        if travelled and (not travels or considered > TRAVEL_WINDOW or len(found[True]) == max(LAGS)):
            break
        older = controller.view_at(parent, type_key, change.sequence - 1)
        if older != shown:
            found[travelled].append(Lag(change.sequence - 1, difference(older, shown), travelled))
            shown = older
    return found[False][:max(LAGS)] + found[True]


def difference(older: list[Obj], newer: list[Obj]) -> str:
    """What a lagging view misses, in the objects' own terms (for signatures and reports)."""
    before = {obj["metadata"]["name"]: facts(obj) for obj in older}
    after = {obj["metadata"]["name"]: facts(obj) for obj in newer}
    parts = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            parts.append(f"{before.get(name, 'absent')} -> {after.get(name, 'absent')}")
    return "; ".join(parts)


def facts(obj: Obj) -> str:
    """The few fields of an object a hook's decision turns on."""
    status = obj.get("status") or {}
    if obj["kind"] == "Job":
        conditions = sorted(item["type"] for item in status.get("conditions") or [] if item.get("status") == "True")
        return f"Job(active={status.get('active', 0)}, failed={status.get('failed', 0)}, {conditions})"
    if obj["kind"] == "ExtractionRecord":
        spec = obj.get("spec") or {}
        return f"record(attempt {spec.get('attempts')}, {spec.get('result')})"
    if obj["kind"] == "PersistentVolumeClaim":
        return f"PVC({status.get('phase')}{', deleting' if obj['metadata'].get('deletionTimestamp') else ''})"
    if obj["kind"] == "Pod":
        return f"Pod({status.get('phase')})"
    if obj["kind"] in MODEL_KINDS:
        return f"{obj['kind']}{model_state(obj)[1:]}"
    return obj["kind"]


class Perturbed(Explored):
    """One point of a calm run, acted on; everything else as in the calm run."""

    def __init__(self, point: Point) -> None:
        super().__init__()
        self.point = point

    def at_write(self, index: int, user: str, verb: str, obj: Obj) -> None:
        if index != self.point.index or self.point.cls == "stale" or self.point.action == "hook down":
            return
        self.fired = True
        if self.point.action == "stop":
            raise Stopped(self.point.description)
        model = self.model_of(obj)
        assert model is not None
        self.interfere(self.point.action, model, obj)

    def at_view(self, index: int, controller: Controller, parent: Obj, type_key: TypeKey) -> int | None:
        if index != self.point.index or self.point.cls != "stale":
            return None
        self.fired = True
        return int(self.point.action)

    def at_call(self, index: int, controller: Controller, parent: Obj, hook: str) -> None:
        if index == self.point.index and self.point.action == "hook down":
            self.fired = True
            raise HookDown(f"{hook} hook: http error: connection refused")


@dataclass
class Run:
    """A scenario's run: the models' ends, and what broke."""

    ends: list[tuple[Any, ...]]
    violations: list[str]
    fired: bool = True


def run(name: str, kind: str, perturbation: Explored) -> Run:
    """The scenario's story, ``QUIET_SECONDS`` more, then liveness."""
    outcome = lifecycle.SCENARIOS[name](kind, perturbation)
    sim = outcome.world.sim
    sim.advance(QUIET_SECONDS)
    perturbation.checker.check_quiet()
    ends = sorted(summary(model, sim.cluster) for model_kind in MODEL_KINDS
                  for model in sim.cluster.list("ome.io/v1beta1", model_kind))
    return Run(ends, list(perturbation.checker.violations), perturbation.fired)


@dataclass
class Report:
    """What the exploration explored and found."""

    explored: Counter[str] = field(default_factory=Counter)
    pruned: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        total = sum(self.explored.values())
        counts = ", ".join(f"{cls} {self.explored[cls]}" for cls in CLASSES)
        return [f"explored {total} perturbation points ({counts}); {sum(self.pruned.values())} alike pruned",
                *self.violations]


def explore(name: str, kind: str, report: Report) -> None:
    """The calm run, then one run per kept point (on every core), each checked and compared
    with the calm one."""
    calm = Recording()
    reference = run(name, kind, calm)
    report.violations.extend(f"[{name}, {kind}, calm] {violation}" for violation in reference.violations)
    kept: dict[tuple[Any, ...], Point] = {}
    for point in calm.story_points():
        if point.signature in kept:
            report.pruned[point.cls] += 1
        else:
            kept[point.signature] = point
    with ProcessPoolExecutor(max_workers=os.cpu_count(), mp_context=multiprocessing.get_context("fork")) as pool:
        runs = pool.map(run_perturbed, [(name, kind, point) for point in kept.values()])
        for point, perturbed in zip(kept.values(), runs, strict=True):
            report.explored[point.cls] += 1
            where = f"[{name}, {kind}, {point.cls} #{point.index}: {point.description}]"
            report.violations.extend(f"{where} {violation}" for violation in perturbed.violations)
            if not perturbed.fired:
                report.violations.append(f"{where} the perturbation never acted")
            elif perturbed.ends != reference.ends:
                report.violations.append(f"{where} ended {perturbed.ends} instead of {reference.ends}")


def run_perturbed(task: tuple[str, str, Point]) -> Run:
    """One perturbed run, in a worker process."""
    name, kind, point = task
    return run(name, kind, Perturbed(point))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.exploration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=list(lifecycle.SCENARIOS), help="only this scenario (repeatable)")
    parser.add_argument("--kind", action="append", choices=list(lifecycle.KINDS), help="only this kind (repeatable)")
    options = parser.parse_args(argv)
    report = Report()
    for name in options.scenario or lifecycle.SCENARIOS:
        for kind in options.kind or lifecycle.KINDS:
            explore(name, kind, report)
    for line in report.lines():
        sys.stdout.write(line + "\n")
    return 1 if report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
