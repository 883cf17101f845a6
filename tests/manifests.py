"""What the manifest tests share: where the manifests are, the names they install, and
small readers of the objects `kubectl kustomize` renders from metacontroller/.

The fixtures built on these (the rendered install, the CRDs, the controllers, ...) are in
``tests/conftest.py``; each test module checks one kind of object:

- ``test_install_layers.py``: what each kustomization renders, as a whole;
- ``test_controllers.py``: the CompositeControllers and the label keeper's DecoratorController;
- ``test_crds.py``: our BaseModel and ClusterBaseModel CRDs beside upstream OME's, and the samples;
- ``test_deployment.py``: the hook's Namespace, Deployment, Service, PDB and NetworkPolicy;
- ``test_rbac.py``: what Metacontroller is granted;
- ``test_overlays.py``: the overlays the docs tell a reader to write.

shared/ (the reference pack with upstream's CRDs) sits beside the repository:
``Path(__file__).resolve().parents[2] / "shared"``. A clone without it skips the checks
against upstream's CRDs, each saying what it needs, and runs the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

Obj = dict[str, Any]
"""One Kubernetes object (or a CRD's schema) as YAML loads it."""

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "metacontroller"
SAMPLES = MANIFESTS / "samples"
SHARED = Path(__file__).resolve().parents[2] / "shared"
UPSTREAM_CRDS = SHARED / "reference" / "crds"

HOOK_NS = "ome-basemodel-hook"
HOOK_NAME = "ome-basemodel-hook"
HOOK_IMAGE = "ghcr.io/ome-basemodel-hook/ome-basemodel-hook:0.1.0"
METACONTROLLER_ROLE = "ome-basemodel-hook-metacontroller"
LABEL_KEEPER = "ome-basemodel-storage-label"


def load_yaml(path: Path) -> Obj:
    """The one YAML document in ``path``."""
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def upstream_crd(filename: str) -> Obj:
    """One of upstream's CRDs from the reference pack, which a user's clone does not have:
    the test that needs it skips, saying so, when the pack is absent."""
    if not UPSTREAM_CRDS.is_dir():
        pytest.skip(f"needs upstream's CRDs in {UPSTREAM_CRDS} (the shared/ reference pack beside the repository)")
    return load_yaml(UPSTREAM_CRDS / filename)


def crd_schema(crd: Obj) -> Obj:
    """The openAPIV3Schema of a CRD's only version."""
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def group_of(api_version: str) -> str:
    """The API group of an apiVersion (``""`` for the core group's ``v1``)."""
    return api_version.split("/")[0] if "/" in api_version else ""


def one(objects: list[Obj], kind: str, name: str | None = None) -> Obj:
    """The only object of ``kind`` (named ``name``, if given) among ``objects``."""
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected exactly one {kind} {name or ''}, found {len(found)}"
    return found[0]
