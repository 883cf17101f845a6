"""One round of the core alone, in a process of its own: ``hooks.sync.sync`` per request.

    PYTHONPATH=TREE python bench/core_round.py GC_YOUNG_THRESHOLD CALLS BODY...

``bench.py`` runs this once per round for each tree it measures, the trees in turn
(``--baseline``): two versions of the ``hooks`` package cannot share one process, so each
round imports ``hooks`` from PYTHONPATH and names the file it found, which lets the bench
check that it measured the tree it meant to.

Each BODY (a request file) is decided CALLS times, each time freshly parsed as a request
would be, with the garbage collector set as a worker sets it (the bench hands both trees
the same threshold, so that their figures differ only by their code). The times are this
thread's CPU time: on a shared machine, wall-clock percentiles mostly measure how long the
scheduler gave the CPU to someone else. Prints one JSON object: ``hooks`` (the package's
``__file__``) and ``shapes``, per BODY in order either the CPU µs of the decision (``p50``,
``p99``) and of the orjson work around it (``parse``, ``dumps``: medians), or the
``error`` the tree raised on it: an older tree may not serve every request shape yet.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import orjson

import hooks
from hooks.settings import Settings
from hooks.sync import sync


def percentile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))] if ordered else 0.0


def time_decisions(data: bytes, calls: int, settings: Settings) -> dict[str, float]:
    """CPU µs of ``calls`` decisions of one request: parse and serialization timed apart, so
    the table shows what the shell's JSON costs beside the decision."""
    parse, decide, dump = [], [], []
    for _ in range(calls):
        now = datetime.now(timezone.utc)
        started = time.thread_time_ns()
        body = orjson.loads(data)
        parsed = time.thread_time_ns()
        decision = sync(body, settings, now)
        decided = time.thread_time_ns()
        orjson.dumps(decision.response)
        dumped = time.thread_time_ns()
        parse.append(parsed - started)
        decide.append(decided - parsed)
        dump.append(dumped - decided)
    decide.sort()
    return {
        "parse": statistics.median(parse) / 1000,
        "p50": percentile(decide, 50) / 1000,
        "p99": percentile(decide, 99) / 1000,
        "dumps": statistics.median(dump) / 1000,
    }


def main(argv: list[str]) -> None:
    threshold, calls, *bodies = argv
    settings = Settings()
    gc.freeze()
    gc.set_threshold(int(threshold))
    shapes: list[dict[str, Any]] = []
    for body in bodies:
        try:
            shapes.append(time_decisions(Path(body).read_bytes(), int(calls), settings))
        except Exception as error:  # the tree's own failure on this request is a figure to report
            shapes.append({"error": f"{type(error).__name__}: {error}"})
    print(json.dumps({"hooks": hooks.__file__, "shapes": shapes}))


if __name__ == "__main__":
    main(sys.argv[1:])
