"""The linters the test extra installs, found where pip put them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def installed_tool(name: str) -> str:
    """The command ``name`` beside this Python (the virtualenv's bin), else on PATH.

    Missing, it fails the test rather than skipping it: the test extra installs it, so
    its absence is a broken install, not a machine without an optional tool."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found
