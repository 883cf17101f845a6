"""Imports point one way: every module of ``hooks/`` imports only modules on a layer below
its own, so no import runs back up and none closes a cycle, not even one made inside a
function or under ``TYPE_CHECKING``.

The layers are written out here, bottom first: a new module is placed on purpose. The PVC
flow is a strict stack, one module a layer, each using only those under it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HOOKS = Path(__file__).resolve().parents[2] / "hooks"

LAYERS: tuple[tuple[str, ...], ...] = (
    # Words every module may use: Kubernetes' names and quantities, image references, OME's
    # states, the version; and the packages' faces, which import nothing.
    ("__init__.py", "pvc/__init__.py", "http/__init__.py", "names.py", "quantity.py", "image_reference.py", "states.py"),
    # Conditions, the catalogue of reasons, the settings.
    ("conditions.py", "reasons.py", "settings.py"),
    # Reading a Metacontroller request, for any flow.
    ("request.py",),
    # The PVC flow: the URI, the request read for it, the storage, the Job and its outcome,
    # the record of the attempts, the plan, the status composed from them and the decision
    # that runs them in order; then its why as annotations, and the related objects the
    # controllers ask for.
    ("pvc/storage_uri.py",),
    ("pvc/observation.py",),
    ("pvc/storage.py",),
    ("pvc/metadata_job.py",),
    ("pvc/job_outcome.py",),
    ("pvc/record.py",),
    ("pvc/extraction.py",),
    ("pvc/status.py",),
    # Whether OME serves pvc:// models itself, for the answers that step aside.
    ("upstream_backend.py",),
    ("pvc/decision.py",),
    ("pvc/annotations.py", "pvc/related.py"),
    # The hooks' answers: a model handed back, the label and the why, the related objects;
    # then sync.
    ("hand_back.py", "label_keeper.py", "customize.py"),
    ("sync.py",),
    # The HTTP shell, then the command line.
    ("http/auth.py", "http/metrics.py"),
    ("http/app.py",),
    ("cli.py",),
)
LAYER_OF = {module: height for height, layer in enumerate(LAYERS) for module in layer}


def module_of(name: str) -> str | None:
    """The file under hooks/ that ``import name`` runs last, or None outside the package."""
    parts = name.split(".")
    if parts[0] != "hooks":
        return None
    path = HOOKS.joinpath(*parts[1:])
    return f"{'/'.join(parts[1:])}.py" if path.with_suffix(".py").is_file() else "/".join([*parts[1:], "__init__.py"])


def imported(module: str) -> set[str]:
    """The modules of hooks/ that ``module`` imports, wherever in the file it imports them."""
    found: set[str | None] = set()
    for node in ast.walk(ast.parse((HOOKS / module).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(module_of(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(module_of(node.module))
            found.update(
                module_of(f"{node.module}.{alias.name}")
                for alias in node.names
                if (HOOKS.joinpath(*node.module.split(".")[1:], alias.name)).with_suffix(".py").is_file()
            )
    return {name for name in found if name is not None} - {module}


def test_every_module_of_hooks_stands_on_exactly_one_layer() -> None:
    modules = sorted(path.relative_to(HOOKS).as_posix() for path in HOOKS.rglob("*.py"))
    listed = [module for layer in LAYERS for module in layer]
    assert sorted(listed) == modules


@pytest.mark.parametrize("module", list(LAYER_OF))
def test_a_module_imports_only_modules_below_its_layer(module: str) -> None:
    above = {name: LAYERS[LAYER_OF[name]] for name in imported(module) if LAYER_OF[name] >= LAYER_OF[module]}
    assert not above, f"{module} imports modules on its own layer or above: {above}"


def test_the_reading_of_imports_sees_every_kind_of_import() -> None:
    """A submodule taken from a package, one imported inside a function, the package itself."""
    assert "image_reference.py" in imported("settings.py")
    assert "http/app.py" in imported("cli.py") and "__init__.py" in imported("cli.py")
