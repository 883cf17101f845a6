"""The cluster tier's one world, shared by its tests: built (or taken from the cache), started,
given OME models that predate the hook, the hook installed as the docs say, Metacontroller
started; and everything stopped at the end, also when a test fails or the run is interrupted.
A second world, for one module, installs the hook with Helm instead.
"""

from __future__ import annotations

import atexit
import shutil
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import pytest

from tests.cluster import builds
from tests.cluster.existing import create_existing_models
from tests.cluster.faults import RECOVERIES
from tests.cluster.story import COLUMNS, REPORT
from tests import helm, reference
from tests.cluster.tier import Tier
from tests.unavailable import unavailable


WORLDS: list[Tier] = []
"""The world this session started, for the summary."""


@contextmanager
def running(install: Callable[[Tier], None], existing_models: bool, with_helm: bool = False) -> Iterator[Tier]:
    """A world: its binaries built (helm too, ``with_helm``), started, given OME models that
    predate the hook where asked, the hook installed by ``install``, Metacontroller started;
    stopped however the tests end. What it cannot build (Metacontroller's CRDs from the
    reference folder, the Go toolchain) is checked first, before any build."""
    for name in reference.METACONTROLLER_CRDS:
        reference.crd(name)
    if shutil.which("go") is None:
        unavailable("the cluster tier builds its binaries with the Go toolchain, which is not installed")
    builds.build_all()
    if with_helm:
        helm.built()
    world = Tier()
    atexit.register(world.stop)
    try:
        started = time.monotonic()
        world.start()
        if existing_models:
            create_existing_models(world)
        install(world)
        world.start_metacontroller()
        world.timings["world"] = time.monotonic() - started
        WORLDS.append(world)
        yield world
    finally:
        world.stop()
        atexit.unregister(world.stop)


@pytest.fixture(scope="session")
def tier() -> Iterator[Tier]:
    """The hook installed with kubectl, as docs/install.md's "Apply" says, over models that predate it."""
    with running(Tier.install, existing_models=True) as world:
        yield world


@pytest.fixture(scope="module")
def helm_tier() -> Iterator[Tier]:
    """The hook installed with Helm, as docs/install.md's "Helm" says."""
    with running(Tier.install_with_helm, existing_models=False, with_helm=True) as world:
        yield world


@pytest.fixture(scope="module")
def comparison_tier() -> Iterator[Tier]:
    """A world of its own for a story that replaces OME's manager, with OME v1.2.2 built too."""
    builds.build_all(targets=builds.COMPARISON_BUILDS)
    with running(Tier.install, existing_models=False, with_helm=True) as world:
        yield world


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How long the world took to come up; per fault, the seconds from its restart to its
    models' final state; every story's costs, the real ones beside the simulator's; and the
    real writes per actor."""
    write = terminalreporter.write_line
    for world in WORLDS:
        write("Seconds to come up (binaries cached): " + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in world.timings.items()))
    if RECOVERIES:
        write("")
        write("Seconds from each fault's restart to its models' final state")
        write("| fault | kinds | seconds |")
        write("|---|---|---:|")
        for recovery in RECOVERIES:
            write(f"| {recovery.fault} | {', '.join(recovery.kinds)} | {recovery.seconds:.1f} |")
    if not REPORT:
        return
    write("")
    write("Costs per story and model: the cluster tier (real) beside the simulator (sim)")
    write("| story | kind | run | " + " | ".join(COLUMNS) + " |")
    write("|---|---|---|" + "---:|" * len(COLUMNS))
    for title, kind, real, simulated, _ in REPORT:
        for run, counts in (("real", real), ("sim", simulated)):
            write(f"| {title} | {kind} | {run} | " + " | ".join(str(counts[column]) for column in COLUMNS) + " |")
    write("")
    write("Writes per actor (refused by the fence in brackets), from the API server's audit log")
    for title, kind, _, _, per_actor in REPORT:
        actors = ", ".join(f"{name} {counts['writes']}" + (f" ({counts['refused']} refused)" if counts["refused"] else "")
                           for name, counts in sorted(per_actor.items()))
        write(f"- {title}, {kind}: {actors}")
