"""The thin HTTP shell: parse, authenticate, call the core, serialize, count and log.

Every failure is answered with a JSON ``{"error": ...}`` and a non-200 status: for
Metacontroller only a 200 changes anything, so an answer we are unsure of must never be
a 200.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timezone
from typing import Any, Callable

import orjson
from flask import Flask, Response, g, request
from werkzeug.exceptions import HTTPException

from hooks.auth import auth_scheme, authorized
from hooks.metrics import CONTENT_TYPE, Metrics
from hooks.observed import BadRequest, field
from hooks.settings import Settings
from hooks.customize import customize
from hooks.sync import Decision, sync

Clock = Callable[[], datetime]
HOOKS = ("sync", "customize", "finalize")

log = logging.getLogger("hooks.requests")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _json(payload: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status=status, mimetype="application/json")


def create_app(settings: Settings | None = None, clock: Clock = _utc_now) -> Flask:
    """Build an app; without ``settings`` they are read from the environment (the WSGI entry)."""
    settings = settings if settings is not None else Settings.from_env(os.environ)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    metrics = Metrics()
    _configure_logging()

    def answer(hook: str) -> Response:
        """One hook call; every way out is a JSON answer, and only a decision is a 200."""
        started = time.perf_counter()
        g.hook, g.outcome, g.decision, g.parent = hook, "ok", None, None
        try:
            if not authorized(request.headers.get("Authorization"), settings):
                g.outcome = "unauthorized"
                response = _json({"error": "missing or wrong credentials"}, 401)
                response.headers["WWW-Authenticate"] = f'{auth_scheme(settings)} realm="basemodel-hook"'
                return response
            body = _parse_body()
            g.parent = body.get("parent") if isinstance(body, dict) else None
            if hook == "customize":
                return _json(customize(body, settings))
            decision = sync(body, settings, clock(), finalize=hook == "finalize")
            g.decision = decision
            metrics.decisions.labels(decision.flow, decision.state, decision.reason).inc()
            return _json(decision.response)
        except BadRequest as error:
            g.outcome = "bad_request"
            return _json({"error": str(error)}, 400)
        except HTTPException:
            raise
        except Exception as error:  # noqa: BLE001 - any bug must become a 5xx, never a partial 200
            g.outcome = "error"
            metrics.errors.labels(hook, type(error).__name__).inc()
            log.exception("hook %s failed", hook)
            return _json({"error": f"internal error ({type(error).__name__}); see the hook's log"}, 500)
        finally:
            g.elapsed = time.perf_counter() - started

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
        """Werkzeug's own refusals (size limit, unknown path, wrong method) as JSON too."""
        if error.code == 413:
            g.outcome = "too_large"
            message = f"request body over {settings.max_request_bytes} bytes (HOOK_MAX_REQUEST_BYTES)"
        else:
            g.outcome = "bad_request"
            message = error.description or error.name
        return _json({"error": message}, error.code or 400)

    @app.after_request
    def account(response: Response) -> Response:
        """Count and log after the answer is built, so a failure to log cannot change it."""
        hook = g.get("hook")
        if hook is not None:
            elapsed = g.get("elapsed") or 0.0
            outcome = g.get("outcome", "ok")
            metrics.requests.labels(hook, outcome).inc()
            metrics.latency.labels(hook, outcome).observe(elapsed)
            log.info(_log_line(hook, response.status_code, elapsed))
        return response

    return app


def _parse_body() -> Any:
    """Metacontroller always sends JSON; anything else is refused before the core sees it.

    orjson, because parsing Metacontroller's requests (every child and related object in
    full) is most of what answering costs."""
    data = request.get_data(cache=False)
    if not data:
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BadRequest(f"request body is not JSON: {error}") from None


def _log_line(hook: str, status: int, elapsed: float) -> str:
    """One JSON line per request: who asked about which model, and what was decided."""
    line: dict[str, Any] = {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "hook": hook,
        "status": status,
        "outcome": g.get("outcome", "ok"),
        "durationMs": round(elapsed * 1000, 3),
    }
    parent = g.get("parent")
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
    decision: Decision | None = g.get("decision")
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
