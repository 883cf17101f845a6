"""The answer for a model that is not the hook's: its storage is not ``pvc://``, or it left
the CompositeController's label selector while it still carries the hook's finalizer.

Metacontroller keeps calling until it lets go: sync between a URI change and the label
keeper's relabel, then finalize until ``finalized``, and every call ends in a status
write. The children go (a Job would describe storage the model no longer names), and the
status handed back is the one OME's own reconciler computes for a model no node reports:
``In_Transit``, no node lists, none of the hook's fields. OME rewrites it as soon as its
view differs (the fence admits OME's writes for a model whose URI is not ``pvc://``); where
OME's view is the same, nothing the hook claimed is left standing.
"""

from __future__ import annotations

from typing import Any

from hooks.reasons import Reason
from hooks.request import Model, has_children
from hooks.settings import Settings

# OME's own status for a model no node reports, the one the catalogue gives a handed-back model.
HANDED_BACK_STATE = Reason.HANDED_BACK.state


def hand_back(request: dict[str, Any], model: Model, finalizing: bool, settings: Settings) -> dict[str, Any]:
    """No children and OME's starting status; while finalizing, ``finalized`` once no child
    is observed (Metacontroller then removes its finalizer and stops calling)."""
    remaining = has_children(request)
    response: dict[str, Any] = {"status": {"state": HANDED_BACK_STATE, **model.kept_status}, "children": []}
    if finalizing:
        response["finalized"] = not remaining
        if remaining:
            response["resyncAfterSeconds"] = settings.sync.finalize_resync_seconds
    return response
