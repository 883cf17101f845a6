"""The pure core's tests stand on the core alone: imported in a fresh interpreter, they load
no simulator (Metacontroller's, OME's, the cluster tier's) and no CEL, so they run, and
fail, for what the core decides and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORBIDDEN = ("tests.metacontroller", "tests.lifecycle", "tests.exploration", "tests.cluster", "tests.admission", "cel")
"""Modules (and their submodules) a pure-core test must not load, even through a helper."""

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_decision_tests_load_no_simulator_and_no_cel() -> None:
    modules = [f"tests.decision.{path.stem}" for path in sorted(HERE.glob("test_*.py"))]
    assert "tests.decision.test_extraction" in modules, modules
    loaded = subprocess.run([sys.executable, "-c", PROBE, *modules], cwd=HERE.parents[1], capture_output=True, text=True,
                            check=True, timeout=120).stdout
    found = [name for name in json.loads(loaded)
             if any(name == forbidden or name.startswith(f"{forbidden}.") for forbidden in FORBIDDEN)]
    assert found == [], f"the pure core's tests load {found}"
