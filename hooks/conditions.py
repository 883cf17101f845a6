"""Kubernetes-style conditions whose ``lastTransitionTime`` moves only on a real change.

The hook is stateless, so the previous transition time can only come from the status
Metacontroller sends back. Carrying it over is what makes a steady state cost no write:
a status that changed its timestamps on every call would make Metacontroller write, be
woken by its own write, and loop.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone
from typing import Any, Iterable, NamedTuple

TRUE = "True"
FALSE = "False"

MESSAGE_LIMIT = 32768  # the CRD's maxLength: a longer message fails the whole status
REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


class Condition(NamedTuple):
    """A condition before it is stamped with times and the generation it describes."""

    type: str
    status: str
    reason: str
    message: str

    @property
    def is_true(self) -> bool:
        return self.status == TRUE


def shorten(message: str, limit: int) -> str:
    """A message cut to ``limit`` characters: what the hook quotes can be megabytes long."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as the API server prints metav1.Time."""
    utc = moment.astimezone(timezone.utc)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"


def parse_time(value: Any) -> datetime | None:
    """Read an RFC 3339 timestamp from an observed object; anything else (no zone, a moment
    outside the years 1 to 9999 in UTC) reads as absent."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return moment.astimezone(timezone.utc) if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def _normalized(value: Any) -> str | None:
    moment = parse_time(value)
    return format_time(moment) if moment is not None else None


_normalized_text = functools.lru_cache(maxsize=4096)(_normalized)
REMEMBERED_TIME_LENGTH = 64  # longer than any timestamp the API server writes


def normalized_time(value: Any) -> str | None:
    """An observed timestamp as ``format_time`` writes it, or None when it does not read as one.

    A steady state sends the same few timestamps on every sync, so their readings are
    remembered; only for text short enough to be one, so no request can fill the memory."""
    if isinstance(value, str) and len(value) <= REMEMBERED_TIME_LENGTH:
        return _normalized_text(value)
    return _normalized(value)


def stamp(
    conditions: Iterable[Condition],
    observed: Any,
    now: datetime,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Render conditions, keeping each observed ``lastTransitionTime`` whose status is unchanged.

    A reason upstream OME's newest CRD refuses, or an empty message, would fail the whole
    status: such a condition is a bug, and it fails the call instead."""
    previous = _observed_by_type(observed)
    stamped_now = format_time(now)
    rendered = []
    for condition in conditions:
        if not REASON_PATTERN.match(condition.reason) or not condition.message:
            raise ValueError(f"condition {condition.type}: bad reason {condition.reason!r} or empty message")
        before = previous.get(condition.type, {})
        kept = normalized_time(before.get("lastTransitionTime")) if before.get("status") == condition.status else None
        item: dict[str, Any] = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": shorten(condition.message, MESSAGE_LIMIT),
            "lastTransitionTime": kept or stamped_now,
        }
        if generation is not None:
            item["observedGeneration"] = generation
        rendered.append(item)
    return rendered


def _observed_by_type(observed: Any) -> dict[str, dict[str, Any]]:
    """The previous conditions by type, ignoring whatever is not shaped like one."""
    if not isinstance(observed, list):
        return {}
    return {
        item["type"]: item
        for item in observed
        if isinstance(item, dict) and isinstance(item.get("type"), str)
    }
