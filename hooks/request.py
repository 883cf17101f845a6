"""Read a Metacontroller request: the envelope every hook shares, the parent model, and
the objects of one type among its children or related objects.

Everything here is defensive because a wrong 200 answer is destructive: Metacontroller
deletes every observed child missing from it. A request we cannot read with certainty
raises ``BadRequest`` (a 4xx, which changes nothing) instead of being guessed at.
Objects are found by their own ``metadata``, never by their map key, so hook versions
v1 and v2 read alike. What a flow makes of the objects is the flow's (``pvc/observation.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hooks.names import is_dns_label, is_dns_subdomain

API_GROUP = "ome.io"
API_VERSION = "ome.io/v1beta1"
BASE_MODEL = "BaseModel"
CLUSTER_BASE_MODEL = "ClusterBaseModel"
# The kinds among those the hook reads that Kubernetes keeps without a namespace.
CLUSTER_SCOPED_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding"})
INT64_MAX = 2**63 - 1


class BadRequest(ValueError):
    """The request cannot be understood; answered with 400 and this message."""


class Model(NamedTuple):
    """The parent BaseModel or ClusterBaseModel, as far as the decisions care."""

    kind: str
    name: str
    namespace: str | None
    generation: int | None
    spec: dict[str, Any]
    status: dict[str, Any]
    storage_uri: str
    deleting: bool = False

    @property
    def cluster_scoped(self) -> bool:
        return self.namespace is None

    @property
    def resource(self) -> str:
        """The plural resource name, for RBAC rules and related-object rules."""
        return "clusterbasemodels" if self.cluster_scoped else "basemodels"

    @property
    def kept_status(self) -> dict[str, Any]:
        """The status fields that belong to whoever set them (``lifecycle``), carried over."""
        lifecycle = self.status.get("lifecycle")
        return {"lifecycle": lifecycle} if isinstance(lifecycle, str) else {}


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
    name, namespace = read_parent_name(parent, namespaced=kind == BASE_MODEL)
    spec = parent.get("spec")
    storage = spec.get("storage") if isinstance(spec, dict) else None
    uri = storage.get("storageUri") if isinstance(storage, dict) else None
    if not isinstance(uri, str):
        raise BadRequest("parent has no spec.storage.storageUri string")
    generation = parent["metadata"].get("generation")
    return Model(
        kind=kind,
        name=name,
        namespace=namespace,
        generation=generation if is_count(generation, INT64_MAX) else None,
        spec=spec,  # type: ignore[arg-type]
        status=field(parent, "status"),
        storage_uri=uri,
        deleting=bool(parent["metadata"].get("deletionTimestamp")),
    )


def read_parent_name(parent: dict[str, Any], *, namespaced: bool) -> tuple[str, str | None]:
    """The parent's name and namespace (None when cluster-scoped), refused unless the API
    server could have stored them: what the hook returns is named after them, and an
    answer about a misread parent would misplace or drop work."""
    metadata = parent.get("metadata")
    if not isinstance(metadata, dict) or not _non_empty_text(metadata.get("name")):
        raise BadRequest("parent has no metadata.name")
    name = metadata["name"]
    if not is_dns_subdomain(name):
        raise BadRequest(
            f"parent name {_shown(name)} is not a name Kubernetes can store (a DNS-1123 "
            "subdomain: lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    namespace = metadata.get("namespace")
    if not namespaced:
        if namespace not in (None, ""):
            raise BadRequest(f"{parent.get('kind')} parent has metadata.namespace {_shown(namespace)}; it is cluster-scoped")
        return name, None
    if not _non_empty_text(namespace):
        raise BadRequest(
            f"{parent.get('kind')} parent has no metadata.namespace: not a namespaced object Kubernetes could have stored"
        )
    if not is_dns_label(namespace):
        raise BadRequest(
            f"parent namespace {_shown(namespace)} is not a namespace Kubernetes can store (a DNS-1123 "
            "label: lowercase letters, digits and '-', at most 63 characters)"
        )
    return name, namespace


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
    kind, _, api_version = type_key.partition(".")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for item in group.values():
        if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict):
            raise BadRequest(f"{_where(section, type_key)} holds an entry that is not an object with metadata")
        name = item["metadata"].get("name")
        if not _non_empty_text(name):
            raise BadRequest(f"{_where(section, type_key)} holds an object without metadata.name")
        identity = (_read_namespace(item, section, type_key, kind), name)
        if item.get("kind", kind) != kind or item.get("apiVersion", api_version) != api_version:
            raise _wrong_type(item, section, type_key)
        if identity in found:
            raise BadRequest(f"{_where(section, type_key)} holds {_object_name(identity)} twice")
        found[identity] = item
    return [found[identity] for identity in sorted(found)]


def _where(section: str, type_key: str) -> str:
    return f"request '{section}.{type_key}'"


def _read_namespace(item: dict[str, Any], section: str, type_key: str, kind: str) -> str:
    """The object's namespace ("" for a cluster-scoped kind), which the API server always sets.

    Children are matched by namespace and name, so an object whose namespace cannot be
    read could be taken for another, or missed, and then deleted."""
    namespace = item["metadata"].get("namespace")
    if kind in CLUSTER_SCOPED_KINDS:
        if namespace not in (None, ""):
            raise BadRequest(
                f"{_where(section, type_key)} holds {_shown(item['metadata']['name'])} with metadata.namespace "
                f"{_shown(namespace)}, but the type is cluster-scoped"
            )
        return ""
    if not is_dns_label(namespace):
        raise BadRequest(
            f"{_where(section, type_key)} holds {_shown(item['metadata']['name'])} whose metadata.namespace "
            f"{_shown(namespace)} is not a namespace name"
        )
    return namespace


def _wrong_type(item: dict[str, Any], section: str, type_key: str) -> BadRequest:
    """Metacontroller groups objects by type; an object that says otherwise was not sent by it."""
    kind, _, api_version = type_key.partition(".")
    key, expected = ("kind", kind) if item.get("kind", kind) != kind else ("apiVersion", api_version)
    return BadRequest(
        f"{_where(section, type_key)} holds {_shown(item['metadata']['name'])} whose {key} is "
        f"{_shown(item[key])}, not {expected!r}"
    )


def _object_name(identity: tuple[str, str]) -> str:
    namespace, name = identity
    return _shown(f"{namespace}/{name}" if namespace else name)


def _shown(value: Any) -> str:
    """A value quoted in an error message, cut short: requests can carry megabytes."""
    shown = repr(value)
    return shown if len(shown) <= 120 else shown[:117] + "..."


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


def items(obj: Any, key: str) -> list[Any]:
    """A list field of an observed object, or an empty one when it is absent or not a list."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def text(obj: Any, key: str) -> str:
    """A string field of an observed object, or "" when it is absent or not a string."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _non_empty_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def is_count(value: Any, limit: int) -> bool:
    """A whole number from 0 to ``limit``, as the API server would store it (bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit
