"""A write of a model as the status fence (``metacontroller/fence.yaml``) reviews it.

The admission request each writer sends, reviewed as the API server would (``tests/admission.py``),
and the refusal a writer gets: the fence's own tests and the overlays' and chart's, which
change its owner, read the same answer.
"""

from __future__ import annotations

from typing import Any

from tests.admission import POLICY, Admission, Attributes
from tests.metacontroller import manifests
from tests.metacontroller.identities import METACONTROLLER

Obj = dict[str, Any]

FENCE = manifests("fence.yaml")
(POLICY_OBJECT,) = [item for item in FENCE if item["kind"] == POLICY]
(BINDING_OBJECT,) = [item for item in FENCE if item["kind"] != POLICY]
KINDS = ("BaseModel", "ClusterBaseModel")
RESOURCES = {"BaseModel": "basemodels", "ClusterBaseModel": "clusterbasemodels"}
PVC_URIS = {"BaseModel": "pvc://model-storage/llama", "ClusterBaseModel": "pvc://models:model-storage/llama"}
HF_URI = "hf://meta-llama/Llama-3.1-8B"
OME_STATUS = {"state": "In_Transit"}
HOOK_STATUS = {"state": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "ready"}]}


def model(kind: str, spec: Obj | None = None, status: Obj | None = None) -> Obj:
    metadata: Obj = {"name": "llama", "uid": "1"}
    if kind == "BaseModel":
        metadata["namespace"] = "models"
    obj: Obj = {"apiVersion": "ome.io/v1beta1", "kind": kind, "metadata": metadata,
                "spec": {"storage": {"storageUri": PVC_URIS[kind]}} if spec is None else spec}
    if status is not None:
        obj["status"] = status
    return obj


def write(kind: str, user: str, operation: str = "UPDATE", subresource: str = "status", spec: Obj | None = None,
          status: Obj | None = None) -> Attributes:
    """A write of the model as the API server's admission sees it: for a status UPDATE the
    stored model with the new status, its spec the stored one."""
    stored = model(kind, spec, HOOK_STATUS)
    sent = model(kind, spec, OME_STATUS if status is None else status)
    obj, old = {"CREATE": (sent, None), "UPDATE": (sent, stored), "DELETE": (None, stored)}[operation]
    return Attributes(operation, "ome.io/v1beta1", RESOURCES[kind], kind, "llama",
                      "models" if kind == "BaseModel" else "", subresource, user, obj, old)


def review(attributes: Attributes, fence: list[Obj] = FENCE) -> str | None:
    """The refusal's message, or None when the write is admitted."""
    refusal = Admission(fence).review(attributes)
    return None if refusal is None else f"{refusal.code} {refusal.reason}: {refusal.message}"


def refusal_of(kind: str, owner: str = METACONTROLLER) -> str:
    where = "models/llama" if kind == "BaseModel" else "llama"
    return (f"403 Forbidden: {RESOURCES[kind]}.ome.io \"llama\" is forbidden: ValidatingAdmissionPolicy "
            "'ome-basemodel-hook-status-fence' with binding 'ome-basemodel-hook-status-fence' denied request: "
            f"status of {kind} {where} is written only by {owner} for ome-basemodel-hook (its storage is pvc://); "
            "see docs/install.md#the-status-fence")
