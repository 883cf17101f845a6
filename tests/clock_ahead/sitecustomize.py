"""Moves the wall clock of every Python process of the suite's years-ahead run.

Python imports ``sitecustomize`` at start from the first folder on its path that holds
one, so with this folder on PYTHONPATH and ``TESTS_CLOCK_AHEAD_SECONDS`` set, pytest and
each ``basemodel-hook serve`` or ``replay`` it starts read a clock that far ahead of the
real one, through the same calls as in production: no clock knob in the hook itself.
Each process moves from its own start, so they all agree on the time. Monotonic clocks
(timeouts, gunicorn's worker heartbeat) are left alone.
"""

from __future__ import annotations

import os
import time

import time_machine

_AHEAD = os.environ.get("TESTS_CLOCK_AHEAD_SECONDS")
if _AHEAD:
    time_machine.travel(time.time() + float(_AHEAD), tick=True).start()
