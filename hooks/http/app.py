"""The thin HTTP shell: parse, authenticate, call the core, serialize, count and log.

Every failure is answered with a JSON ``{"error": ...}`` and a non-200 status: for
Metacontroller only a 200 changes anything, so an answer we are unsure of must never be
a 200.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from hooks.http.auth import auth_scheme, authorized
from hooks.http.metrics import CONTENT_TYPE, Metrics
from hooks.observed import BadRequest, field
from hooks.settings import Settings
from hooks.customize import customize
from hooks.nodes import decorator
from hooks.sync import Decision, sync

Clock = Callable[[], datetime]
HOOKS = ("sync", "customize", "finalize", "nodes/customize", "nodes/sync")

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


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _json(payload: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def create_app(settings: Settings | None = None, clock: Clock = _utc_now) -> Flask:
    """Build an app; without ``settings`` they are read from the environment (the WSGI entry)."""
    settings = settings if settings is not None else Settings.from_env(os.environ)
    app = Flask(__name__)
    # One byte over the limit: werkzeug cuts a chunked body (no Content-Length) at this
    # length without a word, so only reading one byte more shows the body was too large.
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes + 1
    metrics = Metrics()
    _configure_logging()

    def answer(hook: str) -> Response:
        """One hook call, counted and logged once its answer is built."""
        started = time.perf_counter()
        call = Call(hook)
        response = respond(call)
        elapsed = time.perf_counter() - started
        metrics.requests.labels(hook, call.outcome).inc()
        metrics.latency.labels(hook, call.outcome).observe(elapsed)
        if call.decision is not None:
            decision = call.decision
            metrics.decisions.labels(decision.flow, decision.state, decision.reason).inc()
        log.info(_log_line(call, response.status_code, elapsed))
        return response

    def respond(call: Call) -> Response:
        """Every way out is a JSON answer, and only a decision is a 200."""
        try:
            if not authorized(request.headers.get("Authorization"), settings):
                response = _refuse(call, "unauthorized", 401, "missing or wrong credentials")
                response.headers["WWW-Authenticate"] = f'{auth_scheme(settings)} realm="basemodel-hook"'
                return response
            body = _parse_body(settings.max_request_bytes)
            call.parent = body.get("parent") if isinstance(body, dict) else None
            if call.hook == "customize":
                return _json(customize(body, settings))
            if call.hook == "nodes/customize":
                return _json(decorator.customize(body, settings))
            if call.hook == "nodes/sync":
                return _json(decorator.sync(body, settings))
            call.decision = sync(body, settings, clock(), finalize=call.hook == "finalize")
            return _json(call.decision.response)
        except BadRequest as error:
            return _refuse(call, "bad_request", 400, str(error))
        except RequestEntityTooLarge:
            return _refuse(call, "too_large", 413, f"request body over {settings.max_request_bytes} bytes (HOOK_MAX_REQUEST_BYTES)")
        except HTTPException as error:
            return _refuse(call, "bad_request", error.code or 400, error.description or error.name)
        except Exception as error:  # noqa: BLE001 - any bug must become a 5xx, never a partial 200
            metrics.errors.labels(call.hook, type(error).__name__).inc()
            log.exception("hook %s failed", call.hook)
            return _refuse(call, "error", 500, f"internal error ({type(error).__name__}); see the hook's log")

    for hook in HOOKS:
        app.add_url_rule(f"/{hook}", hook, lambda hook=hook: answer(hook), methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        return _json({"status": "ready"})

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(metrics.exposition(), mimetype=CONTENT_TYPE.split(";")[0], content_type=CONTENT_TYPE)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        """Werkzeug's refusals outside a hook call (unknown path, wrong method) as JSON too."""
        return _json({"error": error.description or error.name}, error.code or 400)

    return app


def _refuse(call: Call, outcome: str, status: int, error: str) -> Response:
    """An error answer; its text also goes into the call's log line."""
    call.outcome, call.error = outcome, error
    return _json({"error": error}, status)


def _parse_body(limit: int) -> Any:
    """Metacontroller always sends JSON; anything else is refused before the core sees it.

    orjson, because parsing Metacontroller's requests (every child and related object in
    full) is most of what answering costs."""
    data = request.get_data(cache=False)
    if len(data) > limit:
        raise RequestEntityTooLarge()
    if not data:
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BadRequest(f"request body is not JSON: {error}") from None


def _log_line(call: Call, status: int, elapsed: float) -> str:
    """One JSON line per request: who asked about which model, and what was decided."""
    line: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
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
    decision = call.decision
    if decision is not None:
        line["decision"] = {"flow": decision.flow, "state": decision.state, "reason": decision.reason}
        if decision.job:
            line["decision"]["job"] = decision.job
    return orjson.dumps(line).decode()


def _configure_logging() -> None:
    """Request lines go to stderr as bare JSON, one per line, for log collectors."""
    if log.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
