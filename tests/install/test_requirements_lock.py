"""requirements.lock, which the image installs, keeps step with pyproject.toml.

pip-compile writes it from pyproject.toml's dependencies: every package pinned to one
version with its hashes, each annotated with what pulled it in (``# via``). A dependency
added to pyproject.toml but not to the lock would be missing from the image (pip refuses
an unhashed one), and a lower bound raised in pyproject.toml but not in the lock would
ship a version the project says it does not support.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# How pip-compile names the project in a ``# via`` annotation.
PROJECT_VIA = f"{PROJECT['name']} (pyproject.toml)"


@dataclass(frozen=True)
class Locked:
    requirement: Requirement
    hashes: tuple[str, ...]
    via: tuple[str, ...]


def locked() -> dict[str, Locked]:
    """The lock's packages by canonical name, read from pip-compile's layout: a pin and its
    ``--hash`` options on continued lines, then indented comments, ``# via`` naming one
    package or, alone, followed by one line per package."""
    entries: list[list[str]] = []
    for line in LOCK.read_text(encoding="utf-8").replace("\\\n", " ").splitlines():
        if line.strip() and not line.startswith(("#", " ")):
            entries.append([line])
        elif line.startswith(" ") and entries:
            entries[-1].append(line.strip().lstrip("#").strip())
    found: dict[str, Locked] = {}
    for pin, *comments in entries:
        requirement, *hashes = pin.split("--hash=")
        via = [comment.removeprefix("via").strip() if index == 0 else comment for index, comment in enumerate(comments)]
        parsed = Requirement(requirement.strip())
        found[canonicalize_name(parsed.name)] = Locked(parsed, tuple(h.strip() for h in hashes), tuple(v for v in via if v))
    return found


def pinned_version(entry: Locked) -> Version:
    (specifier,) = entry.requirement.specifier
    assert specifier.operator == "==", entry.requirement
    return Version(specifier.version)


def runtime_requirements() -> list[Requirement]:
    return [Requirement(line) for line in PROJECT["dependencies"]]


def test_lock_pins_every_package_to_one_version_with_its_hashes() -> None:
    assert locked(), "the lock holds no package"
    for name, entry in locked().items():
        pinned_version(entry)
        assert entry.hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in entry.hashes), name
        assert not entry.requirement.extras and entry.requirement.marker is None, name


@pytest.mark.parametrize("requirement", runtime_requirements(), ids=str)
def test_lock_pins_each_runtime_dependency_to_a_version_pyproject_allows(requirement: Requirement) -> None:
    entry = locked().get(canonicalize_name(requirement.name))
    assert entry is not None, f"{requirement.name} is not in requirements.lock: regenerate it"
    assert requirement.specifier.contains(pinned_version(entry), prereleases=True), (requirement, entry.requirement)


def test_lock_holds_as_direct_dependencies_only_what_pyproject_requires() -> None:
    direct = {canonicalize_name(requirement.name) for requirement in runtime_requirements()}
    lock = locked()
    for name, entry in lock.items():
        assert entry.via, f"{name}: pip-compile says what pulled in each package"
        if PROJECT_VIA in entry.via:
            assert name in direct, f"{name} is locked as the project's own dependency, which pyproject.toml does not name"
        pulled_in_by = {canonicalize_name(via) for via in entry.via if via != PROJECT_VIA}
        assert pulled_in_by <= set(lock), f"{name} is pulled in by {pulled_in_by - set(lock)}, which the lock does not hold"


def test_lock_says_how_to_regenerate_it() -> None:
    header = LOCK.read_text(encoding="utf-8").split("\n\n", 1)[0]
    command = re.search(r"^#\s+(pip-compile .*)$", header, re.M)
    assert command, header
    for option in ("--generate-hashes", "--no-emit-index-url", "--no-emit-find-links", "pyproject.toml"):
        assert option in command.group(1)
