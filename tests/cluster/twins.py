"""Each cluster-tier story told again in the simulator (``tests/lifecycle.py``'s world: the
simulated Metacontroller, OME's reconcilers and stand-ins for Kubernetes' controllers, on a
simulated clock), for the costs table that sets the two side by side. The steps and their
spacing follow the real story, each from the model's creation; the simulated time is what
the real one took, rounded up. Like the tier, the world runs OME's own CRDs, as the docs'
install leaves them.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from tests import lifecycle
from tests.cluster.story import COLUMNS
from tests.metacontroller.kubernetes import Run

HF_URI = lifecycle.HF_URI


def _measure(built: lifecycle.World, *steps: Callable[[], object]) -> dict[str, int]:
    sim, ome = built.sim, built.ome
    before = (Counter(sim.counts), Counter(sim.decorator_counts), Counter(ome.counts))
    for step in steps:
        step()
    composite, keeper, manager = (now - then for now, then in zip((sim.counts, sim.decorator_counts, ome.counts), before, strict=True))
    counts = {key: composite[key] for key in ("sync", "finalize", "customize", "create", "update", "delete", "status write")}
    counts |= {"label": keeper["sync"], "model write": composite["parent write"] + keeper["parent write"],
               "OME status write": manager["status write"] - manager["status write refused"],
               "OME refused": manager["status write refused"]}
    assert set(counts) == set(COLUMNS)
    return counts


def _world(kind: str, plan: list[Run] | None = None, ome_crds: bool = True, **options: object) -> lifecycle.World:
    """The lifecycle world under OME's own CRDs (or the hook's, as its Helm world runs)."""
    built = lifecycle.world(kind, plan, **options)  # type: ignore[arg-type]
    if ome_crds:
        built.install_ome_crds()
    return built


def happy_path(kind: str, ome_crds: bool = True) -> dict[str, int]:
    built = _world(kind, ome_crds=ome_crds)
    return _measure(built, built.create_model, lambda: built.sim.advance(60))


def pvc_missing_pending_bound_lost(kind: str) -> dict[str, int]:
    built = _world(kind, pvc=None)

    def story() -> None:
        built.create_model()
        built.sim.advance(10)
        built.binder.create(lifecycle.NAMESPACE, lifecycle.PVC, phase="Pending")
        built.sim.advance(10)
        built.binder.bind(lifecycle.NAMESPACE, lifecycle.PVC)
        built.sim.advance(60)
        built.binder.lose(lifecycle.NAMESPACE, lifecycle.PVC)
        built.sim.advance(30)
    return _measure(built, story)


def agent_fails_then_config_fixed(kind: str) -> dict[str, int]:
    """The first Job's three pods fail at once (a broken config.json); the retry succeeds."""
    built = _world(kind, [Run("fail", 1)])
    return _measure(built, built.create_model, lambda: built.sim.advance(120))


def pvc_to_hf_and_back(kind: str) -> dict[str, int]:
    built = _world(kind)

    def story() -> None:
        built.create_model()
        built.sim.advance(60)
        built.set_uri(HF_URI)
        built.sim.advance(30)
        built.set_uri(built.uri())
        built.sim.advance(60)
    return _measure(built, story)


def deletion(kind: str) -> dict[str, int]:
    built = _world(kind)
    return _measure(built, built.create_model, lambda: built.sim.advance(60), built.delete_model,
                    lambda: built.sim.advance(60))


def ome_crds_put_back(kind: str) -> dict[str, int]:
    """Ready under OME's CRDs, the hook's applied and the model touched, then OME's again."""
    built = _world(kind)

    def hooks_crds() -> None:
        built.sim.cluster.status_schemas.pop(kind)
        built.touch()
    return _measure(built, built.create_model, lambda: built.sim.advance(60), hooks_crds, lambda: built.sim.advance(10),
                    built.install_ome_crds, lambda: built.sim.advance(60))
