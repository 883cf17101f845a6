"""The GitHub Actions workflows under .github/workflows/, as their tests read them."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.installed_tool import installed_tool

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / ".github" / "workflows"


@dataclass(frozen=True)
class Workflow:
    """One workflow file and what YAML reads from it."""

    path: Path
    document: dict[Any, Any]

    @property
    def triggers(self) -> Any:
        """The ``on`` key, which YAML 1.1 reads as true."""
        return self.document[True]

    @property
    def jobs(self) -> dict[str, Any]:
        return self.document["jobs"]

    def step_using(self, job: str, action: str) -> dict[str, Any]:
        """The one step of ``job`` that uses ``action`` (any version)."""
        (step,) = [step for step in self.jobs[job]["steps"] if step.get("uses", "").startswith(f"{action}@")]
        return step

    def step_named(self, job: str, name: str) -> dict[str, Any]:
        (step,) = [step for step in self.jobs[job]["steps"] if step.get("name") == name]
        return step


def load(name: str) -> Workflow:
    path = FOLDER / name
    return Workflow(path, yaml.safe_load(path.read_text(encoding="utf-8")))


def actionlint(workflow: Workflow) -> tuple[int, str, str]:
    """actionlint's exit status and output on the workflow (the workflows it calls read too)."""
    result = subprocess.run([installed_tool("actionlint"), "-no-color", str(workflow.path)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    return result.returncode, result.stdout, result.stderr
