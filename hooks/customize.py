"""The customize hooks: which related objects Metacontroller should send with each sync
(``/customize`` for the CompositeControllers, ``/label-customize`` for the label keeper).

Metacontroller caches this answer per parent generation, so the rules depend on the spec
alone. It asks every parent of a controller whenever a related object changes: a model
that is not the hook's asks for nothing. What each rule asks for, and what it costs, is
in ``pvc/related.py``.
"""

from __future__ import annotations

from typing import Any

from hooks.pvc.related import composite_rules, keeper_rules
from hooks.request import Model, read_model, read_request
from hooks.settings import Settings


def customize(body: Any, settings: Settings) -> dict[str, Any]:
    """The CompositeControllers': the PVC by name and, with ``READ_JOB_PODS``, the Job pods."""
    return {"relatedResources": list(composite_rules(_model(body), settings.sync).values())}


def customize_keeper(body: Any, settings: Settings) -> dict[str, Any]:
    """The label keeper's: everything the CompositeController's decision reads, and the
    evidence that OME serves ``pvc://`` models itself."""
    return {"relatedResources": keeper_rules(_model(body), settings.sync)}


def _model(body: Any) -> Model:
    """The model asked about. A model on other storage asks for nothing; one whose
    ``pvc://`` URI does not parse asks the keeper's evidence alone."""
    return read_model(read_request(body)["parent"])
