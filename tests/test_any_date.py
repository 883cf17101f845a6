"""No verdict of the hook or of this suite depends on the day it runs.

The suite runs a second time with the wall clock ten years ahead (tests/clock_ahead),
including the live servers it starts, so a test or README example that only holds
near the fixtures' date fails here rather than on a user's machine later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests import golden

REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).with_name("basemodel-hook")
AHEAD = timedelta(days=3653)
AHEAD_VARIABLE = "TESTS_CLOCK_AHEAD_SECONDS"
RUN_TIMEOUT_SECONDS = 240

in_the_years_ahead_run = pytest.mark.skipif(
    bool(os.environ.get(AHEAD_VARIABLE)), reason="this is the years-ahead run itself"
)


def clock_ahead_environment() -> dict[str, str]:
    path = [str(REPO / "tests" / "clock_ahead"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, AHEAD_VARIABLE: str(int(AHEAD.total_seconds())), "PYTHONPATH": os.pathsep.join(path)}


@in_the_years_ahead_run
def test_the_moved_clock_reaches_the_hook_processes_the_suite_starts() -> None:
    """Else the years-ahead run would quietly run at today's date and prove nothing.

    A model seen for the first time gets conditions stamped with the hook's clock."""
    request_file = golden.FIXTURES / "sync" / "basemodel-pvc-bound-creates-rbac-first.request.json"
    result = subprocess.run(
        [str(SCRIPT), "replay", str(request_file)],
        env=clock_ahead_environment(), capture_output=True, text=True, timeout=20,
    )
    assert result.returncode == 0, result.stderr
    ready = next(c for c in json.loads(result.stdout)["status"]["conditions"] if c["type"] == "Ready")
    stamped = datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00"))
    assert abs(stamped - (datetime.now(timezone.utc) + AHEAD)) < timedelta(minutes=5)


@in_the_years_ahead_run
def test_the_suite_passes_with_the_clock_ten_years_ahead() -> None:
    """Bounded in time, servers included; a failure shows the inner run's report.

    sitecustomize imports time_machine before pytest starts, so pytest warns that it cannot
    rewrite the asserts of that (unused) plugin; the warning says nothing about the hook."""
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "-rfE",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
    ]
    run = subprocess.Popen(
        command, cwd=REPO, env=clock_ahead_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    try:
        output, _ = run.communicate(timeout=RUN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        output = None
    if output is None:
        pytest.fail(f"the years-ahead run took over {RUN_TIMEOUT_SECONDS} s:\n{report(run.communicate()[0])}", pytrace=False)
    if run.returncode != 0:
        pytest.fail(f"with the clock {AHEAD.days} days ahead the suite fails:\n{report(output)}", pytrace=False)


def report(output: str) -> str:
    """pytest's report from its first failure on, without the lines of progress dots."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("====")), max(len(lines) - 40, 0))
    return "\n".join(lines[start:]) + "\n"
