"""The customize hooks: which related objects Metacontroller should send with each sync
(``/customize`` for the CompositeControllers, ``/label-customize`` for the label keeper).

Metacontroller caches this answer per parent generation, so the rules depend on the spec
alone. It asks every parent of a controller whenever a related object changes: a model
that is not the hook's asks for nothing. What each rule asks for, and what it costs, is
in ``pvc/related.py``.
"""

from __future__ import annotations

from typing import Any, Callable

from hooks.pvc.related import Rules, composite_rules, keeper_rules
from hooks.request import Model, read_model, read_request
from hooks.settings import Settings, SyncSettings


def customize(body: Any, settings: Settings) -> dict[str, Any]:
    """The CompositeControllers': the PVC by name and, with ``READ_JOB_PODS``, the Job pods."""
    return _answer(body, settings, composite_rules)


def customize_keeper(body: Any, settings: Settings) -> dict[str, Any]:
    """The label keeper's: everything the CompositeController's decision reads."""
    return _answer(body, settings, keeper_rules)


def _answer(body: Any, settings: Settings, rules: Callable[[Model, SyncSettings], Rules]) -> dict[str, Any]:
    """Nothing for a model on other storage or a URI that does not parse."""
    model = read_model(read_request(body)["parent"])
    return {"relatedResources": list(rules(model, settings.sync).values())}
