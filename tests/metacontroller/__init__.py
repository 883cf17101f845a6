"""A simulator of Metacontroller (v4.16.0 by default, v4.17.2 on request) driving a hook in a simulated cluster.

One model of Metacontroller for every test: the lifecycle scenarios (``tests/lifecycle.py``)
run it end to end, and the golden fixtures feed their answers back through it
(``feedback.apply``). Each part follows Metacontroller's source and names, in its
docstring, the function it mirrors.

Use::

    from tests.metacontroller import Simulator, core_hook, flask_hook, manifests

    sim = Simulator()                                   # clock at 2026-11-30T12:00:00Z, v4.16.0
    hook = core_hook(settings, sim.clock)               # or flask_hook(create_app(settings, clock=sim.clock))
    for manifest in manifests("compositecontrollers.yaml"):
        sim.add_controller(manifest, hook)              # CompositeController or DecoratorController
    sim.cluster.create({...})                           # any object; watches fire at once
    sim.run_until_quiet()                               # or sim.advance(seconds) / sim.settle()
    sim.counts["sync"], sim.counts["status write"]      # every call and write, counted
    sim.errors                                          # every failed sync, with Metacontroller's reason

    for manifest in manifests("fence.yaml"):            # the status fence: from now on the API
        sim.cluster.create(manifest)                    # server reviews every write by it
    ome = OMEManager(sim)                               # OME's model reconcilers (tests.metacontroller.ome)
    ome.counts["status write refused"]                  # OME's writes the fence refused

A hook is any callable ``(path, body) -> (status_code, body)``; ``path`` is the
webhook's path (``/sync``, ``/customize``, ``/finalize``...). ``core_hook`` answers the
CompositeControllers' three paths from the pure core; ``flask_hook`` answers whatever the
app routes; a test may pass its own function. Stand-ins for the rest of the cluster are in ``kubernetes``
(``JobController``, ``TTLController``, ``PVCBinder``, ``Agent``) and ``ome`` (OME's
``NodeAgents`` and ``OMEManager``, the BaseModel and ClusterBaseModel reconcilers that
run beside the hook, with work queues of their own): each watches the cluster and acts
on the simulator's clock. Every write names its user (``user=``, a kubectl admin when
none is given; ``identities`` says who is who: Metacontroller writes as its
ServiceAccount, OME's manager as ``system:serviceaccount:ome:ome-controller-manager``), and
the cluster reviews it by the ValidatingAdmissionPolicies it stores (``tests/admission.py``).
Counts (a ``Counter``):
``sync``, ``finalize``, ``customize`` (hook calls); ``create``, ``delete``, ``update``
(children, also per kind: ``create Job``); ``status write`` (status subresource
writes) and ``status write refused`` (of those, refused by admission); ``parent write``
(finalizer, labels, annotations); ``adopt``, ``release``;
``sync error`` (a failed sync, retried with client-go's backoff). DecoratorControllers
count the same names in ``sim.decorator_counts``, so ``sim.counts`` is what the models
cost; OME's manager counts its own in ``OMEManager.counts``.

Modules: ``cluster`` (the API server), ``simulator`` (time and the loop),
``composite`` / ``decorator`` (the two controllers), ``controller`` (what they share),
``customize`` (related objects), ``manage_children``, ``selection`` (selectors, object
keys), ``workqueue``, ``webhook`` (calling a hook), ``endpoints`` (our hook as a
callable), ``kubernetes`` (Job, TTL, PVC binder and agent stand-ins), ``ome`` (OME's model
agents and manager), ``identities`` (the users who write), ``perturbation`` (where a test
may change what the controllers see).

Informers equal the API server unless a ``Perturbation`` (``perturbation``) makes one
lag for a sync, lets another writer's update land between a read and a write, or stops
Metacontroller before a write (``Simulator(perturbation=...)``; ``tests/exploration.py``).

Not modelled: parallel workers, the 20 s discovery of new CRDs, Rolling* strategies,
server-side apply, ETags, events.
"""

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from tests.metacontroller.cluster import ApiError, Clock, Cluster
from tests.metacontroller.endpoints import core_hook, flask_hook
from tests.metacontroller.selection import clone
from tests.metacontroller.simulator import START, HotLoop, Simulator

MANIFESTS = Path(__file__).resolve().parents[2] / "metacontroller"


def manifests(file_name: str) -> list[dict[str, Any]]:
    """The objects shipped in ``metacontroller/<file_name>``, each a copy of its own."""
    return [clone(item) for item in _shipped(file_name)]


@lru_cache(maxsize=None)
def _shipped(file_name: str) -> tuple[dict[str, Any], ...]:
    return tuple(item for item in yaml.safe_load_all((MANIFESTS / file_name).read_text(encoding="utf-8")) if item)


__all__ = ["ApiError", "Clock", "Cluster", "HotLoop", "START", "Simulator", "core_hook", "flask_hook", "manifests"]
