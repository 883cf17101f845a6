"""The label keeper: the DecoratorController hook that marks which models are the hook's.

The CompositeControllers select their parents by ``STORAGE_LABEL``, so a model is synced
by them exactly while this label says its storage is ``pvc://``; every other model never
reaches them and stays OME's alone. The keeper answers with that one label and nothing
else: no status (Metacontroller leaves a decorated object's status alone when the answer
has none), no attachment, no finalizer. An answer that changes nothing costs no write.

While the model does not carry the label it should, the answer also asks to be called
again (``resyncAfterSeconds``). Metacontroller writes the label on its cached copy of the
model and drops the write when another writer updated the model first (a Conflict it
swallows, "since we will reconcile again"); with ``ignoreStatusChanges`` the update that
caused it, OME's finalizer on a new model or a status write, calls nobody. The resync is
queued before the write is tried, so the keeper looks again whatever became of it; once
the label is right the answer asks nothing more.

A DecoratorController's request carries the model as ``object`` for hook versions v1
and v2 alike (``pkg/controller/decorator/api/v2/hooks.go``: the Go field is ``Parent``,
its JSON key ``object``).
"""

from __future__ import annotations

from typing import Any

from hooks.pvc.storage_uri import is_pvc_uri
from hooks.request import BadRequest, field, read_model
from hooks.settings import SyncSettings

STORAGE_LABEL = "ome-basemodel-hook.ome.io/storage"
PVC_STORAGE = "pvc"


def keep_label(body: Any, settings: SyncSettings) -> dict[str, Any]:
    """``{"labels": {STORAGE_LABEL: "pvc"}}`` for a ``pvc://`` model; for any other, the
    label removed (``null``), so a model that left ``pvc://`` leaves the selector too; and
    a resync while the model's label is not yet that one."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("object")
    if not isinstance(model, dict):
        raise BadRequest("request has no 'object': the label keeper serves a DecoratorController's sync hook")
    wanted = PVC_STORAGE if is_pvc_uri(read_model(model).storage_uri) else None
    answer: dict[str, Any] = {"labels": {STORAGE_LABEL: wanted}}
    if field(field(model, "metadata"), "labels").get(STORAGE_LABEL) != wanted:
        answer["resyncAfterSeconds"] = settings.label_resync_seconds
    return answer
