"""The scripts of ``bench/`` loaded for their tests.

``bench/`` is a folder of scripts, not a package, and ``bench.py`` puts the folder itself on
``sys.path`` (so ``bench`` may name that script): each is loaded from its path under a name
of its own, and registered first, since dataclasses look their module up while a class is
built.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(script: str, name: str) -> ModuleType:
    """``bench/<script>.py`` as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
