"""One answer fed back: the request Metacontroller sends next, computed by the simulator.

The golden fixtures' fixpoint checks use this instead of a model of their own: the saved
request's parent and children are put into a simulated cluster, its CompositeController
applies the saved answer exactly as after a hook call (``apply_answer``: finalizer,
``controller-uid`` label and selector check, ``ManageChildren``, the status write through
the shipped CRD's schema), the Job controller starts any new Job, and the next request
is read back from the cluster. Related objects are carried over unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.metacontroller.selection import clone
from tests.metacontroller import selection
from tests.metacontroller.composite import CompositeController
from tests.metacontroller.kubernetes import JobController
from tests.metacontroller.simulator import Simulator


def _no_call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    raise AssertionError(f"feeding an answer back never calls the hook ({path})")


def apply(request: dict[str, Any], response: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The next request once ``response`` (the answer to ``request``) has been applied at ``now``."""
    sim = Simulator(start=now)
    parent = clone(request["parent"])
    children = [clone(obj) for group in request.get("children", {}).values() for obj in group.values()]
    for obj in (parent, *children):
        sim.cluster.restore(obj)
    controller = sim.add_controller(clone(request["controller"]), _no_call)
    assert isinstance(controller, CompositeController)
    JobController(sim)
    controller.apply_answer(parent, selection.uniform_map(parent, children), clone(response))
    sim.run_due_events()

    following = clone(request)
    version = controller.hook_spec(bool(request.get("finalizing"))).get("version") or "v1"
    metadata = parent["metadata"]
    following["parent"] = sim.cluster.find(parent["apiVersion"], parent["kind"], metadata.get("namespace"),
                                           metadata["name"]) or parent
    observed: selection.ObjectMap = {}
    for resource in controller.child_resources():
        selection.init_group(observed, resource.type_key)
        for obj in sim.cluster.list(resource.api_version, resource.kind):
            selection.insert(observed, parent, obj, version)
    following["children"] = observed
    return following
