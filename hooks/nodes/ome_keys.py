"""OME's own names for the node flow: the agents' ConfigMaps, their data keys and entries.

OME's model agents and its controller agree on these formats; this hook reads what the
agents write, so it reproduces them exactly, including the hash truncation of long names.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hooks.observed import field

STATUS_LABEL = "models.ome/basemodel-status"
MAX_KEY_LENGTH = 253

ENTRY_READY = "Ready"
ENTRY_FAILED = "Failed"
ENTRY_DELETED = "Deleted"


def truncate_with_hash(text: str, limit: int) -> str:
    """OME's truncation: keep the end of the text behind an 8-hex SHA-256 prefix."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    keep = limit - len(digest) - 1
    if keep <= 0:
        return digest[:limit]
    return f"{digest}-{text[-keep:]}"


def configmap_key(namespace: str | None, name: str) -> str:
    """The data key of a model in a node's ConfigMap (OME's GetModelConfigMapKey)."""
    if namespace is None:
        prefix = "clusterbasemodel"
        return f"{prefix}.{truncate_with_hash(name, MAX_KEY_LENGTH - len(prefix) - 1)}"
    budget = MAX_KEY_LENGTH - len("basemodel.") - 1
    if len(namespace) + len(name) > budget:
        if len(namespace) > 8:
            namespace, name_budget = truncate_with_hash(namespace, 8), budget - 8
        else:
            name_budget = budget - len(namespace)
        name = truncate_with_hash(name, name_budget)
    return f"{namespace}.basemodel.{name}"


def is_model_key(key: str) -> bool:
    """Whether OME maps a data key to a model at all (its ParseModelInfoFromConfigMapKey)."""
    return key.startswith("clusterbasemodel.") or ".basemodel." in key


def is_status_configmap(configmap: dict[str, Any], ome_namespace: str) -> bool:
    """OME reads only the labelled ConfigMaps of its own namespace."""
    metadata = field(configmap, "metadata")
    return metadata.get("namespace") == ome_namespace and field(metadata, "labels").get(STATUS_LABEL) == "true"


def entry_status(raw: Any) -> str | None:
    """An entry's status, or None when it does not parse (it still holds deletion back)."""
    try:
        entry = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    status = entry.get("status") if isinstance(entry, dict) else None
    return status if isinstance(status, str) else None
