"""The catalogue of reasons (``hooks/reasons.py``): every reason the hook gives is in it,
under the condition that gives it, and means one state, the state a model is in whenever
that reason is its Ready condition's. Held against every saved answer; docs/status.md is
held to the catalogue by tests/documentation/test_docs.py."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.reasons import ConditionType, Reason
from hooks.states import State
from tests import golden

# The hook's own statuses; one handed back as OME's backend wrote it holds OME's reasons.
ANSWERS = {path: golden.load(golden.response_file(path)) for path in golden.cases()
           if golden.hook_of(path) in ("sync", "finalize") and not golden.hands_omes_status_back(golden.load(path))}


def ready_reason(status: dict[str, Any]) -> Reason:
    """The reason the hook's metrics and logs give a decision: its Ready condition's, or
    ``HandedBack`` for a status without conditions."""
    conditions = status.get("conditions", [])
    return next((Reason(item["reason"]) for item in conditions if item["type"] == ConditionType.READY), Reason.HANDED_BACK)


@pytest.mark.parametrize("request_file", list(ANSWERS), ids=lambda path: f"{golden.hook_of(path)}/{path.name[:-13]}")
def test_a_saved_answer_is_in_the_state_its_ready_reason_means(request_file: Any) -> None:
    status = ANSWERS[request_file]["status"]
    assert status["state"] == ready_reason(status).state


def test_every_reason_of_a_condition_is_given_under_that_condition_by_a_saved_answer() -> None:
    """And the Ready condition repeats only the reasons of a condition that is not True."""
    given = {(item["type"], item["reason"]) for answer in ANSWERS.values() for item in answer["status"].get("conditions", [])}
    own = {(reason.condition, reason) for reason in Reason if reason.condition is not None}
    repeated_by_ready = {(ConditionType.READY, reason) for reason in Reason if reason.state is not State.READY}
    assert own <= given
    assert given <= own | repeated_by_ready
