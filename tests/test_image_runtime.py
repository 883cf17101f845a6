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
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import dockerfile, golden
from tests.live_server import free_port, running

pytestmark = pytest.mark.image

REPO = Path(__file__).resolve().parents[1]
# A sync whose answer holds no time: it is the same at any clock (checked below).
GOLDEN_SYNC = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
# Where the image keeps things, and what stands in for each here.
IMAGE_PATHS = ("/opt/venv", "/src", "/tmp")
# PATH of the python base images, which the Dockerfile's ENV PATH extends.
BASE_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STEP_TIMEOUT = 120


class Image:
    """The Dockerfile's stages carried out in a directory of this machine."""

    def __init__(self, root: Path, python: str) -> None:
        self.root = root
        self.paths = {image: root / image.strip("/").replace("/", "-") for image in IMAGE_PATHS}
        for directory in self.paths.values():
            directory.mkdir(mode=0o755, exist_ok=True)
        # `python` in a RUN before the virtualenv exists: the base image's interpreter.
        self.shims = root / "base-image-bin"
        self.shims.mkdir(mode=0o755)
        (self.shims / "python").symlink_to(python)
        builder, final = dockerfile.stages()
        self.final_stage = final
        self.build(builder)

    def host(self, text: str) -> str:
        """The image's paths in ``text`` replaced by where they are here."""
        pattern = "|".join(re.escape(image) for image in sorted(self.paths, key=len, reverse=True))
        return re.sub(rf"(?<![\w./-])({pattern})(?![\w.-])", lambda found: str(self.paths[found.group(1)]), text)

    def environment(self, stage: list[dockerfile.Instruction], path: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for word, rest in stage:
            if word == "ENV":
                for assignment in shlex.split(rest):
                    name, _, value = assignment.partition("=")
                    env[name] = self.host(value).replace("$PATH", env.get("PATH", path))
        return env

    def build(self, stage: list[dockerfile.Instruction]) -> None:
        cwd = self.root
        env = {**os.environ, "PATH": f"{self.shims}:{os.environ['PATH']}"}
        for word, rest in stage:
            if word == "ENV":
                env.update(self.environment([(word, rest)], env["PATH"]))
            elif word == "WORKDIR":
                cwd = Path(self.host(rest))
                cwd.mkdir(parents=True, exist_ok=True)
            elif word == "COPY":
                *sources, target = shlex.split(rest)
                for source in sources:
                    copy_from_context(REPO / source, cwd / target)
            elif word == "RUN":
                subprocess.run(["/bin/sh", "-c", self.host(rest)], cwd=cwd, env=env, check=True, timeout=STEP_TIMEOUT, capture_output=True)
            else:
                assert word in {"FROM", "ARG", "LABEL"}, f"the builder stage uses {word}, which this test does not carry out"

    def runtime(self) -> tuple[dict[str, str], Path, list[str]]:
        """The final stage's environment, WORKDIR and command (ENTRYPOINT + CMD)."""
        env = self.environment(self.final_stage, BASE_IMAGE_PATH)
        instructions = dict(self.final_stage)
        for word, rest in self.final_stage:
            if word == "COPY":
                source, target = shlex.split(rest.replace("--from=builder", ""))
                assert self.host(source) == self.host(target), "the final stage copies the builder's virtualenv in place"
        command = json.loads(instructions["ENTRYPOINT"]) + json.loads(instructions["CMD"])
        return env, Path(self.host(instructions["WORKDIR"])), command

    @property
    def venv(self) -> Path:
        return self.paths["/opt/venv"]


def copy_from_context(source: Path, target: Path) -> None:
    """COPY as the .dockerignore allows it: without caches or bytecode."""
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".mypy_cache", ".ruff_cache")
    if source.is_dir():
        shutil.copytree(source, target, ignore=ignored, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target / source.name if target.is_dir() else target)


def runs_as(ids: tuple[int, int] | None, python: str) -> bool:
    """Whether the unprivileged user can run this interpreter (it may sit under /root)."""
    user, group = ids or (None, None)
    try:
        probe = subprocess.run([python, "-c", "pass"], user=user, group=group, extra_groups=[] if ids else None, capture_output=True, timeout=30, check=False)
    except PermissionError:
        return False
    return probe.returncode == 0


def image_user() -> tuple[int, int] | None:
    """The Dockerfile's USER, when these tests may switch to it (they run as root)."""
    user = dict(dockerfile.stages()[-1]).get("USER")
    assert user and all(part.isdigit() for part in user.split(":")), f"USER {user!r} must be numeric"
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0, "the image must not run as root"
    return (uid, gid) if os.geteuid() == 0 else None


def base_interpreter(ids: tuple[int, int] | None) -> str:
    """A Python like the base image's: this one's, or the system's if the image user cannot reach this one."""
    candidates = [os.path.realpath(getattr(sys, "_base_executable", sys.executable))]
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path=BASE_IMAGE_PATH)
    if system:
        candidates.append(system)
    for python in candidates:
        if ids is None or runs_as(ids, python):
            return python
    pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that uid {ids[0]} may run (tried {candidates})")


def _build_image() -> Image:
    root = Path(tempfile.mkdtemp(prefix="basemodel-hook-image-"))
    root.chmod(0o755)
    try:
        return Image(root, base_interpreter(image_user()))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


# The build is pip's work in subprocesses, so it runs in a thread of its own from the moment
# the tests are collected (tests/conftest.py starts it), on a second core while the rest of
# the suite runs; the first test that needs the image waits for it.
_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image-build")
_build: Future[Image] | None = None


def start_building() -> None:
    """Start building the image's virtualenv, once."""
    global _build
    if _build is None:
        _build = _BUILDER.submit(_build_image)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    start_building()
    assert _build is not None
    built = _build.result()
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
