"""The thin HTTP shell: parse, authenticate, call the core, serialize, count and log.

Every failure is answered with a JSON ``{"error": ...}`` and a non-200 status: for
Metacontroller only a 200 changes anything, so an answer we are unsure of must never be
a 200.

A POST to a hook path is answered straight from the WSGI environ, in front of Flask:
Flask's per-request machinery (a request context, routing, a Response object, the
after-request chain) costs about as much as the decision itself, on every call
Metacontroller makes. Flask keeps the rest: health, metrics, and the JSON refusals of
unknown paths and wrong methods (its routes for the hooks give it the 405s; a POST
reaching them gets the same answer as in front).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import ClientDisconnected, HTTPException, RequestEntityTooLarge
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wsgi import get_content_length, get_input_stream

from hooks.customize import customize, customize_keeper
from hooks.http.auth import auth_scheme, authorized
from hooks.http.metrics import CONTENT_TYPE, Metrics
from hooks.label_keeper import keep_label
from hooks.request import BadRequest, field
from hooks.settings import Settings
from hooks.sync import Decision, sync
from hooks.upstream_backend import Evidence

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Clock = Callable[[], datetime]
HOOKS = ("sync", "customize", "finalize", "label", "label-customize")
HOOK_PATHS = {f"/{hook}": hook for hook in HOOKS}
JSON = "application/json"

log = logging.getLogger("hooks.requests")
# An error may quote what it refused; a huge quoted value must not make a huge log line.
LOGGED_ERROR_CHARS = 2000


@dataclass
class Call:
    """What one hook call learned, for its metrics and its log line."""

    hook: str
    outcome: str = "ok"
    parent: Any = None
    decision: Decision | None = None
    error: str | None = None
    stepped_aside: Evidence | None = None

    def refuse(self, outcome: str, status: int, error: str, headers: tuple[tuple[str, str], ...] = ()) -> Answer:
        """An error answer; its text also goes into the call's log line."""
        self.outcome, self.error = outcome, error
        return Answer(status, orjson.dumps({"error": error}), headers)


@dataclass(frozen=True)
class Answer:
    """A hook's HTTP answer, whichever way the request came in."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def status_line(self) -> str:
        """As werkzeug words it (``400 BAD REQUEST``), so both ways answer alike."""
        return f"{self.status} {HTTP_STATUS_CODES[self.status].upper()}"

    def wsgi_headers(self) -> list[tuple[str, str]]:
        """What werkzeug sends for ``Response(body, mimetype=JSON)`` plus our own headers."""
        return [("Content-Type", JSON), ("Content-Length", str(len(self.body))), *self.headers]

    def flask_response(self) -> Response:
        response = Response(self.body, status=self.status, mimetype=JSON)
        response.headers.extend(self.headers)
        return response


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _json(payload: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype=JSON)


def create_app(settings: Settings | None = None, clock: Clock = _utc_now) -> Flask:
    """Build an app; without ``settings`` they are read from the environment (the WSGI entry)."""
    settings = settings if settings is not None else Settings.from_env(os.environ)
    app = Flask(__name__)
    hooks = HookCalls(settings, clock, Metrics())
    _configure_logging()
    for hook in HOOKS:
        app.add_url_rule(
            f"/{hook}", hook, lambda hook=hook: hooks.answer(hook, request.environ).flask_response(), methods=["POST"]
        )

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        return _json({"status": "ready"})

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(hooks.metrics.exposition(), mimetype=CONTENT_TYPE.split(";")[0], content_type=CONTENT_TYPE)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        """Werkzeug's refusals outside a hook call (unknown path, wrong method) as JSON too;
        an unknown path is answered with the paths there are, read from the app's routes."""
        if error.code == 404:
            return _json({"error": f"no such path {request.path}; this hook serves {_served(app)}"}, 404)
        return _json({"error": error.description or error.name}, error.code or 400)

    app.wsgi_app = HooksInFront(hooks.answer, app.wsgi_app)  # type: ignore[method-assign]
    return app


def _served(app: Flask) -> str:
    """Every method and path the app answers, in the order they were added: ``POST /sync,
    ..., GET /metrics``."""
    return ", ".join(f"{method} {rule.rule}" for rule in app.url_map.iter_rules() if rule.endpoint != "static"
                     for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}))


class HookCalls:
    """Answering the hooks: each call authenticated, parsed, decided, counted and logged."""

    def __init__(self, settings: Settings, clock: Clock, metrics: Metrics) -> None:
        self.settings, self.clock, self.metrics = settings, clock, metrics

    def answer(self, hook: str, environ: WSGIEnvironment) -> Answer:
        """One hook call, counted and logged once its answer is built.

        The log line is written to stderr directly, one write per line: the logging
        module's records, locks and formatters cost more than building the line."""
        started = time.perf_counter()
        call = Call(hook)
        result = self._respond(call, environ)
        elapsed = time.perf_counter() - started
        metrics = self.metrics
        metrics.series(metrics.requests, hook, call.outcome).inc()
        metrics.series(metrics.latency, hook, call.outcome).observe(elapsed)
        if call.decision is not None:
            decision = call.decision
            metrics.series(metrics.decisions, decision.flow, decision.state, decision.reason).inc()
        if call.stepped_aside is not None:
            metrics.series(metrics.stepped_aside, hook).inc()
        sys.stderr.write(_log_line(call, result.status, elapsed, self.clock()) + "\n")
        return result

    def _respond(self, call: Call, environ: WSGIEnvironment) -> Answer:
        """Every way out is a JSON answer, and only a decision is a 200."""
        settings = self.settings
        try:
            if not authorized(environ.get("HTTP_AUTHORIZATION"), settings.server):
                challenge = ("WWW-Authenticate", f'{auth_scheme(settings.server)} realm="basemodel-hook"')
                return call.refuse("unauthorized", 401, "missing or wrong credentials", (challenge,))
            return Answer(200, self._decide(call, _parse_body(environ, settings.server.max_request_bytes)))
        except BadRequest as error:
            return call.refuse("bad_request", 400, str(error))
        except RequestEntityTooLarge:
            return call.refuse("too_large", 413, f"request body over {settings.server.max_request_bytes} bytes (HOOK_MAX_REQUEST_BYTES)")
        except HTTPException as error:
            return call.refuse("bad_request", error.code or 400, error.description or error.name)
        except Exception as error:  # noqa: BLE001 - any bug must become a 5xx, never a partial 200
            self.metrics.errors.labels(call.hook, type(error).__name__).inc()
            log.exception("hook %s failed", call.hook)
            return call.refuse("error", 500, f"internal error ({type(error).__name__}); see the hook's log")

    def _decide(self, call: Call, body: Any) -> bytes:
        """The core's answer to a parsed body, as the bytes of a 200."""
        if isinstance(body, dict):
            call.parent = body.get("object" if call.hook == "label" else "parent")
        if call.hook == "customize":
            return orjson.dumps(customize(body, self.settings))
        if call.hook == "label-customize":
            return orjson.dumps(customize_keeper(body, self.settings))
        if call.hook == "label":
            labelled = keep_label(body, self.settings, self.clock())
            call.stepped_aside = labelled.stepped_aside
            return orjson.dumps(labelled.response)
        call.decision = sync(body, self.settings, self.clock(), finalize=call.hook == "finalize")
        call.stepped_aside = call.decision.stepped_aside
        return orjson.dumps(call.decision.response)


class HooksInFront:
    """The WSGI app gunicorn calls: a POST to a hook path is answered here, the rest by Flask."""

    def __init__(self, answer: Callable[[str, WSGIEnvironment], Answer], flask_wsgi: WSGIApplication) -> None:
        self.answer, self.flask_wsgi = answer, flask_wsgi

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        hook = HOOK_PATHS.get(environ.get("PATH_INFO", ""))
        if hook is None or environ.get("REQUEST_METHOD") != "POST":
            return self.flask_wsgi(environ, start_response)
        result = self.answer(hook, environ)
        start_response(result.status_line(), result.wsgi_headers())
        return [result.body]


def _parse_body(environ: WSGIEnvironment, limit: int) -> Any:
    """Metacontroller always sends JSON; anything else is refused before the core sees it.

    orjson, because parsing Metacontroller's requests (every child and related object in
    full) is most of what answering costs."""
    data = _read_body(environ, limit)
    if len(data) > limit:
        raise RequestEntityTooLarge()
    if not data:
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BadRequest(f"request body is not JSON: {error}") from None


def _read_body(environ: WSGIEnvironment, limit: int) -> bytes:
    """The body as werkzeug reads it for Flask, to one byte over the limit.

    A Content-Length over the limit is refused unread. Otherwise werkzeug reads until the
    stream ends, and cuts a chunked body at its limit without a word, so only the byte
    more shows such a body was too large. When the server ends the stream at the
    Content-Length itself (``wsgi.input_terminated``, as gunicorn does), one plain read
    gives the same bytes without werkzeug's wrapper, which costs more than the read."""
    length = get_content_length(environ)
    if length is not None and length > limit:
        raise RequestEntityTooLarge()
    if length is None or not environ.get("wsgi.input_terminated"):
        return get_input_stream(environ, max_content_length=limit + 1).read()
    try:
        return environ["wsgi.input"].read()
    except (OSError, ValueError):
        raise ClientDisconnected() from None


def _log_line(call: Call, status: int, elapsed: float, at: datetime) -> str:
    """One JSON line per request: when (by the app's clock, so a replay at another time logs
    that time), who asked about which model, and what was decided."""
    line: dict[str, Any] = {
        "time": at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "hook": call.hook,
        "status": status,
        "outcome": call.outcome,
        "durationMs": round(elapsed * 1000, 3),
    }
    if call.error is not None:
        line["error"] = call.error[:LOGGED_ERROR_CHARS]
    parent = call.parent
    if isinstance(parent, dict):
        metadata = field(parent, "metadata")
        line["parent"] = {
            key: value
            for key, value in (
                ("kind", parent.get("kind")),
                ("namespace", metadata.get("namespace")),
                ("name", metadata.get("name")),
                ("generation", metadata.get("generation")),
            )
            if isinstance(value, (str, int))
        }
    if call.stepped_aside is not None:
        line["steppedAside"] = call.stepped_aside.describe()
    decision = call.decision
    if decision is not None:
        line["decision"] = {"flow": decision.flow, "state": decision.state, "reason": decision.reason}
        if decision.job:
            line["decision"]["job"] = decision.job
    return orjson.dumps(line).decode()


def _configure_logging() -> None:
    """An unexpected failure's traceback goes to stderr, beside the request lines."""
    if log.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
