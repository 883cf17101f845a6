"""The simulator: a cluster, a clock, the controllers and the stand-ins, run in time order."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Protocol

from tests.metacontroller import webhook
from tests.metacontroller.cluster import Clock, Cluster
from tests.metacontroller.composite import CompositeController
from tests.metacontroller.controller import Controller
from tests.metacontroller.decorator import DecoratorController
from tests.metacontroller.perturbation import Perturbation, Stopped
from tests.metacontroller.workqueue import Timeline, WorkQueue

START = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
MAX_SYNCS_PER_SETTLE = 2000


@dataclass(frozen=True)
class MetacontrollerVersion:
    """The Metacontroller release simulated, as far as its behaviour differs for this hook."""

    name: str
    resyncs_pass_filter: bool
    """v4.17.2 (#1252) lets an informer resync through the ``ignoreStatusChanges`` filter;
    v4.16.0 to v4.17.1 drop it."""


V4_16 = MetacontrollerVersion("v4.16.0", resyncs_pass_filter=False)
"""The oldest release the docs support, and the simulator's default: nothing the product
promises may rest on a resync it drops."""
V4_17_2 = MetacontrollerVersion("v4.17.2", resyncs_pass_filter=True)
VERSIONS = (V4_16, V4_17_2)


class HotLoop(AssertionError):
    """The controllers never went quiet: a hook whose answer changes on every call."""


class Worker(Protocol):
    """A controller of the cluster's own (OME's reconcilers) working from its queue like Metacontroller's."""

    def process_one(self) -> bool:
        """Reconcile one queued item; False when the queue is empty."""


class Simulator:
    """``cache_flush_seconds`` is Metacontroller's ``--cache-flush-interval`` (30 min by
    default); ``version`` the release simulated; ``perturbation`` what a test changes in
    the controllers' view (nothing by default)."""

    def __init__(self, start: datetime = START, cache_flush_seconds: float = 1800.0,
                 version: MetacontrollerVersion = V4_16, perturbation: Perturbation | None = None) -> None:
        self.cache_flush_seconds = cache_flush_seconds
        self.version = version
        self.perturbation = perturbation or Perturbation()
        self.clock = Clock(start)
        self.cluster = Cluster(self.clock)
        self.cluster.before_write = self.perturbation.before_write
        self.timeline = Timeline()
        self.counts: Counter[str] = Counter()
        self.decorator_counts: Counter[str] = Counter()
        self.errors: list[str] = []
        self.controllers: list[Controller] = []
        self.informers: set[tuple[str, str]] = set()
        """The types Metacontroller's shared informer factory runs, synced: a controller's
        parent and child types from its start (it waits for their caches before its first
        sync), a related type from its first use."""
        self.workers: list[Worker] = []
        self.active: Controller | Worker | None = None
        """Who is working now: the controller or worker whose item is being processed."""
        self.perturbation.attach(self)

    def add_controller(self, manifest: dict[str, Any], hook: webhook.Hook) -> Controller:
        """Serve a CompositeController or DecoratorController manifest with ``hook``."""
        kinds: dict[str, type[Controller]] = {"CompositeController": CompositeController,
                                              "DecoratorController": DecoratorController}
        controller = kinds[manifest["kind"]](self, manifest, hook)
        self.controllers.append(controller)
        return controller

    def restart_metacontroller(self) -> None:
        """Metacontroller restarted: each controller starts again from its manifest with
        empty caches and queues, and lists every parent as its informers start."""
        running = list(self.controllers)
        self.controllers.clear()
        self.informers.clear()
        for controller in running:
            controller.stop()
            self.add_controller(controller.manifest, controller.hook)

    def add_worker(self, worker: Worker) -> None:
        """Let ``worker`` take its turn with the controllers whenever the simulation settles."""
        self.workers.append(worker)

    def new_queue(self) -> WorkQueue:
        return WorkQueue(self.timeline, self.clock)

    def after(self, seconds: float, action: Callable[[], None], periodic: bool = False) -> None:
        """Run ``action`` ``seconds`` from now (stand-ins use this for what takes time)."""
        self.timeline.at(self.clock.now + timedelta(seconds=seconds), action, periodic)

    def run_due_events(self) -> None:
        """Run the stand-ins' events due now, without any controller syncing."""
        while (action := self.timeline.pop_due(self.clock.now)) is not None:
            action()

    def settle(self) -> None:
        """Run everything due now until every queue is empty; the clock does not move."""
        syncs = 0
        while True:
            action = self.timeline.pop_due(self.clock.now)
            if action is not None:
                action()
                continue
            worked = False
            for controller in [*self.controllers, *self.workers]:
                if self.take_turn(controller):
                    worked = True
                    syncs += 1
            if not worked:
                return
            if syncs > MAX_SYNCS_PER_SETTLE:
                raise HotLoop(f"more than {MAX_SYNCS_PER_SETTLE} syncs at {self.clock.now}; counts {dict(self.counts)}")

    def take_turn(self, controller: Controller | Worker) -> bool:
        """One item of ``controller``'s queue; Metacontroller stopping on the way starts again."""
        self.active = controller
        try:
            return controller.process_one()
        except Stopped:
            self.restart_metacontroller()
            return True
        finally:
            self.active = None

    def advance(self, seconds: float) -> None:
        """Move the clock forward, running every event on the way at its own time."""
        target = self.clock.now + timedelta(seconds=seconds)
        self.settle()
        while True:
            upcoming = self.timeline.next_time()
            if upcoming is None or upcoming > target:
                break
            self.clock.now = max(self.clock.now, upcoming)
            self.settle()
        self.clock.now = target
        self.settle()

    def run_until_quiet(self, limit_seconds: float = 7 * 86400) -> None:
        """Advance until nothing but periodic resyncs is left to happen (at most ``limit_seconds``)."""
        end = self.clock.now + timedelta(seconds=limit_seconds)
        self.settle()
        while True:
            upcoming = self.timeline.next_time(include_periodic=False)
            if upcoming is None or upcoming > end:
                return
            self.advance(max((upcoming - self.clock.now).total_seconds(), 0.0))
