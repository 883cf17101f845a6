"""The Service in front of the hook's replicas, where Metacontroller's webhooks point: it
spreads the calls over the replicas, counts every call per hook and per model, and can
hold an answer back to force an interleaving.

Counting here (rather than in the hook) is what gives calls per model: the proxy reads
which model each request is about (``parent`` for the CompositeControllers' hooks,
``object`` for the label keeper's). Each call goes to the next of the endpoints in turn, as
a Service without session affinity sends it; a call whose replica fails it (refused,
reset: the replica died) ends with its connection closed and no answer, as a connection
through a Service to a pod that died ends, and is counted as ``dropped``. The bytes of an
answer pass through unchanged.

Holding is how a race is made certain rather than likely: once the replica has answered,
the answer is held until a condition holds. The label keeper's answer for a new model is
held until OME's manager has written its finalizer, so the keeper's label write carries a
stale resourceVersion, as it does whenever the two land in that order in a cluster; a
sync's answer is held past Metacontroller's webhook timeout, so the answer arrives after
Metacontroller gave up on it. A hold whose condition does not come true in time fails the
story that set it: the call is answered 502 and the proxy's ``errors`` name the hold, which
the tier's every wait and ``HookProxy.check`` raise. Letting the answer go would let a
story that meant to force an interleaving pass without it.

The last calls are kept as ``Exchange``s (what was asked, what was answered, whether the
answer reached its caller), for a story to compare answers.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from tests.cluster.processes import free_port

HOLD_SECONDS = 10.0
UPSTREAM_SECONDS = 30.0
KEPT_EXCHANGES = 2000


@dataclass(frozen=True)
class Hold:
    """Answers held back: ``until``, given a call's path and body, says what must hold before
    that call's answer goes back (None: at once); ``what`` names the hold in a failure."""

    what: str
    until: Callable[[str, dict[str, Any]], Callable[[], bool] | None]
    seconds: float = HOLD_SECONDS


class HoldTimedOut(Exception):
    """A hold's condition did not come true within its time: the interleaving it was to
    force did not happen."""


class Dropped(Exception):
    """The replica a call went to failed it: no answer, the connection closed."""


@dataclass(frozen=True)
class Exchange:
    """One call: when it arrived (``time.monotonic()``), its hook path, the model it was about,
    the request, the answer (None when the call was dropped) and whether the answer reached
    the caller (False when the caller had hung up, as Metacontroller does at its webhook
    timeout). Exchanges are kept as they end, so a held one comes after calls that arrived later."""

    asked: float
    path: str
    model: tuple[str, str, str] | None
    request: Any
    status: int | None
    answer: bytes | None
    delivered: bool


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
    """Serves on a port of its own, sending each call to the next of ``endpoints()``."""

    def __init__(self, endpoints: Callable[[], Sequence[str]]) -> None:
        self.endpoints = endpoints
        self.calls: Counter[tuple[str, tuple[str, str, str] | None]] = Counter()
        self.dropped: Counter[tuple[str, tuple[str, str, str] | None]] = Counter()
        self.in_flight: Counter[tuple[str, tuple[str, str, str] | None]] = Counter()
        """Calls sent to each replica and not answered yet, by replica and model."""
        self.exchanges: deque[Exchange] = deque(maxlen=KEPT_EXCHANGES)
        self.holds: list[Hold] = []
        self.errors: list[str] = []
        self._turn = 0
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
        """Fail with what went wrong in the proxy so far: a hold that timed out."""
        if self.errors:
            raise RuntimeError(f"the hook proxy failed: {self.errors}")

    def count(self, hook: str, model: tuple[str, str, str] | None = None) -> int:
        """Calls to ``/<hook>`` so far, about ``model`` when given."""
        with self._lock:
            return sum(value for (path, about), value in self.calls.items()
                       if path == f"/{hook}" and (model is None or about == model))

    def count_dropped(self, model: tuple[str, str, str] | None = None) -> int:
        """Calls a replica failed so far, about ``model`` when given."""
        with self._lock:
            return sum(value for (_, about), value in self.dropped.items() if model is None or about == model)

    def _next_endpoint(self) -> str:
        with self._lock:
            endpoints = list(self.endpoints())
            if not endpoints:
                raise Dropped("the Service has no endpoints")
            self._turn += 1
            return endpoints[self._turn % len(endpoints)]

    def _forward(self, asked: float, path: str, body: Any, data: bytes) -> tuple[int, bytes]:
        about = model_of(body)
        with self._lock:
            self.calls[(path, about)] += 1
        try:
            status, answer = self._send(self._next_endpoint(), path, data, about)
        except Dropped:
            with self._lock:
                self.dropped[(path, about)] += 1
            self.exchanges.append(Exchange(asked, path, about, body, None, None, False))
            raise
        for hold in list(self.holds):
            condition = hold.until(path, body) if isinstance(body, dict) else None
            if condition is not None:
                _wait(hold, condition)
        return status, answer

    def _send(self, upstream: str, path: str, data: bytes, about: tuple[str, str, str] | None) -> tuple[int, bytes]:
        where = urlsplit(upstream)
        connection = http.client.HTTPConnection(str(where.hostname), where.port, timeout=UPSTREAM_SECONDS)
        with self._lock:
            self.in_flight[(upstream, about)] += 1
        try:
            connection.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as error:
            raise Dropped(f"{upstream}: {type(error).__name__}: {error}") from error
        finally:
            connection.close()
            with self._lock:
                self.in_flight[(upstream, about)] -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                asked = time.monotonic()
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(data) if data else None
                try:
                    status, answer = proxy._forward(asked, self.path, body, data)
                except Dropped:
                    self.close_connection = True
                    return
                except Exception as error:  # noqa: BLE001 - a test's hold that fails must fail the test, not the thread
                    proxy.errors.append(f"{self.path}: {type(error).__name__}: {error}")
                    status, answer = 502, json.dumps({"error": str(error)}).encode()
                delivered = not _hung_up(self.connection)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True
                    delivered = False
                proxy.exchanges.append(Exchange(asked, self.path, model_of(body), body, status, answer, delivered))

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                """Quiet: the hook logs every call itself."""

        return Handler


def _hung_up(connection: socket.socket) -> bool:
    """Whether the caller closed its end: its request was read whole, so a readable
    connection with nothing to read is one it closed (as Metacontroller does when its
    webhook timeout ends a call)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _wait(hold: Hold, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + hold.seconds
    while not condition():
        if time.monotonic() >= deadline:
            raise HoldTimedOut(f"the hold on {hold.what} timed out: its condition was still false after {hold.seconds:g} s")
        time.sleep(0.05)
