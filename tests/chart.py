"""The Helm chart, charts/ome-basemodel-hook/, as its tests read it: rendered by ``helm template``.

Each distinct set of values renders once per session, however many tests read it; the
tests read the objects and never change them.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from typing import Any

import yaml

from tests.helm import helm
from tests.manifests import REPO, Obj

CHART = REPO / "charts" / "ome-basemodel-hook"
RELEASE = "ome-basemodel-hook"

SCHEMA = CHART / "values.schema.json"

Values = tuple[tuple[str, str | int | bool], ...]
"""Values to set, as a hashable tuple of (name, value): (("metacontroller.namespace", "mc"), ...)."""


def helm_run(*arguments: str) -> subprocess.CompletedProcess[str]:
    """One helm command over the chart's folder, as a user of a checkout runs it."""
    return subprocess.run([str(helm()), *arguments], capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def render(values: Values = ()) -> list[Obj]:
    """Every object ``helm template`` renders with ``values`` set."""
    return [dict(obj) for obj in _rendered(values)]


@lru_cache(maxsize=None)
def _rendered(values: Values) -> tuple[Obj, ...]:
    result = helm_run("template", RELEASE, str(CHART), *set_arguments(values))
    assert result.returncode == 0, f"helm template {' '.join(set_arguments(values))} failed:\n{result.stderr}"
    return tuple(obj for obj in yaml.safe_load_all(result.stdout) if obj)


def set_arguments(values: Values) -> list[str]:
    """A string with ``--set-string``, so that "500m" or "0" stays the string it is; a number
    or a boolean with ``--set``, which reads it as YAML would."""
    arguments = []
    for name, value in values:
        if isinstance(value, str):
            arguments += ["--set-string", f"{name}={value}"]
        else:
            arguments += ["--set", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
    return arguments


def refusal(values: Values) -> str:
    """What helm says when it refuses to render with ``values`` (its schema's message)."""
    result = helm_run("template", RELEASE, str(CHART), *set_arguments(values))
    assert result.returncode != 0, f"helm template {' '.join(set_arguments(values))} rendered"
    return result.stderr


def default_values() -> dict[str, Any]:
    """charts/ome-basemodel-hook/values.yaml."""
    return yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
