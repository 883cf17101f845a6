"""The README's tables agree with the code they describe."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def table_after(heading_line: str) -> list[str]:
    """The first cell of every row of the table that starts at ``heading_line``."""
    rows = README.split(heading_line, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [row.split("|")[1].strip() for row in rows]


def test_module_table_names_every_module_under_hooks() -> None:
    listed = {name for cell in table_after("| module (under `hooks/`) | owns |") for name in re.findall(r"`([^`]+\.py)`", cell)}
    modules = {path.relative_to(REPO / "hooks").as_posix() for path in (REPO / "hooks").rglob("*.py") if path.name != "__init__.py"}
    assert listed == modules


def test_install_table_names_every_file_the_kustomization_applies() -> None:
    listed = {name for cell in table_after("| File | What it installs |") for name in re.findall(r"`([^`]+\.yaml)`", cell)}
    kustomization = yaml.safe_load((REPO / "metacontroller" / "kustomization.yaml").read_text(encoding="utf-8"))
    assert listed == set(kustomization["resources"])
