"""The HTTP shell: bad input gets a clear 4xx, never a 200 that could delete children."""

from __future__ import annotations

import base64
import io
import json
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask.testing import FlaskClient
from werkzeug.test import EnvironBuilder

from hooks.http import app as app_module
from hooks.http.app import create_app
from hooks.settings import ServerSettings, Settings
from tests import golden

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
PARENT = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "BaseModel",
    "metadata": {"name": "llama", "namespace": "models", "uid": "7d3f0c1e", "generation": 1},
    "spec": {"storage": {"storageUri": "pvc://store/llama"}},
}
CHILDREN = {
    "Job.batch/v1": {},
    "ServiceAccount.v1": {},
    "ExtractionRecord.ome-basemodel-hook.ome.io/v1alpha1": {},
    "Role.rbac.authorization.k8s.io/v1": {},
    "RoleBinding.rbac.authorization.k8s.io/v1": {},
}


def make_client(**overrides: Any) -> FlaskClient:
    return create_app(Settings(server=ServerSettings(**overrides)), clock=lambda: NOW).test_client()


@pytest.fixture()
def client() -> FlaskClient:
    return make_client()


def sync_body(**changes: Any) -> dict[str, Any]:
    body = {"controller": {}, "parent": PARENT, "children": CHILDREN, "related": {"PersistentVolumeClaim.v1": {}, "Pod.v1": {}}, "finalizing": False}
    body.update(changes)
    return body


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'"parent"', "JSON object"),
        (b"{}", "no 'parent'"),
        (b'{"parent": "llama"}', "no 'parent'"),
    ],
)
@pytest.mark.parametrize("hook", ["sync", "customize", "finalize"])
def test_unreadable_body_gets_400_with_json_error(client: FlaskClient, hook: str, data: bytes, message: str) -> None:
    reply = client.post(f"/{hook}", data=data, content_type="application/json")
    assert reply.status_code == 400
    assert message in reply.get_json()["error"]


@pytest.mark.parametrize(
    ("parent", "message"),
    [
        ({**PARENT, "kind": "InferenceService"}, "this hook serves"),
        ({**PARENT, "apiVersion": "ome.io/v1alpha1"}, "this hook serves"),
        ({**PARENT, "metadata": {"namespace": "models"}}, "metadata.name"),
        ({**PARENT, "metadata": {"name": "llama"}}, "metadata.namespace"),
        ({**PARENT, "spec": {}}, "storageUri"),
        ({**PARENT, "spec": {"storage": {"storageUri": 42}}}, "storageUri"),
    ],
)
def test_parent_this_hook_does_not_serve_gets_400(client: FlaskClient, parent: dict[str, Any], message: str) -> None:
    reply = client.post("/sync", json=sync_body(parent=parent))
    assert reply.status_code == 400
    assert message in reply.get_json()["error"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"children": None}, "'children' must be an object"),
        ({"children": {**CHILDREN, "Job.batch/v1": []}}, "keyed by name"),
        ({"children": {k: v for k, v in CHILDREN.items() if k != "Job.batch/v1"}}, "childResources"),
        ({"children": {**CHILDREN, "Job.batch/v1": {"models/x": {"metadata": {}}}}}, "without metadata.name"),
        ({"children": {**CHILDREN, "Job.batch/v1": {"models/x": "job"}}}, "not an object"),
        ({"related": {}}, "customize hook"),
        ({"related": []}, "'related' must be an object"),
    ],
)
def test_request_missing_what_the_pvc_flow_needs_gets_400_and_keeps_children(client: FlaskClient, changes: dict[str, Any], message: str) -> None:
    reply = client.post("/sync", json=sync_body(**changes))
    assert reply.status_code == 400
    assert message in reply.get_json()["error"]


@pytest.mark.parametrize("missing", ["ServiceAccount.v1", "RoleBinding.rbac.authorization.k8s.io/v1"])
def test_running_job_survives_a_request_without_a_child_type(client: FlaskClient, missing: str) -> None:
    """Without a child type's map the hook cannot know what exists: it refuses rather than
    answer a 200 that would make Metacontroller delete the running Job."""
    request = golden.load(golden.FIXTURES / "sync" / "basemodel-job-running-v1-keys.request.json")
    assert client.post("/sync", json=request).status_code == 200
    del request["children"][missing]
    reply = client.post("/sync", json=request)
    assert reply.status_code == 400
    assert missing in reply.get_json()["error"]


def test_body_over_the_limit_gets_413(client: FlaskClient) -> None:
    small = make_client(max_request_bytes=2048)
    reply = small.post("/sync", data=b"{" + b" " * 4096 + b"}", content_type="application/json")
    assert reply.status_code == 413
    assert "HOOK_MAX_REQUEST_BYTES" in reply.get_json()["error"]


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
@pytest.mark.parametrize(("size", "status"), [(2048, 400), (2049, 413), (100_000, 413)])
def test_a_body_is_measured_against_the_limit_however_it_is_sent(chunked: bool, size: int, status: int) -> None:
    """A chunked body has no Content-Length to refuse up front; it must not be cut to
    the limit and then judged as broken JSON. The 400s: a valid object without 'parent'."""
    body = b"{" + b" " * (size - 2) + b"}"
    sent: dict[str, Any] = (
        {"input_stream": io.BytesIO(body), "headers": {"Transfer-Encoding": "chunked"},
         "environ_overrides": {"wsgi.input_terminated": True}}  # as gunicorn hands a chunked body over
        if chunked else {"data": body}
    )
    reply = make_client(max_request_bytes=2048).post("/sync", content_type="application/json", **sent)
    assert reply.status_code == status, reply.get_json()
    assert ("HOOK_MAX_REQUEST_BYTES" in reply.get_json()["error"]) == (status == 413)


def test_unexpected_failure_gets_500_not_a_partial_200(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(app_module, "sync", explode)
    reply = client.post("/sync", json=sync_body())
    assert reply.status_code == 500
    assert "KeyError" in reply.get_json()["error"]


def test_unknown_path_and_wrong_method_answer_json(client: FlaskClient) -> None:
    assert client.post("/nope", json={}).status_code == 404
    assert "error" in client.post("/nope", json={}).get_json()
    assert client.get("/sync").status_code == 405


@pytest.mark.parametrize(("method", "path"), [("POST", "/sync/"), ("GET", "/health"), ("POST", "/nodes/sync")])
def test_an_unknown_path_is_answered_with_every_path_the_hook_serves(client: FlaskClient, method: str, path: str) -> None:
    reply = client.open(path, method=method, json={})
    assert reply.status_code == 404
    assert reply.get_json() == {"error": f"no such path {path}; this hook serves POST /sync, POST /customize, POST /finalize, "
                                         "POST /label, POST /label-customize, GET /healthz, GET /readyz, GET /metrics"}


def test_health_and_readiness(client: FlaskClient) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_bearer_token_is_required_when_configured() -> None:
    client = make_client(auth_token="s3cr3t-token")
    assert client.post("/sync", json=sync_body()).status_code == 401
    assert client.post("/sync", json=sync_body(), headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/sync", json=sync_body(), headers={"Authorization": "Basic s3cr3t-token"}).status_code == 401
    reply = client.post("/sync", json=sync_body(), headers={"Authorization": "Bearer s3cr3t-token"})
    assert reply.status_code == 200
    assert client.get("/healthz").status_code == 200


def test_basic_auth_is_required_when_configured() -> None:
    client = make_client(basic_auth_username="metacontroller", basic_auth_password="pa:ss")

    def basic(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    assert client.post("/customize", json={"parent": PARENT}, headers=basic("metacontroller", "nope")).status_code == 401
    assert client.post("/customize", json={"parent": PARENT}, headers={"Authorization": "Basic !!!"}).status_code == 401
    reply = client.post("/customize", json={"parent": PARENT}, headers=basic("metacontroller", "pa:ss"))
    assert reply.status_code == 200
    assert client.post("/customize", json={"parent": PARENT}).headers["WWW-Authenticate"].startswith("Basic")


def test_finalize_path_finalizes_even_without_the_flag(client: FlaskClient) -> None:
    reply = client.post("/finalize", json=sync_body(finalizing=False))
    assert reply.status_code == 200
    assert reply.get_json()["finalized"] is True
    assert reply.get_json()["children"] == []


def test_metrics_count_requests_decisions_and_errors(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    client.post("/sync", json=sync_body())
    client.post("/sync", data=b"nope")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'basemodel_hook_requests_total{hook="sync",outcome="ok"} 1.0' in text
    assert 'basemodel_hook_requests_total{hook="sync",outcome="bad_request"} 1.0' in text
    assert 'basemodel_hook_decisions_total{flow="pvc",reason="PVCNotFound",state="Failed"} 1.0' in text
    assert 'basemodel_hook_request_duration_seconds_count{hook="sync",outcome="ok"} 1.0' in text
    assert 'basemodel_hook_request_duration_seconds_count{hook="sync",outcome="bad_request"} 1.0' in text


def test_label_keeper_answers_its_decorator_request_and_refuses_a_composite_one(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    request_file = golden.FIXTURES / "label" / "basemodel-pvc-new.request.json"
    reply = client.post("/label", data=request_file.read_bytes())
    assert reply.status_code == 200 and reply.get_json() == golden.load(golden.response_file(request_file))
    refused = client.post("/label", json={"parent": golden.load(request_file)["object"]})
    assert refused.status_code == 400 and "no 'object'" in refused.get_json()["error"]
    text = client.get("/metrics").get_data(as_text=True)
    assert 'basemodel_hook_requests_total{hook="label",outcome="ok"} 1.0' in text
    assert 'basemodel_hook_requests_total{hook="label",outcome="bad_request"} 1.0' in text


STEPPED_ASIDE = {
    "label": golden.FIXTURES / "label" / "basemodel-pvc-omes-chart-clusterrole-hands-back.request.json",
    "sync": golden.FIXTURES / "sync" / "basemodel-omes-backend-stamped-the-status-hands-back.request.json",
}


@pytest.mark.parametrize(("hook", "found"), [("label", "its chart's ClusterRole ome-model-metadata"),
                                             ("sync", "its PVC backend wrote the status: status.lastReconcileTime")])
def test_a_model_handed_to_omes_own_pvc_backend_is_counted_and_logged_with_the_evidence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, hook: str, found: str
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    client = make_client()
    [message] = request_log(capsys, lambda: client.post(f"/{hook}", data=STEPPED_ASIDE[hook].read_bytes()))
    assert json.loads(message)["steppedAside"] == f"OME serves pvc:// models itself ({found})"
    client.post(f"/{hook}", data=(golden.FIXTURES / hook / "basemodel-pvc-new.request.json").read_bytes()
                if hook == "label" else json.dumps(sync_body()).encode())
    text = client.get("/metrics").get_data(as_text=True)
    assert f'basemodel_hook_stepped_aside_total{{hook="{hook}"}} 1.0' in text


def test_metrics_count_unexpected_errors_by_type(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)

    def explode(*args: Any, **kwargs: Any) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(app_module, "sync", explode)
    client.post("/sync", json=sync_body())
    text = client.get("/metrics").get_data(as_text=True)
    assert 'basemodel_hook_errors_total{error="KeyError",hook="sync"} 1.0' in text
    assert 'basemodel_hook_requests_total{hook="sync",outcome="error"} 1.0' in text


def request_log(capsys: pytest.CaptureFixture[str], send: Callable[[], object]) -> list[str]:
    """The request log lines written to stderr while ``send`` runs."""
    capsys.readouterr()
    send()
    return capsys.readouterr().err.splitlines()


def test_one_json_log_line_per_request_without_secrets(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Its duration is the time the call took, in milliseconds to the microsecond."""
    ticks = iter([100.0, 100.0123456])
    monkeypatch.setattr(app_module, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    client = make_client(auth_token="s3cr3t-token")
    [message] = request_log(capsys, lambda: client.post("/sync", json=sync_body(), headers={"Authorization": "Bearer s3cr3t-token"}))
    line = json.loads(message)
    assert line["hook"] == "sync" and line["status"] == 200
    assert line["parent"] == {"kind": "BaseModel", "namespace": "models", "name": "llama", "generation": 1}
    assert line["decision"] == {"flow": "pvc", "state": "Failed", "reason": "PVCNotFound"}
    assert line["durationMs"] == 12.346
    assert "error" not in line
    assert "s3cr3t" not in message


TOKEN = {"Authorization": "Bearer s3cr3t-token"}


@pytest.mark.parametrize(
    ("send", "status", "error"),
    [
        (lambda client: client.post("/sync", data=b"{not json", headers=TOKEN), 400, "request body is not JSON"),
        (lambda client: client.post("/sync", json=sync_body(parent={**PARENT, "kind": "Pod"}), headers=TOKEN), 400, "parent kind 'Pod'"),
        (lambda client: client.post("/sync", json=sync_body(), headers={"Authorization": "Bearer wrong"}), 401, "missing or wrong credentials"),
        (lambda client: client.post("/sync", data=b"{" + b" " * 4096 + b"}", headers=TOKEN), 413, "HOOK_MAX_REQUEST_BYTES"),
    ],
    ids=["not-json", "wrong-kind", "unauthorized", "too-large"],
)
def test_an_error_answer_is_logged_with_its_text(
    capsys: pytest.CaptureFixture[str], send: Callable[[FlaskClient], Any], status: int, error: str
) -> None:
    """Whoever reads the hook's log sees why a request was refused, not only that it was."""
    client = make_client(auth_token=TOKEN["Authorization"].removeprefix("Bearer "), max_request_bytes=2048)
    [message] = request_log(capsys, lambda: send(client))
    line = json.loads(message)
    assert line["status"] == status
    assert error in line["error"]
    assert "s3cr3t" not in message


def wsgi_answer(wsgi: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Status line, header list and body exactly as a WSGI server receives them."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    body = b"".join(wsgi(environ, lambda status, headers, exc_info=None: started.append((status, list(headers)))))
    [(status, headers)] = started
    return status, headers, body


class BrokenConnection(io.BytesIO):
    """A client that hung up: every read fails as a socket's would."""

    def read(self, size: int | None = -1) -> bytes:
        raise ConnectionResetError("peer gone")

    def readinto(self, buffer: Any) -> int:
        raise ConnectionResetError("peer gone")


def hook_environ(path: str = "/sync", data: bytes | None = None, method: str = "POST", chunked: bool = False,
                 headers: dict[str, str] | None = None, server_ends_stream: bool = False,
                 content_length: int | None = None, broken: bool = False) -> dict[str, Any]:
    """A WSGI environ (its input stream can be read once). ``server_ends_stream`` is
    gunicorn's way: the input ends at the Content-Length, and ``wsgi.input_terminated`` says so."""
    body = json.dumps(sync_body()).encode() if data is None else data
    environ = EnvironBuilder(path=path, method=method, data=body, headers=headers,
                             content_type="application/json").get_environ()
    if chunked:
        del environ["CONTENT_LENGTH"]
    if chunked or server_ends_stream:
        environ["wsgi.input_terminated"] = True
    if content_length is not None:
        environ["CONTENT_LENGTH"] = str(content_length)
    if broken:
        environ["wsgi.input"] = BrokenConnection(body)
    return environ


LIMIT = 100_000
TOO_LARGE = b"{" + b" " * LIMIT + b"}"
FIXTURE_BODY = (golden.FIXTURES / "sync" / "basemodel-job-running-v1-keys.request.json").read_bytes()
ANSWERED_IN_FRONT: dict[str, dict[str, Any]] = {
    "sync": {"data": FIXTURE_BODY},
    "customize": {"path": "/customize", "data": (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes()},
    "finalize": {"path": "/finalize", "data": (golden.FIXTURES / "finalize" / "basemodel-pvc-children-gone.request.json").read_bytes()},
    "chunked": {"data": FIXTURE_BODY, "chunked": True},
    "query-string": {"path": "/sync?watch=1", "data": FIXTURE_BODY},
    "empty": {"data": b""},
    "not-json": {"data": b"{nope"},
    "not-an-object": {"data": b"[1]"},
    "too-large": {"data": TOO_LARGE},
    "too-large-chunked": {"data": TOO_LARGE, "chunked": True},
    "wrong-credentials": {"headers": {"Authorization": "Bearer wrong"}},
    "as-gunicorn-sends": {"data": FIXTURE_BODY, "server_ends_stream": True},
    "as-gunicorn-sends-too-large": {"data": TOO_LARGE, "server_ends_stream": True},
    "as-gunicorn-sends-empty": {"data": b"", "server_ends_stream": True},
    "as-gunicorn-sends-connection-reset": {"data": FIXTURE_BODY, "server_ends_stream": True, "broken": True},
    "body-shorter-than-content-length": {"data": b'{"parent": {}}', "content_length": 100},
    "content-length-not-a-number": {"data": FIXTURE_BODY, "content_length": -1},
}


@pytest.mark.parametrize("case", ANSWERED_IN_FRONT, ids=list(ANSWERED_IN_FRONT))
@pytest.mark.parametrize("token", ["", "s3cr3t-token"], ids=["no-auth", "bearer"])
def test_hooks_answered_in_front_of_flask_answer_byte_for_byte_as_flasks_routes(case: str, token: str) -> None:
    """The dispatch in front of Flask must not be visible: the same status line (werkzeug's
    wording), headers in the same order, and body as Flask's own route for the hook."""
    app = create_app(Settings(server=ServerSettings(auth_token=token, max_request_bytes=LIMIT)), clock=lambda: NOW)
    request = {"headers": {"Authorization": f"Bearer {token}"}, **ANSWERED_IN_FRONT[case]}
    in_front = wsgi_answer(app.wsgi_app, hook_environ(**request))
    assert in_front == wsgi_answer(app.wsgi_app.flask_wsgi, hook_environ(**request))


def test_a_hook_answer_has_json_type_length_and_challenge_headers() -> None:
    app = create_app(Settings(server=ServerSettings(auth_token="s3cr3t-token")), clock=lambda: NOW)
    status, headers, body = wsgi_answer(app.wsgi_app, hook_environ())
    assert status == "401 UNAUTHORIZED"
    assert headers == [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("WWW-Authenticate", 'Bearer realm="basemodel-hook"'),
    ]
    status, headers, body = wsgi_answer(app.wsgi_app, hook_environ(headers={"Authorization": "Bearer s3cr3t-token"}))
    assert (status, headers) == ("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    assert json.loads(body)["status"]["state"] == "Failed"


@pytest.mark.parametrize(
    ("path", "method", "status"),
    [("/sync", "GET", "405 METHOD NOT ALLOWED"), ("/finalize", "PUT", "405 METHOD NOT ALLOWED"),
     ("/sync/", "POST", "404 NOT FOUND"), ("/SYNC", "POST", "404 NOT FOUND"), ("/healthz", "POST", "405 METHOD NOT ALLOWED")],
)
def test_other_methods_and_paths_are_flasks_json_refusals(path: str, method: str, status: str) -> None:
    app = create_app(Settings(), clock=lambda: NOW)
    answered, headers, body = wsgi_answer(app.wsgi_app, hook_environ(path, method=method))
    assert answered == status
    assert ("Content-Type", "application/json") in headers and "error" in json.loads(body)

