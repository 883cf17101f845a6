"""The label race: OME's manager writes a model between the label keeper's read and its write.

Metacontroller's DecoratorController writes the label on the copy of the model it read,
swallows the Conflict when another writer got there first, and with
``ignoreStatusChanges`` drops the update that caused it when that update is only OME's
finalizer (a new model) or a status (a model that left ``pvc://``). The keeper's answer
asks for a resync while the label is not the one it wants, so the label is written in the
end, on every Metacontroller release the docs support (before v4.17.2 even the informer
resyncs are dropped).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import lifecycle
from tests.exploration import OME, Explored
from tests.invariants import LABEL_SECONDS, labelled_pvc
from tests.lifecycle import HF_URI, KINDS, World
from tests.metacontroller.cluster import Obj
from tests.metacontroller.controller import Controller
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.ome import FINALIZERS
from tests.metacontroller.simulator import VERSIONS, MetacontrollerVersion
from tests.metacontroller.webhook import Hook

KEEPER = "ome-basemodel-storage-label"


class OMEFirst(Explored):
    """The label keeper's first write of the model: OME's manager reconciles it just before."""

    def at_write(self, index: int, user: str, verb: str, obj: Obj) -> None:
        active = self.simulator.active
        if user == METACONTROLLER and isinstance(active, Controller) and active.name == KEEPER \
                and obj["kind"] in lifecycle.KINDS and obj["metadata"]["name"] == lifecycle.PVC_MODEL:
            self.fired = True
            model = self.model_of(obj)
            assert model is not None
            self.interfere(OME, model, obj)


def without_resync(hook: Hook) -> Hook:
    """The keeper as it was before the fix: its answer never asks to be called again."""
    def call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, answer = hook(path, body)
        if path == "/label" and isinstance(answer, dict):
            answer.pop("resyncAfterSeconds", None)
        return status, answer
    return call


def raced(kind: str, version: MetacontrollerVersion, keeper_resyncs: bool = True) -> tuple[World, OMEFirst]:
    perturbation = OMEFirst()
    hook = None if keeper_resyncs else (lambda sim: without_resync(lifecycle.core_hook(lifecycle.SETTINGS, sim.clock)))
    return lifecycle.world(kind, version=version, perturbation=perturbation, hook=hook), perturbation


def warmed(world: World) -> World:
    """A cluster that has run a while: another pvc:// model made Metacontroller start the
    label keeper's related informers, whose first use requeues a sync until they are
    synced (a retry that would otherwise rescue the first model of a fresh Metacontroller)."""
    world.create_model(name="warm-up")
    world.sim.advance(300)
    return world


def leave_pvc(world: World, perturbation: OMEFirst) -> Obj:
    """A model made Ready calmly, then moved to hf:// with OME racing the keeper; the model
    ten minutes later."""
    perturbation.fired = True
    world.create_model()
    world.sim.advance(300)
    perturbation.fired = False
    world.set_uri(HF_URI)
    world.sim.advance(LABEL_SECONDS)
    assert perturbation.fired, "OME's write never came between the keeper's read and write"
    model = world.model()
    assert model is not None
    return model


@pytest.mark.parametrize("version", VERSIONS, ids=lambda version: version.name)
@pytest.mark.parametrize("kind", KINDS)
def test_a_new_model_ome_writes_first_is_labelled_and_ready_within_ten_minutes(kind: str, version: MetacontrollerVersion) -> None:
    world, perturbation = raced(kind, version)
    world.create_model()
    world.sim.advance(LABEL_SECONDS)
    assert perturbation.fired, "OME's write never came between the keeper's read and write"
    model = world.model()
    assert labelled_pvc(model) and FINALIZERS[kind] in model["metadata"]["finalizers"]
    assert world.state() == ("Ready", "Ready")
    perturbation.checker.check_quiet()
    assert perturbation.checker.violations == []


@pytest.mark.parametrize("version", VERSIONS, ids=lambda version: version.name)
@pytest.mark.parametrize("kind", KINDS)
def test_a_model_that_left_pvc_while_ome_writes_is_unlabelled_and_handed_back_within_ten_minutes(
    kind: str, version: MetacontrollerVersion
) -> None:
    """Its URI is no longer pvc://, so the fence admits OME's status write, which lands
    between the keeper's read and its write."""
    world, perturbation = raced(kind, version)
    model = leave_pvc(world, perturbation)
    assert not labelled_pvc(model)
    assert [item for item in model["metadata"]["finalizers"] if item.startswith("metacontroller.io/")] == []
    assert world.owned() == []
    perturbation.checker.check_quiet()
    assert perturbation.checker.violations == []


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_keepers_resync_the_race_leaves_a_new_model_unlabelled_and_without_a_state(kind: str) -> None:
    """What the keeper's resync prevents, on the oldest release the docs support."""
    world, perturbation = raced(kind, VERSIONS[0], keeper_resyncs=False)
    warmed(world).create_model()
    world.sim.advance(LABEL_SECONDS)
    assert perturbation.fired
    model = world.model()
    assert not labelled_pvc(model) and "status" not in model


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_keepers_resync_the_race_keeps_a_model_that_left_pvc_in_metacontrollers_hands(kind: str) -> None:
    world, perturbation = raced(kind, VERSIONS[0], keeper_resyncs=False)
    model = leave_pvc(world, perturbation)
    composite = "ome-basemodels" if kind == "BaseModel" else "ome-clusterbasemodels"
    assert labelled_pvc(model) and f"metacontroller.io/compositecontroller-{composite}" in model["metadata"]["finalizers"]
