"""The simulated Metacontroller run in real time against the real API server.

``RealTimeMetacontroller`` is the simulator (``tests.metacontroller.Simulator``) with its
in-memory API server replaced by ``ApiServerCluster`` and its clock by the wall clock: the
same CompositeController, DecoratorController, customize and ManageChildren code, fed by
real watch events, waiting real seconds for work queue delays, resyncs and
``resyncAfterSeconds``. Its controllers are the ones stored in the API server (as
``kubectl apply -k`` left them), each calling the hook over HTTP.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any, Callable

from tests.cluster.api import Client
from tests.cluster.api_server_cluster import ApiServerCluster
from tests.metacontroller import Simulator
from tests.metacontroller.cluster import resource_of
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.webhook import Hook

HOOK_TIMEOUT_SECONDS = 10.0
"""The controllers' ``webhook.timeout``."""
IDLE_WAIT_SECONDS = 0.2
WATCHED = [resource_of(api_version, resource) for api_version, resource in (
    ("ome.io/v1beta1", "basemodels"), ("ome.io/v1beta1", "clusterbasemodels"),
    ("batch/v1", "jobs"), ("v1", "serviceaccounts"), ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords"),
    ("rbac.authorization.k8s.io/v1", "roles"), ("rbac.authorization.k8s.io/v1", "rolebindings"),
    ("rbac.authorization.k8s.io/v1", "clusterroles"), ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("v1", "persistentvolumeclaims"), ("v1", "namespaces"),
)]
"""What the product's controllers watch: the parents, the children, the related types its customize
hooks name (pods only with READ_JOB_PODS=true, which the tier's hook leaves off), and the namespaces
Metacontroller's customize manager always watches."""
CONTROLLER_KINDS = (("compositecontrollers", "CompositeController"), ("decoratorcontrollers", "DecoratorController"))


def http_hook(base_url: str) -> Hook:
    """The hook over HTTP, as ``pkg/hooks/webhook.go`` calls it: a POST of JSON, the status and the decoded answer."""

    def call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        request = urllib.request.Request(base_url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=HOOK_TIMEOUT_SECONDS) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            data = error.read()
            try:
                return error.code, json.loads(data)
            except ValueError:
                return error.code, data.decode(errors="replace")

    return call


class RealTimeMetacontroller(Simulator):
    """The simulator's controllers on the real API server, as Metacontroller's ServiceAccount."""

    def __init__(self, client: Client, cache_flush_seconds: float = 1800.0) -> None:
        super().__init__(cache_flush_seconds=cache_flush_seconds)
        self.cluster = ApiServerCluster(client, METACONTROLLER, WATCHED)  # type: ignore[assignment]
        self.clock = self.cluster.clock
        self.client = client

    def start(self, hook: Hook) -> None:
        """Fill the watch caches, then serve every stored CompositeController and DecoratorController with ``hook``."""
        self.cluster.start()
        for resource, kind in CONTROLLER_KINDS:
            stored = self.client.request("GET", f"/apis/metacontroller.k8s.io/v1alpha1/{resource}")
            for item in stored["items"]:
                self.add_controller({"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": kind, **item}, hook)

    def stop(self) -> None:
        for controller in self.controllers:
            controller.stop()
        self.controllers.clear()
        self.cluster.stop()

    def wait_until(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        """Run the controllers in real time until ``condition()`` holds; fail after ``seconds``."""
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {seconds:.0f} s; sync errors: {self.errors[-5:]}")
            self.step()

    def run_for(self, seconds: float) -> None:
        """Run the controllers in real time for ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.step(max(0.0, min(IDLE_WAIT_SECONDS, deadline - time.monotonic())))

    def step(self, wait: float = IDLE_WAIT_SECONDS) -> None:
        """Everything due now: watch events, timers, then every queued key; then wait for the
        next event, timer or ``wait``, whichever comes first."""
        while self.cluster.dispatch(timeout=0):
            pass
        self.run_due_events()
        worked = True
        while worked:
            worked = False
            for controller in list(self.controllers):
                while self.cluster.dispatch(timeout=0):
                    pass
                if controller.process_one():
                    worked = True
        upcoming = self.timeline.next_time()
        if upcoming is not None:
            wait = min(wait, max(0.0, (upcoming - self.clock.now) / timedelta(seconds=1)))
        self.cluster.dispatch(timeout=wait)
