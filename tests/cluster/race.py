"""The label race of issue 20, played for certain with OME's real manager.

OME's manager adds its finalizer to a new model within milliseconds; the label keeper reads
the model, asks the hook and writes the label. When OME's write lands between the keeper's
read and its write, the keeper's write carries a stale resourceVersion and meets a
Conflict, which Metacontroller swallows; OME's write is then an event the keeper's
``ignoreStatusChanges`` filter drops (unless it starts a new generation, as it does for a
model without a ``modelFormat``, which OME's typed write fills in). ``played`` makes that
order certain: OME's manager is paused (SIGSTOP) until the keeper's call about the model
arrives at the hook proxy with the model as read before OME's write, then resumed, and the
keeper's answer held until OME's finalizer is in.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from tests.cluster.hook_proxy import Hold
from tests.cluster.tier import Tier

OME_FINALIZERS = {"BaseModel": "basemodels.ome.io/finalizer", "ClusterBaseModel": "clusterbasemodels.ome.io/finalizer"}


@contextmanager
def played(tier: Tier, kind: str, name: str, has_finalizer: Callable[[], bool]) -> Iterator[list[bool]]:
    """Within the block, the first label keeper call about model ``name`` is raced by OME's
    finalizer; the list it yields holds True once that happened. A block that ends without
    the race played, its hold timed out, fails naming the hold."""
    proxy, ome = tier.proxy, tier.ome
    assert proxy is not None and ome is not None
    happened: list[bool] = []

    def until_finalized(path: str, body: dict[str, Any]) -> Callable[[], bool] | None:
        metadata = (body.get("object") or {}).get("metadata") or {}
        if path != "/label" or metadata.get("name") != name or happened \
                or OME_FINALIZERS[kind] in (metadata.get("finalizers") or []):
            return None
        happened.append(True)
        ome.resume()
        return has_finalizer

    hold = Hold(f"the label keeper's first answer about {kind} {name}, until OME's finalizer is in", until_finalized)
    proxy.holds.append(hold)
    ome.pause()
    try:
        yield happened
    finally:
        ome.resume()
        proxy.holds.remove(hold)
    proxy.check()
