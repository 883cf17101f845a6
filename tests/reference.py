"""The reference folder: upstream's own files that the tests compare the product with, which
this repository does not carry.

It is one folder, named here and nowhere else: ``$TESTS_REFERENCE_DIR`` (a path relative to
the repository, or absolute), else ``../shared/reference`` beside the repository, where the
project's reference pack sits. Its ``crds/`` holds OME's BaseModel and ClusterBaseModel
CRDs (ours are checked against them) and Metacontroller's three CRDs (our controllers
are validated against them; the cluster tier installs them).
``python -m tests.fetch_reference`` fills it on a machine without the pack.

A test whose file is missing is ``unavailable``: it skips, naming the file and the fetch,
or fails under ``CI=true``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.unavailable import unavailable

REPO = Path(__file__).resolve().parents[1]
VARIABLE = "TESTS_REFERENCE_DIR"
DEFAULT = Path("..") / "shared" / "reference"
FETCH = ".venv/bin/python -m tests.fetch_reference"

OME_CRDS = ("ome.io_basemodels.yaml", "ome.io_clusterbasemodels.yaml")
METACONTROLLER_CRDS = (
    "metacontroller.k8s.io_compositecontrollers.yaml",
    "metacontroller.k8s.io_decoratorcontrollers.yaml",
    "metacontroller.k8s.io_controllerrevisions.yaml",
)


def folder() -> Path:
    """The reference folder this run reads."""
    return REPO / os.environ.get(VARIABLE, str(DEFAULT))


def crds() -> Path:
    return folder() / "crds"


def crd(filename: str) -> Path:
    """One of upstream's CRDs; a test that needs it and does not find it is unavailable."""
    path = crds() / filename
    if not path.is_file():
        unavailable(f"needs upstream's {filename} in {crds()} (${VARIABLE}, else {DEFAULT} beside the repository): "
                    f"`{FETCH}` fetches it")
    return path
