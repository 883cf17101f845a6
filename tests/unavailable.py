"""What a test does when this machine lacks something it needs: a tool (kubectl, Go, helm)
or a reference file from upstream (``tests/reference.py``).

One policy for every tier, the fast suite, the chart's tests and the cluster tier alike:
the test skips, saying what is missing and how to get it, so that a contributor's clone
runs everything it can; under ``CI=true`` (GitHub Actions sets it) it fails instead,
because CI exists to run every tier, and a run that skipped one would pass without it.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's, which must run every test: ``CI=true``."""
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it in CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a test that cannot run here fails)", pytrace=False)
    pytest.skip(reason)
