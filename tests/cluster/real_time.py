"""The simulated Metacontroller run in real time against the real API server, as a process of its own.

``RealTimeMetacontroller`` is the simulator (``tests.metacontroller.Simulator``) with its
in-memory API server replaced by ``ApiServerCluster`` and its clock by the wall clock: the
same CompositeController, DecoratorController, customize and ManageChildren code, fed by
real watch events, waiting real seconds for work queue delays, resyncs and
``resyncAfterSeconds``. Its controllers are the ones stored in the API server (as
``kubectl apply -k`` left them), each calling the hook over HTTP.

It runs on a thread of its own, as the binary runs in a process of its own: the tests only
watch the cluster, and may kill it at any moment, also from another thread while it waits
for a hook's answer. ``kill`` is a process's death: from then on nothing of it reaches the
world (no request to the API server, no use of an answer that arrives after), its watches
are cut, and everything it held in memory (caches, work queues and their backoff, the
customize answers, the pending resyncs) goes with the instance. Starting again is a new
instance, which lists everything afresh.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any, Callable

from tests.cluster.api import Client
from tests.cluster.api_server_cluster import ApiServerCluster, Killed
from tests.metacontroller import Simulator
from tests.metacontroller.cluster import resource_of
from tests.metacontroller.identities import METACONTROLLER
from tests.metacontroller.webhook import Hook, HookDown

HOOK_TIMEOUT_SECONDS = 10.0
"""The controllers' ``webhook.timeout``."""
IDLE_WAIT_SECONDS = 0.2
POLL_SECONDS = 0.2
STOP_SECONDS = 30.0
"""How long stopping waits for a sync under way (a hook call is bounded by its timeout)."""
WATCHED = [resource_of(api_version, resource) for api_version, resource in (
    ("ome.io/v1beta1", "basemodels"), ("ome.io/v1beta1", "clusterbasemodels"),
    ("batch/v1", "jobs"), ("v1", "serviceaccounts"),
    ("rbac.authorization.k8s.io/v1", "roles"), ("rbac.authorization.k8s.io/v1", "rolebindings"),
    ("rbac.authorization.k8s.io/v1", "clusterroles"), ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("v1", "persistentvolumeclaims"), ("v1", "namespaces"),
)]
"""What the product's controllers watch whatever their release: the parents, the children every
release has, the related types its customize hooks name (pods only with READ_JOB_PODS=true, which
the tier's hook leaves off), and the namespaces Metacontroller's customize manager always watches.
The rest of the children (the record's kind, which changed after 0.1.0) are read from the stored
CompositeControllers, as Metacontroller starts an informer for each child type a controller names."""
CONTROLLER_KINDS = (("compositecontrollers", "CompositeController"), ("decoratorcontrollers", "DecoratorController"))


def http_hook(base_url: str) -> Hook:
    """The hook over HTTP, as ``pkg/hooks/webhook.go`` calls it: a POST of JSON, the status and
    the decoded answer; no answer within the webhook timeout, or none at all (a refused or
    closed connection), is ``HookDown``, its "http error"."""

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
        except (OSError, http.client.HTTPException) as error:
            raise HookDown(f"{path} hook: http error: {type(error).__name__}: {error}") from error

    return call


class RealTimeMetacontroller(Simulator):
    """The simulator's controllers on the real API server, as Metacontroller's ServiceAccount."""

    def __init__(self, client: Client, cache_flush_seconds: float = 1800.0) -> None:
        super().__init__(cache_flush_seconds=cache_flush_seconds)
        self.api_server = ApiServerCluster(client, METACONTROLLER, WATCHED)
        self.cluster = self.api_server  # type: ignore[assignment]
        self.clock = self.api_server.clock
        self.client = client
        self.failure: BaseException | None = None
        """What ended its thread other than a kill or a stop: the tests' waits raise it."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metacontroller (simulated)", daemon=True)

    def start(self, hook: Hook) -> None:
        """Fill the watch caches (``WATCHED`` and the stored controllers' child types), serve
        every stored CompositeController and DecoratorController with ``hook``, and run. The
        controllers are read once: after they change, a new instance takes them, as
        Metacontroller stops and starts a controller whose spec changed."""
        controllers = [{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": kind, **item}
                       for resource, kind in CONTROLLER_KINDS
                       for item in self.client.request("GET", f"/apis/metacontroller.k8s.io/v1alpha1/{resource}")["items"]]
        children = [resource_of(child["apiVersion"], child["resource"]) for controller in controllers
                    for child in controller["spec"].get("childResources") or []]
        self.api_server.types = list(dict.fromkeys([*WATCHED, *children]))
        self.api_server.start()
        for controller in controllers:
            self.add_controller(controller, self._reaching(hook))
        self._thread.start()

    def _reaching(self, hook: Hook) -> Hook:
        """``hook`` as a live process calls it: not at all once killed, and an answer that
        arrives after the kill is never used."""
        def call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
            self.api_server.check_alive()
            answer = hook(path, body)
            self.api_server.check_alive()
            return answer
        return call

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self.step()
        except Killed:
            pass
        except Exception as error:  # noqa: BLE001 - kept for the tests' waits to raise
            self.failure = error
        finally:
            for controller in self.controllers:
                controller.stop()
            self.controllers.clear()
            self.api_server.stop()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self.api_server.killed.is_set()

    def kill(self) -> None:
        """Dead at once, wherever it is: safe from any thread, also one its hook call waits on."""
        self.api_server.kill()

    def stop(self) -> None:
        """A clean stop: the sync under way ends, then nothing more."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_SECONDS)
        self.api_server.stop()

    def wait_until(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        """Poll ``condition`` while the controllers run; fail after ``seconds``, or at once if
        their thread failed."""
        deadline = time.monotonic() + seconds
        while not condition():
            if self.failure is not None:
                raise RuntimeError(f"the simulated Metacontroller failed while waiting for {what}") from self.failure
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {seconds:.0f} s; sync errors: {self.errors[-5:]}")
            time.sleep(POLL_SECONDS)

    def run_for(self, seconds: float) -> None:
        """Let the controllers run for ``seconds``."""
        time.sleep(seconds)

    def step(self, wait: float = IDLE_WAIT_SECONDS) -> None:
        """Everything due now: watch events, timers, then every queued key; then wait for the
        next event, timer or ``wait``, whichever comes first."""
        while self.api_server.dispatch(timeout=0):
            pass
        self.run_due_events()
        worked = True
        while worked and not self._stopping.is_set():
            worked = False
            for controller in list(self.controllers):
                while self.api_server.dispatch(timeout=0):
                    pass
                if controller.process_one():
                    worked = True
        upcoming = self.timeline.next_time()
        if upcoming is not None:
            wait = min(wait, max(0.0, (upcoming - self.clock.now) / timedelta(seconds=1)))
        self.api_server.dispatch(timeout=wait)
