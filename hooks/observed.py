"""Read a Metacontroller request into the few facts the decisions need.

Everything here is defensive because a wrong 200 answer is destructive: Metacontroller
deletes every observed child missing from it. A request we cannot read with certainty
raises ``BadRequest`` (a 4xx, which changes nothing) instead of being guessed at.
Objects are found by their own ``metadata``, never by their map key, so hook versions
v1 and v2 read alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_GROUP = "ome.io"
API_VERSION = "ome.io/v1beta1"
BASE_MODEL = "BaseModel"
CLUSTER_BASE_MODEL = "ClusterBaseModel"

JOBS = "Job.batch/v1"
SERVICE_ACCOUNTS = "ServiceAccount.v1"
ROLES = "Role.rbac.authorization.k8s.io/v1"
ROLE_BINDINGS = "RoleBinding.rbac.authorization.k8s.io/v1"
CLUSTER_ROLES = "ClusterRole.rbac.authorization.k8s.io/v1"
CLUSTER_ROLE_BINDINGS = "ClusterRoleBinding.rbac.authorization.k8s.io/v1"
PVCS = "PersistentVolumeClaim.v1"
PODS = "Pod.v1"
NODES = "Node.v1"


class BadRequest(ValueError):
    """The request cannot be understood; answered with 400 and this message."""


@dataclass(frozen=True)
class Model:
    """The parent BaseModel or ClusterBaseModel, as far as the decisions care."""

    kind: str
    name: str
    namespace: str | None
    generation: int | None
    spec: dict[str, Any]
    status: dict[str, Any]
    storage_uri: str

    @property
    def cluster_scoped(self) -> bool:
        return self.namespace is None

    @property
    def resource(self) -> str:
        """The plural resource name, for RBAC rules and related-object rules."""
        return "clusterbasemodels" if self.cluster_scoped else "basemodels"


def read_request(body: Any) -> dict[str, Any]:
    """Check the envelope every hook shares: a JSON object with a ``parent`` object."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if not isinstance(body.get("parent"), dict):
        raise BadRequest("request has no 'parent' object")
    return body


def read_model(parent: dict[str, Any]) -> Model:
    """Identify the parent; refuse kinds and shapes this hook does not serve."""
    kind = parent.get("kind")
    if kind not in (BASE_MODEL, CLUSTER_BASE_MODEL) or parent.get("apiVersion") != API_VERSION:
        api = parent.get("apiVersion") or "no apiVersion"
        raise BadRequest(
            f"parent kind {kind!r} ({api}) is not served; this hook serves "
            f"{API_VERSION} {BASE_MODEL} and {CLUSTER_BASE_MODEL}"
        )
    metadata = parent.get("metadata")
    if not isinstance(metadata, dict) or not _non_empty_text(metadata.get("name")):
        raise BadRequest("parent has no metadata.name")
    namespace = metadata.get("namespace")
    if kind == BASE_MODEL and not _non_empty_text(namespace):
        raise BadRequest("BaseModel parent has no metadata.namespace")
    spec = parent.get("spec")
    storage = spec.get("storage") if isinstance(spec, dict) else None
    uri = storage.get("storageUri") if isinstance(storage, dict) else None
    if not isinstance(uri, str):
        raise BadRequest("parent has no spec.storage.storageUri string")
    generation = metadata.get("generation")
    return Model(
        kind=kind,
        name=metadata["name"],
        namespace=namespace if kind == BASE_MODEL else None,
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else None,
        spec=spec,  # type: ignore[arg-type]
        status=field(parent, "status"),
        storage_uri=uri,
    )


def require_group(request: dict[str, Any], section: str, type_key: str) -> dict[str, Any]:
    """The map of one object type, which must be present.

    Metacontroller always sends every declared child type and every type a customize rule
    asked for, so a missing one means the CompositeController is not wired as this hook
    needs, and answering anyway could delete children or misjudge storage.
    """
    groups = request.get(section)
    if not isinstance(groups, dict):
        raise BadRequest(f"request '{section}' must be an object keyed by type")
    group = groups.get(type_key)
    if group is None:
        raise BadRequest(
            f"request '{section}' has no {type_key!r} map; check the CompositeController's "
            + ("childResources" if section == "children" else "customize hook")
        )
    if not isinstance(group, dict):
        raise BadRequest(f"request '{section}.{type_key}' must be an object keyed by name")
    return group


def object_group(request: dict[str, Any], section: str, type_key: str, *, required: bool) -> list[dict[str, Any]]:
    """The objects of one type in ``children`` or ``related``, sorted by namespace and name;
    a type that is not ``required`` may be absent."""
    groups = request.get(section)
    if not required and (groups is None or (isinstance(groups, dict) and type_key not in groups)):
        return []
    group = require_group(request, section, type_key)
    found = []
    for item in group.values():
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            raise BadRequest(f"request '{section}.{type_key}' holds an entry that is not an object with metadata")
        if not _non_empty_text(item["metadata"].get("name")):
            raise BadRequest(f"request '{section}.{type_key}' holds an object without metadata.name")
        if not isinstance(item["metadata"].get("namespace", ""), str):
            raise BadRequest(f"request '{section}.{type_key}' holds an object whose metadata.namespace is not a string")
        found.append(item)
    return sorted(found, key=lambda item: (item["metadata"].get("namespace") or "", item["metadata"]["name"]))


def has_children(request: dict[str, Any]) -> bool:
    """Whether any child of any type is still observed (deletion waits for none)."""
    groups = request.get("children")
    if groups is None:
        return False
    if not isinstance(groups, dict) or not all(isinstance(group, dict) for group in groups.values()):
        raise BadRequest("request 'children' must be an object of objects keyed by type")
    return any(groups.values())


def field(obj: Any, key: str) -> dict[str, Any]:
    """A nested object of an observed object, or an empty one when it is absent or not an object."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def text(obj: Any, key: str) -> str:
    """A string field of an observed object, or "" when it is absent or not a string."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _non_empty_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""
