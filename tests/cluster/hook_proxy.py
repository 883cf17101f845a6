"""A pass-through in front of the hook, where Metacontroller's webhooks point: it counts
every call per hook and per model, and can hold an answer back to force an interleaving.

Counting here (rather than in the hook) is what gives calls per model: the proxy reads
which model each request is about (``parent`` for the CompositeControllers' hooks,
``object`` for the label keeper's). Holding is how the label race is made certain rather
than likely: the label keeper's answer for a new model is held until OME's manager has
written its finalizer, so the keeper's label write carries a stale resourceVersion, as it
does whenever the two land in that order in a cluster. The bytes pass through unchanged.

A hold whose condition does not come true in time fails the story that set it: the call
is answered 502 and the proxy's ``errors`` name the hold, which the tier's every wait and
``HookProxy.check`` raise. Letting the answer go would let a story that meant to force an
interleaving pass without it.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.cluster.processes import free_port

HOLD_SECONDS = 10.0


@dataclass(frozen=True)
class Hold:
    """Answers held back: ``until``, given a call's path and body, says what must hold before
    that call is answered (None: answer at once); ``what`` names the hold in a failure."""

    what: str
    until: Callable[[str, dict[str, Any]], Callable[[], bool] | None]
    seconds: float = HOLD_SECONDS


class HoldTimedOut(Exception):
    """A hold's condition did not come true within its time: the interleaving it was to
    force did not happen."""


def model_of(body: Any) -> tuple[str, str, str] | None:
    """``(kind, namespace, name)`` of the model a hook request is about."""
    if not isinstance(body, dict):
        return None
    model = body.get("parent") or body.get("object")
    if not isinstance(model, dict):
        return None
    metadata = model.get("metadata") or {}
    return str(model.get("kind")), str(metadata.get("namespace") or ""), str(metadata.get("name"))


class HookProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: Counter[tuple[str, tuple[str, str, str] | None]] = Counter()
        self.holds: list[Hold] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hook proxy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def check(self) -> None:
        """Fail with what went wrong in the proxy so far: a hold that timed out, a call it could not pass on."""
        if self.errors:
            raise RuntimeError(f"the hook proxy failed: {self.errors}")

    def count(self, hook: str, model: tuple[str, str, str] | None = None) -> int:
        """Calls to ``/<hook>`` so far, about ``model`` when given."""
        with self._lock:
            return sum(value for (path, about), value in self.calls.items()
                       if path == f"/{hook}" and (model is None or about == model))

    def _forward(self, path: str, data: bytes) -> tuple[int, bytes]:
        body = json.loads(data) if data else None
        with self._lock:
            self.calls[(path, model_of(body))] += 1
        for hold in list(self.holds):
            condition = hold.until(path, body) if isinstance(body, dict) else None
            if condition is not None:
                _wait(hold, condition)
        request = urllib.request.Request(self.upstream + path, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    status, answer = proxy._forward(self.path, data)
                except Exception as error:  # noqa: BLE001 - a test's hold that fails must fail the test, not the thread
                    proxy.errors.append(f"{self.path}: {type(error).__name__}: {error}")
                    status, answer = 502, json.dumps({"error": str(error)}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                """Quiet: the hook logs every call itself."""

        return Handler


def _wait(hold: Hold, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + hold.seconds
    while not condition():
        if time.monotonic() >= deadline:
            raise HoldTimedOut(f"the hold on {hold.what} timed out: its condition was still false after {hold.seconds:g} s")
        time.sleep(0.05)
