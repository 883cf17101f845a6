"""Models that predate the hook: a pvc:// and an hf:// model of each kind, made and reconciled by
OME's real manager before anything of the hook is installed (the install-over-existing story)."""

from __future__ import annotations

from tests.cluster.processes import wait_until
from tests.cluster.tier import MODELS, Tier

NAMESPACE = "existing"
CLAIM = "model-storage"
SUB_PATH = "llama"
HF_URI = "hf://mistralai/Mistral-7B-Instruct-v0.3"
PVC_MODELS = {"BaseModel": ("llama", NAMESPACE, f"pvc://{CLAIM}/{SUB_PATH}"),
              "ClusterBaseModel": ("existing-llama", None, f"pvc://{NAMESPACE}:{CLAIM}/{SUB_PATH}")}
HF_MODELS = {"BaseModel": ("mistral", NAMESPACE, HF_URI), "ClusterBaseModel": ("existing-mistral", None, HF_URI)}
OME_FINALIZERS = {"BaseModel": "basemodels.ome.io/finalizer", "ClusterBaseModel": "clusterbasemodels.ome.io/finalizer"}
RECONCILED_SECONDS = 60.0


def manifest(kind: str, name: str, namespace: str | None, uri: str) -> dict[str, object]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": MODELS, "kind": kind, "metadata": metadata, "spec": {"storage": {"storageUri": uri}}}


def create_existing_models(tier: Tier) -> None:
    """The four models, each with OME's finalizer and OME's In_Transit (no node reports any of them)."""
    tier.storage(NAMESPACE, CLAIM, SUB_PATH)
    models = [(kind, *found) for table in (PVC_MODELS, HF_MODELS) for kind, found in table.items()]
    tier.apply(*(manifest(kind, name, namespace, uri) for kind, name, namespace, uri in models))

    def reconciled() -> bool:
        for kind, name, namespace, _ in models:
            model = tier.model(kind, name, namespace) or {}
            if OME_FINALIZERS[kind] not in model.get("metadata", {}).get("finalizers", []) \
                    or (model.get("status") or {}).get("state") != "In_Transit":
                return False
        return True
    wait_until(reconciled, RECONCILED_SECONDS, "OME's manager reconciling the models that predate the hook")
