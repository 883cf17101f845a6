"""lastTransitionTime moves only when a condition's status changes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hooks.conditions import FALSE, TRUE, Condition, stamp

EARLIER = "2026-11-29T08:00:00Z"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def test_unchanged_status_keeps_its_transition_time_even_when_the_reason_changes() -> None:
    observed = [{"type": "MetadataReady", "status": "False", "reason": "JobPending", "message": "m", "lastTransitionTime": EARLIER}]
    [stamped] = stamp([Condition("MetadataReady", FALSE, "JobRunning", "running")], observed, NOW, 3)
    assert stamped["lastTransitionTime"] == EARLIER
    assert stamped["reason"] == "JobRunning" and stamped["observedGeneration"] == 3


def test_changed_status_takes_the_current_time() -> None:
    observed = [{"type": "Ready", "status": "False", "reason": "JobRunning", "message": "m", "lastTransitionTime": EARLIER}]
    [stamped] = stamp([Condition("Ready", TRUE, "Ready", "ready")], observed, NOW, 1)
    assert stamped["lastTransitionTime"] == "2026-11-30T12:00:00Z"


@pytest.mark.parametrize("observed", [None, "garbage", [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}], [7]])
def test_missing_or_unreadable_observed_conditions_start_fresh(observed: object) -> None:
    [stamped] = stamp([Condition("Ready", TRUE, "Ready", "ready")], observed, NOW, None)
    assert stamped["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    assert "observedGeneration" not in stamped


@pytest.mark.parametrize("reason", ["", "Job Failed", "1Bad", "Trailing:", "has-dash"])
def test_reason_must_match_upstream_pattern(reason: str) -> None:
    with pytest.raises(ValueError):
        Condition("Ready", FALSE, reason, "message")


def test_message_must_not_be_empty() -> None:
    with pytest.raises(ValueError):
        Condition("Ready", FALSE, "Ready", "")
