"""A ``pvc://`` model's decision, read top to bottom: observe the request, judge the
storage, plan the extraction, compose the conditions and the status.

The sync hook answers with it (``sync.py``); the label keeper writes its why on the model
as annotations (``annotations.py``), from the same objects seen another way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from hooks.conditions import Condition
from hooks.pvc.extraction import Plan, plan_extraction
from hooks.pvc.observation import Observation, observe
from hooks.pvc.status import compose_status
from hooks.pvc.storage import StorageVerdict, judge_storage
from hooks.request import Model
from hooks.settings import Settings


class PVCDecision(NamedTuple):
    """What was seen, what the storage was judged, the extraction's plan, the ``Ready``
    condition and the status."""

    seen: Observation
    storage: StorageVerdict
    plan: Plan
    ready: Condition
    status: dict[str, Any]


def decide(request: dict[str, Any], model: Model, finalizing: bool, settings: Settings, now: datetime) -> PVCDecision:
    """Every step sees the request as ``observe`` read it, once."""
    seen = observe(request, model, finalizing)
    storage = judge_storage(seen)
    plan = plan_extraction(seen, storage.ready, settings, now)
    composed = compose_status(seen, storage, plan, now)
    return PVCDecision(seen, storage, plan, composed.ready, composed.status)
