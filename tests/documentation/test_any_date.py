"""No verdict of the hook or of this suite depends on the day it runs.

The suite runs a second time with the wall clock ten years ahead, as its own tier
(``python -m tests.years_ahead``, which `.ci/run` runs), including the live servers it
starts. Here, in every run, the mechanism itself: the moved clock must reach the hook's
processes, else the years-ahead run would quietly run at today's date and prove nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests import golden
from tests.years_ahead import AHEAD, AHEAD_VARIABLE, clock_ahead_environment

SCRIPT = Path(sys.executable).with_name("basemodel-hook")


@pytest.mark.skipif(bool(os.environ.get(AHEAD_VARIABLE)), reason="this is the years-ahead run itself")
def test_the_moved_clock_reaches_the_hook_processes_the_suite_starts() -> None:
    """A model seen for the first time gets conditions stamped with the hook's clock."""
    request_file = golden.FIXTURES / "sync" / "basemodel-pvc-bound-creates-rbac-first.request.json"
    result = subprocess.run(
        [str(SCRIPT), "replay", str(request_file)],
        env=clock_ahead_environment(), capture_output=True, text=True, timeout=20,
    )
    assert result.returncode == 0, result.stderr
    ready = next(c for c in json.loads(result.stdout)["status"]["conditions"] if c["type"] == "Ready")
    stamped = datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00"))
    assert abs(stamped - (datetime.now(timezone.utc) + AHEAD)) < timedelta(minutes=5)

