"""The hook as the simulator calls it: ``(path, body) -> (status_code, body)``.

``flask_hook`` goes through the HTTP shell (parsing, auth, errors, metrics) with Flask's
test client; ``core_hook`` calls the pure core directly, which is faster and shows the
core's own answers. Both read the simulator's clock, so the hook sees the cluster's time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from flask import Flask

from hooks.customize import customize, customize_keeper
from hooks.label_keeper import keep_label
from hooks.request import BadRequest
from hooks.settings import Settings
from hooks.sync import sync
from tests.metacontroller.webhook import Hook


def flask_hook(app: Flask) -> Hook:
    """A hook answered by a Flask app (``create_app(settings, clock=sim.clock)``)."""
    client = app.test_client()

    def call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        response = client.post(path, json=body)
        return response.status_code, response.get_json(silent=True)

    return call


def core_hook(settings: Settings, clock: Callable[[], datetime]) -> Hook:
    """A hook answered by ``hooks.sync``, ``hooks.customize`` and ``hooks.label_keeper``
    without HTTP."""

    def call(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        try:
            if path == "/customize":
                return 200, customize(body, settings)
            if path == "/label-customize":
                return 200, customize_keeper(body, settings)
            if path in ("/sync", "/finalize"):
                return 200, sync(body, settings, clock(), finalize=path == "/finalize").response
            if path == "/label":
                return 200, keep_label(body, settings, clock()).response
        except BadRequest as error:
            return 400, {"error": str(error)}
        return 404, {"error": f"no hook at {path}"}

    return call
