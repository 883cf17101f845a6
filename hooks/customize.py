"""The customize hook: which related objects Metacontroller should send with each sync.

Metacontroller caches this answer per parent generation, so the rules depend on the spec
alone. It asks every parent of the CompositeController, selected or not, whenever a
related object changes: a model that is not the hook's asks for nothing.

What a rule costs is Metacontroller's, not the hook's: it keeps an informer, a cache of
every object of the rule's type in the cluster, whatever the rule selects. The PVCs are
few; the pods may be many, so ``READ_JOB_PODS=false`` leaves them out, and the status
then cannot quote what the agent's pod said.
"""

from __future__ import annotations

from typing import Any

from hooks.pvc.metadata_job import model_labels
from hooks.pvc.storage_uri import StorageURIError, is_pvc_uri, parse_pvc_uri
from hooks.request import read_model, read_request
from hooks.settings import Settings


def customize(body: Any, settings: Settings) -> dict[str, Any]:
    """The PVC by name and, unless turned off, the model's Job pods (whose messages explain
    failures); nothing for a model on other storage or a URI that does not parse."""
    model = read_model(read_request(body)["parent"])
    if not is_pvc_uri(model.storage_uri):
        return {"relatedResources": []}
    try:
        location = parse_pvc_uri(model.storage_uri, model.namespace)
    except StorageURIError:
        return {"relatedResources": []}
    rules: list[dict[str, Any]] = [
        {"apiVersion": "v1", "resource": "persistentvolumeclaims", "namespace": location.namespace, "names": [location.pvc_name]}
    ]
    if settings.sync.read_job_pods:
        rules.append(
            {
                "apiVersion": "v1",
                "resource": "pods",
                "namespace": location.namespace,
                "labelSelector": {"matchLabels": model_labels(model)},
            }
        )
    return {"relatedResources": rules}
