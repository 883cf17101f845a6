"""The Dockerfile passes hadolint, builds on the Python pyproject.toml promises, installs the
locked dependencies before the code, and its .dockerignore keeps the build context small."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests import dockerfile
from tests.installed_tool import installed_tool

REPO = Path(__file__).resolve().parents[2]


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


def test_dockerfile_installs_dependencies_before_copying_the_code() -> None:
    instructions = dockerfile.instructions()
    copies = [r for w, r in instructions if w == "COPY"]
    first_code = next(i for i, r in enumerate(copies) if r.startswith("hooks/"))
    assert copies.index("pyproject.toml ./") < first_code
    runs = [(i, r) for i, (w, r) in enumerate(instructions) if w == "RUN"]
    deps_install = next(i for i, r in runs if "pip install -r" in r)
    code_copy = next(i for i, (w, r) in enumerate(instructions) if w == "COPY" and r.startswith("hooks/"))
    assert deps_install < code_copy


def test_dockerignore_keeps_venv_git_and_caches_out_of_the_build_context() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "allow-list: exclude everything, then re-include"
    reincluded = {line[1:] for line in lines if line.startswith("!")}
    assert reincluded == {"requirements.lock", "pyproject.toml", "README.md", "hooks/"}
    for pattern in (".git", ".venv", "**/__pycache__", "**/.pytest_cache"):
        assert pattern in lines
