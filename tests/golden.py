"""Golden files: each fixture is a saved Metacontroller request and the answer we expect.

``tests/fixtures/<hook>/<case>.request.json`` is the body Metacontroller would POST to
``/<hook>`` (``nodes/sync`` is the folder of ``/nodes/sync``); ``<case>.response.json``
beside it is the expected 200 answer at the fixed clock ``FIXTURE_NOW``. After a deliberate behaviour change, regenerate the answers with

    python -m tests.golden

and review the diff: a changed golden file is a changed behaviour.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from hooks.http.app import HOOKS, create_app
from hooks.pvc.metadata_job import build_record
from hooks.pvc.observation import RECORDS
from hooks.pvc.storage_uri import parse_pvc_uri
from hooks.request import read_model
from hooks.settings import Settings
from hooks.upstream_backend import written_by_ome_backend

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def fixture_settings() -> Settings:
    """The defaults: golden answers document what an unconfigured install does."""
    return Settings()


def client(now: datetime = FIXTURE_NOW, settings: Settings | None = None) -> FlaskClient:
    return create_app(settings or fixture_settings(), clock=lambda: now).test_client()


def cases() -> list[Path]:
    """Every request file, in a stable order."""
    return sorted(path for hook in HOOKS for path in (FIXTURES / hook).glob("*.request.json"))


def hook_of(request_file: Path) -> str:
    return request_file.parent.relative_to(FIXTURES).as_posix()


def response_file(request_file: Path) -> Path:
    return request_file.with_name(request_file.name.replace(".request.json", ".response.json"))


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def observed_record(request: dict[str, Any]) -> dict[str, Any]:
    """The spec of a saved request's ExtractionRecord (the hook's memory), to change in place."""
    [record] = request["children"][RECORDS].values()
    return record["spec"]


def recorded(request: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A saved request with an ExtractionRecord of ``spec`` observed, as Metacontroller stores
    the model's record (its controllerRef, its ``controller-uid`` label); its spec, to change
    in place."""
    parent = request["parent"]
    model = read_model(parent)
    namespace = parse_pvc_uri(model.storage_uri, model.namespace).namespace
    record = build_record(model, namespace, {"storageUri": model.storage_uri, **spec})
    metadata = record["metadata"]
    metadata["labels"]["controller-uid"] = parent["metadata"]["uid"]
    metadata.update(uid="0b6f2c1e-5d7a-4c3b-9e8f-1a2b3c4d5e6f", resourceVersion="48216001", generation=1,
                    creationTimestamp="2026-11-30T11:59:00Z",
                    ownerReferences=[{"apiVersion": parent["apiVersion"], "kind": parent["kind"], "name": parent["metadata"]["name"],
                                      "uid": parent["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}])
    request["children"][RECORDS] = {f"{namespace}/{metadata['name']}": record}
    return record["spec"]


def hands_omes_status_back(request: dict[str, Any]) -> bool:
    """Whether a saved sync or finalize request's model has a status OME's own PVC backend
    wrote (OME v1.2.2's), which the answer hands back as OME's: its reasons are OME's and
    its schema is the CRD OME's upgrade applied, not the hook's catalogue and CRDs."""
    status = request["parent"].get("status")
    return isinstance(status, dict) and written_by_ome_backend(status)


def answer(request_file: Path, test_client: FlaskClient | None = None) -> tuple[int, bytes]:
    """POST the saved request to its hook and return the status code and body bytes."""
    reply = (test_client or client()).post(f"/{hook_of(request_file)}", data=request_file.read_bytes())
    return reply.status_code, reply.get_data()


def regenerate() -> int:
    """Rewrite every response file from the current code."""
    test_client = client()
    for request_file in cases():
        with contextlib.redirect_stderr(io.StringIO()):
            status, body = answer(request_file, test_client)
        if status != 200:
            print(f"{request_file}: answered {status}: {body.decode()}", file=sys.stderr)
            return 1
        text = json.dumps(json.loads(body), indent=2, ensure_ascii=False) + "\n"
        response_file(request_file).write_text(text, encoding="utf-8")
        print(f"wrote {response_file(request_file).relative_to(FIXTURES.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(regenerate())
