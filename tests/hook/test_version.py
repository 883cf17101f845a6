"""One version, written once (``hooks.__version__``), and everything that names it agrees.

A release is the tag ``v<version>``: the workflow builds the image of that tag, the
manifests pull it and the CHANGELOG says what it holds. A version bumped in one place
only would publish an image no manifest pulls, or install one no changelog describes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from hooks import __version__

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "metacontroller"


def kustomization_image() -> dict[str, str]:
    (image,) = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))["images"]
    return image


def test_version_is_written_only_in_the_package() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "hooks.__version__"}


def test_version_is_a_plain_release_number() -> None:
    assert re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", __version__), __version__


def test_kustomization_pulls_the_image_of_this_version() -> None:
    assert kustomization_image()["newTag"] == __version__


def test_deployment_names_the_image_of_this_version() -> None:
    (deployment,) = yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text(encoding="utf-8"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{kustomization_image()['name']}:{__version__}"


def test_changelog_describes_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert headings[:2] == ["Unreleased", __version__], "Keep a Changelog: Unreleased first, then the newest release"
    assert re.search(rf"^## \[{re.escape(__version__)}\]( - \d{{4}}-\d{{2}}-\d{{2}})?$", changelog, re.M)
