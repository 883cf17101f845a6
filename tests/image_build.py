"""The Dockerfile's stages carried out on this machine, without Docker.

The builder stage runs instruction by instruction (its COPY from the build context, its
ENV, its RUN commands with the image's paths mapped into a temporary directory): that
builds the virtualenv the final stage copies. The build starts once, in a thread of its
own, when the session collects an ``image`` test (``tests/conftest.py``), so that it runs
while the rest of the suite does.
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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import dockerfile
from tests.docs import REPO

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


def built_image() -> Image:
    """The image, once its build (started here if need be) has finished."""
    start_building()
    assert _build is not None
    return _build.result()
