"""The test extra (``pip install -e '.[test]'``) for the commands of the test tree a reader
may run before installing it.

The README offers ``python -m tests.lifecycle`` right after its first command, which
installs the hook alone; the simulator it runs needs YAML, CEL and Kubernetes' schemas. A
reader who has not run the second command yet gets one line saying what to install, not a
traceback.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

INSTALL = ".venv/bin/pip install -q -e '.[test]'"
OWN_PACKAGES = ("hooks", "tests")


@contextmanager
def needs_test_extra(command: str) -> Iterator[None]:
    """Around the imports of ``command`` that need the test extra: a module missing from it
    ends the command with one line on stderr (exit status 1). A module of this repository
    missing is a bug, and keeps its traceback."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] in OWN_PACKAGES:
            raise
        sys.exit(f"{command} needs the test tools ({missing.name} is missing): {INSTALL}, the README's second command, installs them")
