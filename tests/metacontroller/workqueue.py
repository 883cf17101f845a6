"""client-go's rate-limited work queue and the simulator's timeline of future events.

A key added while it waits is not added twice; a key added while it is being synced is
synced once more afterwards (``dirty``); ``add_after`` keeps only the earliest pending
time per key (``delaying_queue``); failures back off per key from 5 ms doubling to
1000 s (``DefaultControllerRateLimiter``'s item limiter) until ``forget``.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime, timedelta
from typing import Callable


class Timeline:
    """Future events in time order; equal times keep the order they were scheduled in."""

    def __init__(self) -> None:
        self._events: list[tuple[datetime, int, Callable[[], None], bool]] = []
        self._order = itertools.count()

    def at(self, when: datetime, action: Callable[[], None], periodic: bool = False) -> None:
        """``periodic`` events (informer resyncs) do not keep the simulation from being quiet."""
        heapq.heappush(self._events, (when, next(self._order), action, periodic))

    def next_time(self, include_periodic: bool = True) -> datetime | None:
        times = [when for when, _, _, periodic in self._events if include_periodic or not periodic]
        return min(times) if times else None

    def pop_due(self, now: datetime) -> Callable[[], None] | None:
        if self._events and self._events[0][0] <= now:
            return heapq.heappop(self._events)[2]
        return None


class WorkQueue:
    def __init__(self, timeline: Timeline, clock: Callable[[], datetime]) -> None:
        self.timeline = timeline
        self.clock = clock
        self.queue: list[str] = []
        self.processing: set[str] = set()
        self.dirty: set[str] = set()
        self.waiting: dict[str, datetime] = {}
        self.failures: dict[str, int] = {}

    def add(self, key: str) -> None:
        if key in self.processing:
            self.dirty.add(key)
        elif key not in self.queue:
            self.queue.append(key)

    def add_after(self, key: str, seconds: float) -> None:
        if seconds <= 0:
            self.add(key)
            return
        when = self.clock() + timedelta(seconds=seconds)
        if key in self.waiting and self.waiting[key] <= when:
            return
        self.waiting[key] = when
        self.timeline.at(when, lambda: self._ready(key, when))

    def add_rate_limited(self, key: str) -> None:
        failures = self.failures.get(key, 0)
        self.failures[key] = failures + 1
        self.add_after(key, min(0.005 * 2**failures, 1000.0))

    def forget(self, key: str) -> None:
        self.failures.pop(key, None)

    def get(self) -> str | None:
        if not self.queue:
            return None
        key = self.queue.pop(0)
        self.processing.add(key)
        return key

    def take(self, key: str) -> bool:
        """A worker takes ``key`` now, ahead of its turn (a perturbation's interleaving), as
        ``get`` would have: False while another worker processes it, since a key is never
        processed twice at once."""
        if key in self.processing:
            return False
        if key in self.queue:
            self.queue.remove(key)
        self.processing.add(key)
        return True

    def done(self, key: str) -> None:
        self.processing.discard(key)
        if key in self.dirty:
            self.dirty.discard(key)
            self.add(key)

    def _ready(self, key: str, when: datetime) -> None:
        if self.waiting.get(key) == when:
            del self.waiting[key]
            self.add(key)
