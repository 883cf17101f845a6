"""The answer for a model that is not the hook's: its storage is not ``pvc://``, or it left
the CompositeController's label selector while it still carries the hook's finalizer.

Metacontroller keeps calling until it lets go: sync between a URI change and the label
keeper's relabel, then finalize until ``finalized``, and every call ends in a status
write. The children go (a Job would describe storage the model no longer names), and the
status handed back is the one OME's own reconciler computes for a model no node reports:
``In_Transit``, no node lists, none of the hook's fields. OME rewrites it as soon as its
view differs (the fence admits OME's writes for a model whose URI is not ``pvc://``); where
OME's view is the same, nothing the hook claimed is left standing.

Once OME serves ``pvc://`` models itself, its backend may have written the status before
the model left the selector (the fence admits its stamped writes): that status is handed
back as OME wrote it, without the hook's condition types, so Metacontroller's last write
takes nothing from OME (``upstream_backend.status_left_to_ome``).
"""

from __future__ import annotations

from typing import Any

from hooks.reasons import Reason
from hooks.request import Model, has_children
from hooks.settings import Settings
from hooks.upstream_backend import status_left_to_ome, written_by_ome_backend

# OME's own status for a model no node reports, the one the catalogue gives a handed-back model.
HANDED_BACK_STATE = Reason.HANDED_BACK.state


def hand_back(request: dict[str, Any], model: Model, finalizing: bool, settings: Settings) -> dict[str, Any]:
    """No children and OME's status (its backend's, or its starting one); while finalizing,
    ``finalized`` once no child is observed (Metacontroller then removes its finalizer and
    stops calling)."""
    remaining = has_children(request)
    omes = status_left_to_ome(model.status) if written_by_ome_backend(model.status) else model.kept_status
    response: dict[str, Any] = {"status": {"state": HANDED_BACK_STATE, **omes}, "children": []}
    if finalizing:
        response["finalized"] = not remaining
        if remaining:
            response["resyncAfterSeconds"] = settings.sync.finalize_resync_seconds
    return response
