"""The Dockerfile passes hadolint and builds on the Python pyproject.toml promises."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests import dockerfile
from tests.installed_tool import installed_tool

REPO = Path(__file__).resolve().parent.parent


def test_dockerfile_has_no_hadolint_finding() -> None:
    result = subprocess.run(
        [installed_tool("hadolint"), "--no-color", "--failure-threshold", "style", str(dockerfile.DOCKERFILE)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_image_python_is_the_oldest_python_the_project_supports() -> None:
    """The image runs on requires-python's lower bound, so that the bound is one the
    image (and the tests of it) prove, and a feature of a newer Python cannot slip in."""
    requires = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"])
    (lower,) = [Version(spec.version) for spec in requires if spec.operator == ">="]
    assert Version(dockerfile.python_version()) == lower
    assert lower in requires


def test_image_installs_the_lock_by_hash_before_the_code_and_the_package_without_dependencies() -> None:
    """Only what requirements.lock pins, by hash, enters the image; the package itself adds
    no dependency of its own choosing (``--no-deps``)."""
    builder, _ = dockerfile.stages()
    lock_copy = builder.index(("COPY", "requirements.lock ./"))
    lock_install = builder.index(("RUN", "pip install -r requirements.lock --require-hashes"))
    code_copy = builder.index(("COPY", "hooks/ ./hooks/"))
    assert lock_copy < lock_install < code_copy
    package_installs = [rest for word, rest in builder[code_copy:] if word == "RUN" and "pip install" in rest]
    assert package_installs and all(rest.startswith("pip install --no-deps . ") for rest in package_installs), package_installs
