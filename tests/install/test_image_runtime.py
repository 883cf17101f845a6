"""The image's runtime, proven without Docker.

The Dockerfile's builder stage is carried out on this machine, instruction by
instruction (its COPY from the build context, its ENV, its RUN commands with the
image's paths mapped into a temporary directory): that builds the virtualenv the final
stage copies. The server is then started from that virtualenv's bin with only the final
stage's environment, from its WORKDIR, as its USER (when the tests run as root), and must
answer /readyz, a golden /sync exactly as the golden file says, and /metrics.

Building the virtualenv costs a few seconds (pip installs the runtime dependencies from
the local wheels or the package index), which it spends while the rest of the suite runs:
``-m "not image"`` leaves it out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import golden
from tests.docs import REPO
from tests.image_build import BASE_IMAGE_PATH, Image, built_image, image_user
from tests.live_server import free_port, running

pytestmark = pytest.mark.image

# A sync whose answer holds no time: it is the same at any clock (checked below).
GOLDEN_SYNC = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    built = built_image()
    try:
        yield built
    finally:
        shutil.rmtree(built.root, ignore_errors=True)


def get(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.read()


@pytest.fixture(scope="module")
def server(image: Image) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    env, workdir, command = image.runtime()
    port = free_port()
    assert command[-2:] == ["--bind", "0.0.0.0:8080"]
    command = [*command[:-1], f"127.0.0.1:{port}", "--workers", "2"]
    # The container's own /tmp is IMAGE_PATHS' stand-in here: temporary files go there.
    env = {**env, "TMPDIR": str(image.paths["/tmp"])}
    executable = shutil.which(command[0], path=env["PATH"])
    assert executable == str(image.venv / "bin" / command[0]), f"{command[0]} resolves to {executable}"
    user, group = image_user() or (None, None)
    as_user = {"user": user, "group": group, "extra_groups": []} if user is not None else {}
    with running([executable, *command[1:]], port, image.root / "server.log", cwd=workdir, env=env, **as_user) as process:
        yield f"http://127.0.0.1:{port}", process


def distributions(image: Image) -> set[str]:
    listing = subprocess.run(
        [str(image.venv / "bin" / "python"), "-c", "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"],
        capture_output=True, text=True, check=True, timeout=30, env={"PATH": BASE_IMAGE_PATH},
    )
    return {name.lower().replace("_", "-") for name in listing.stdout.split()}


def requirement_name(requirement: str) -> str:
    for separator in "<>=!~[; ":
        requirement = requirement.split(separator)[0]
    return requirement.lower().replace("_", "-")


def project() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_image_venv_holds_the_runtime_dependencies_and_the_package_without_pip_or_test_tools(image):
    installed = distributions(image)
    runtime = {requirement_name(r) for r in project()["dependencies"]}
    tests_only = {requirement_name(r) for r in project()["optional-dependencies"]["test"]} - runtime
    assert {project()["name"]} | runtime <= installed
    assert not installed & (tests_only | {"pip", "setuptools", "wheel"}), installed & (tests_only | {"pip", "setuptools", "wheel"})
    config = (image.venv / "pyvenv.cfg").read_text(encoding="utf-8")
    assert "include-system-site-packages = false" in config, "the image must not see the build machine's packages"


def test_image_runs_as_its_numeric_non_root_user(server, image):
    _, process = server
    ids = image_user()
    if ids is None:
        pytest.skip("the tests do not run as root, so they cannot switch to the image's USER; the server runs as this user")
    status = Path(f"/proc/{process.pid}/status").read_text(encoding="utf-8")
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    gid_line = next(line for line in status.splitlines() if line.startswith("Gid:"))
    assert set(uid_line.split()[1:]) == {str(ids[0])}
    assert set(gid_line.split()[1:]) == {str(ids[1])}


def test_image_server_is_ready(server):
    base, _ = server
    assert get(f"{base}/readyz") == (200, b'{"status":"ready"}')


def test_golden_sync_answer_holds_no_time():
    # Why the live answer may be compared byte for byte with the golden one.
    later = datetime(2041, 3, 7, 4, 5, 6, tzinfo=timezone.utc)
    status, body = golden.answer(GOLDEN_SYNC, golden.client(later))
    assert status == 200
    assert json.loads(body) == golden.load(golden.response_file(GOLDEN_SYNC))


def test_image_server_answers_a_golden_sync_as_the_golden_file_says(server):
    base, _ = server
    status, body = get(f"{base}/sync", GOLDEN_SYNC.read_bytes())
    assert status == 200
    assert json.loads(body) == golden.load(golden.response_file(GOLDEN_SYNC))


def test_image_server_counts_the_sync_in_its_merged_metrics(server):
    base, _ = server
    get(f"{base}/sync", GOLDEN_SYNC.read_bytes())
    _, text = get(f"{base}/metrics")
    counted = {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
        if sample.name == "basemodel_hook_requests_total" and sample.labels.get("hook") == "sync"
    }
    assert counted.get("ok", 0) >= 1
