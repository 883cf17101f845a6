"""The any-date tier: the suite again with the wall clock ten years ahead, which `.ci/run`
runs after the README's test command.

    .venv/bin/python -m tests.years_ahead [PYTEST OPTIONS]

Every Python process of the run, pytest and each ``basemodel-hook serve`` or ``replay``
it starts, reads a clock that far ahead (``tests/clock_ahead/sitecustomize.py``), so a
test or a README example that holds only near the fixtures' date fails here rather than
on a user's machine later. The image tier is left out: building the image's virtualenv
reads no clock, and it checks its one answer at another date itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AHEAD = timedelta(days=3653)
AHEAD_VARIABLE = "TESTS_CLOCK_AHEAD_SECONDS"
# sitecustomize imports time_machine before pytest starts, so pytest warns that it cannot
# rewrite the asserts of that (unused) plugin; the warning says nothing about the hook.
PYTEST = ("-m", "pytest", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning",
          "--ignore", "tests/install/test_image_runtime.py")


def clock_ahead_environment() -> dict[str, str]:
    """This environment, with the clock of every Python process started in it moved ahead."""
    path = [str(REPO / "tests" / "clock_ahead"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, AHEAD_VARIABLE: str(int(AHEAD.total_seconds())), "PYTHONPATH": os.pathsep.join(path)}


def main(argv: list[str]) -> int:
    print(f"the suite with the clock {AHEAD.days} days ahead", flush=True)
    return subprocess.run([sys.executable, *PYTEST, *argv], cwd=REPO, env=clock_ahead_environment(), check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
