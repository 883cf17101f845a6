"""The baseline the hook is measured against: the least a Flask hook could do.

It reads the body, parses it with orjson (as the hook does) and answers a canned JSON
answer of the size the hook gives to that request, so both servers move the same bytes
and the difference between them is what the hook adds: authentication, the decision,
serialization, metrics and the log line. The bench writes the canned answers to the file
named by ``BENCH_CANNED_ANSWERS`` (a JSON object: request length -> answer) before it
starts this app under gunicorn as ``bare_app:create_app()``.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from flask import Flask, Response, request


def create_app() -> Flask:
    canned = {int(length): answer.encode() for length, answer in
              orjson.loads(Path(os.environ["BENCH_CANNED_ANSWERS"]).read_bytes()).items()}
    app = Flask(__name__)

    @app.post("/<hook>")
    def answer(hook: str) -> Response:
        body = request.get_data()
        orjson.loads(body)
        return Response(canned[len(body)], mimetype="application/json")

    @app.get("/readyz")
    def ready() -> Response:
        return Response(b'{"status":"ready"}', mimetype="application/json")

    return app
