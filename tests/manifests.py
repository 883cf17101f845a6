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

Upstream's CRDs come from the reference folder (``tests/reference.py``); a check that needs
one it lacks skips, saying which, or fails under ``CI=true``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests import reference

Obj = dict[str, Any]
"""One Kubernetes object (or a CRD's schema) as YAML loads it."""

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "metacontroller"
SAMPLES = MANIFESTS / "samples"

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
    """One of upstream's CRDs from the reference folder, which a clone does not carry."""
    return load_yaml(reference.crd(filename))


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
