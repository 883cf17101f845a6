"""Render a kustomization offline with `kubectl kustomize`, as `kubectl apply -k` would.

Without kubectl the tests that need a rendering are unavailable (``tests/unavailable.py``):
they skip, or fail under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests import docs
from tests.unavailable import unavailable

REPO = Path(__file__).resolve().parents[1]
# The docs' overlays live in overlays/<name>/ of the reader's copy.
DOCUMENTED_PATHS = {"../../metacontroller": REPO / "metacontroller", "../../metacontroller/monitoring": REPO / "metacontroller" / "monitoring"}


def render(directory: Path) -> list[dict[str, Any]]:
    """Every object the kustomization in ``directory`` produces."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        unavailable(f"kubectl is not installed: cannot render {directory} with `kubectl kustomize`")
    proc = subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize {directory} failed:\n{proc.stderr}"
    objects = [o for o in yaml.safe_load_all(proc.stdout) if o]
    assert objects, f"kubectl kustomize {directory} rendered nothing"
    return objects


def write_overlay(directory: Path, kustomization: dict[str, Any]) -> Path:
    """An overlay in ``directory`` whose paths are made relative to it, as kustomize requires."""
    def relative(path: str | Path) -> str:
        return os.path.relpath(path, directory)

    document = dict(kustomization)
    for key in ("resources", "components"):
        if key in document:
            document[key] = [relative(p) if isinstance(p, Path) else p for p in document[key]]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return directory


def documented_kustomization(containing: str) -> dict[str, Any]:
    """The docs' example overlay whose YAML holds ``containing``, its paths pointing into this repository."""
    (block,) = [b for b in docs.blocks("yaml") if "kind: Kustomization" in b and containing in b]
    document = yaml.safe_load(block)
    for key in ("resources", "components"):
        if key in document:
            document[key] = [DOCUMENTED_PATHS.get(entry, entry) for entry in document[key]]
    return document
