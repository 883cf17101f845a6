"""lastTransitionTime moves only when a condition's status changes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hooks.conditions import FALSE, MESSAGE_LIMIT, REASON_PATTERN, TRUE, Condition, parse_time, stamp
from hooks.reasons import Reason

EARLIER = "2026-11-29T08:00:00Z"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def test_unchanged_status_keeps_its_transition_time_even_when_the_reason_changes() -> None:
    observed = [{"type": "MetadataReady", "status": "False", "reason": "JobPending", "message": "m", "lastTransitionTime": EARLIER}]
    [stamped] = stamp([Condition(type="MetadataReady", status=FALSE, reason="JobRunning", message="running")], observed, NOW, 3)
    assert stamped["lastTransitionTime"] == EARLIER
    assert stamped["reason"] == "JobRunning" and stamped["observedGeneration"] == 3


def test_changed_status_takes_the_current_time() -> None:
    observed = [{"type": "Ready", "status": "False", "reason": "JobRunning", "message": "m", "lastTransitionTime": EARLIER}]
    [stamped] = stamp([Condition(type="Ready", status=TRUE, reason="Ready", message="ready")], observed, NOW, 1)
    assert stamped["lastTransitionTime"] == "2026-11-30T12:00:00Z"


@pytest.mark.parametrize("observed", [None, "garbage", [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}], [7]])
def test_missing_or_unreadable_observed_conditions_start_fresh(observed: object) -> None:
    [stamped] = stamp([Condition(type="Ready", status=TRUE, reason="Ready", message="ready")], observed, NOW, None)
    assert stamped["lastTransitionTime"] == "2026-11-30T12:00:00Z"
    assert "observedGeneration" not in stamped


@pytest.mark.parametrize("reason", ["", "Job Failed", "1Bad", "Trailing:", "has-dash"])
def test_a_reason_upstreams_pattern_refuses_is_never_written(reason: str) -> None:
    with pytest.raises(ValueError):
        stamp([Condition(type="Ready", status=FALSE, reason=reason, message="message")], [], NOW, 1)


def test_an_empty_message_is_never_written() -> None:
    with pytest.raises(ValueError):
        stamp([Condition(type="Ready", status=FALSE, reason="Ready", message="")], [], NOW, 1)


def test_every_reason_of_the_catalogue_matches_upstreams_pattern() -> None:
    assert [reason for reason in Reason if not REASON_PATTERN.match(reason)] == []


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-11-30T11:59:00", "soon", 17])
def test_time_outside_what_utc_can_hold_or_without_a_zone_reads_as_absent(value: object) -> None:
    assert parse_time(value) is None


def test_message_longer_than_the_crd_allows_is_cut_to_fit() -> None:
    [stamped] = stamp([Condition(type="Ready", status=FALSE, reason="JobFailed", message="界" * 100_000)], [], NOW, 1)
    assert len(stamped["message"]) == MESSAGE_LIMIT and stamped["message"].endswith("…")
