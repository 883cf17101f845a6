"""The label keeper: the DecoratorController hook that marks which models are the hook's,
and writes each ``pvc://`` model's why on it.

The CompositeControllers select their parents by ``STORAGE_LABEL``, so a model is synced
by them exactly while this label says its storage is ``pvc://``; every other model never
reaches them and stays OME's alone. The keeper answers with that label and, for a
``pvc://`` model, the annotations of ``pvc/annotations.py``: the state, the reason and
message, the PVC, the Job, computed by the same decision as the status from the objects
its customize hook asked for (``pvc/related.py``). No status (Metacontroller leaves a
decorated object's status alone when the answer has none), no attachment, no finalizer.
An answer that changes nothing costs no write. A model that is not the hook's has the
label and every annotation of the hook's removed.

While the model does not carry the label and annotations it should, the answer also asks
to be called again (``resyncAfterSeconds``). Metacontroller writes them on its cached copy
of the model and drops the write when another writer updated the model first (a Conflict
it swallows, "since we will reconcile again"); with ``ignoreStatusChanges`` the update
that caused it, OME's finalizer on a new model or a status write, calls nobody. The
resync is queued before the write is tried, so the keeper looks again whatever became of
it; once the model is as it should be the answer asks nothing more.

The label never waits on the why: where the related objects cannot be read with
certainty (not asked for yet, or malformed), the answer leaves the annotations as they
are. A model being deleted keeps them as they are too: a write would only delay its end.

Once OME serves ``pvc://`` models itself (``upstream_backend.py``: its chart's ClusterRole,
its Job for the model, a status its backend stamped), every ``pvc://`` model is handed back
as a model on other storage is: the label and the annotations removed, so the
CompositeControllers finalize it and OME's backend alone makes its Job and writes its
status. The answer says which evidence it acted on, for the shell's metric and log line.

A DecoratorController's request carries the model as ``object`` for hook versions v1
and v2 alike (``pkg/controller/decorator/api/v2/hooks.go``: the Go field is ``Parent``,
its JSON key ``object``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from hooks.pvc.annotations import Annotations, removed, why
from hooks.pvc.decision import decide
from hooks.pvc.observation import CHILD_TYPES
from hooks.pvc.related import decision_rules
from hooks.pvc.storage_uri import is_pvc_uri
from hooks.request import BadRequest, Model, field, read_model
from hooks.settings import Settings
from hooks.upstream_backend import Evidence, find_evidence

STORAGE_LABEL = "ome-basemodel-hook.ome.io/storage"
PVC_STORAGE = "pvc"


class Labelled(NamedTuple):
    """The keeper's answer, and the evidence that OME serves ``pvc://`` models itself when
    the model was handed back for it (None otherwise)."""

    response: dict[str, Any]
    stepped_aside: Evidence | None


def keep_label(body: Any, settings: Settings, now: datetime) -> Labelled:
    """``{"labels": {STORAGE_LABEL: "pvc"}, "annotations": the why}`` for a ``pvc://``
    model; for any other, and for every model once OME serves ``pvc://`` models itself,
    the label and the annotations removed (``null``), so the model leaves the selector
    too; and a resync while the model is not yet labelled and annotated so."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    obj = body.get("object")
    if not isinstance(obj, dict):
        raise BadRequest("request has no 'object': the label keeper serves a DecoratorController's sync hook")
    model = read_model(obj)
    pvc = is_pvc_uri(model.storage_uri)
    evidence = _evidence(body, model) if pvc else None
    ours = pvc and evidence is None
    answer: dict[str, Any] = {"labels": {STORAGE_LABEL: PVC_STORAGE if ours else None}}
    annotations = _why(body, model, settings, now) if ours else removed()
    if annotations is not None:
        answer["annotations"] = annotations
    metadata = field(obj, "metadata")
    if _differs(field(metadata, "labels"), answer["labels"]) or _differs(field(metadata, "annotations"), annotations or {}):
        answer["resyncAfterSeconds"] = settings.sync.label_resync_seconds
    return Labelled(answer, evidence)


def _evidence(body: dict[str, Any], model: Model) -> Evidence | None:
    """The evidence that OME serves ``pvc://`` models itself; None where the related objects
    cannot be read with certainty, so a malformed object never hands a model back: the
    label follows the URI as before, and the next call looks again."""
    try:
        return find_evidence(body, model)
    except BadRequest:
        return None


def _why(body: dict[str, Any], model: Model, settings: Settings, now: datetime) -> Annotations | None:
    """The decision's why, from the related objects seen as the CompositeController sees its
    children; None (leave the annotations alone) while the model is being deleted or the
    objects cannot be read with certainty."""
    related = body.get("related")
    if model.deleting or not isinstance(related, dict) or not set(decision_rules(model, settings.sync)) <= set(related):
        return None
    request = {"parent": body["object"], "children": {key: related.get(key, {}) for key in CHILD_TYPES}, "related": related}
    try:
        return why(decide(request, model, False, settings, now))
    except BadRequest:
        return None


def _differs(current: dict[str, Any], wanted: dict[str, str | None]) -> bool:
    """Whether merging ``wanted`` (``None`` removes a key) would change ``current``."""
    return any(current.get(key) != value for key, value in wanted.items())
