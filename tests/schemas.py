"""Check objects the way a cluster would: Kubernetes' own schemas and our CRDs' schemas.

The CRD checks are stricter than jsonschema's defaults: the API server prunes every field
a structural schema does not name, so an unnamed field is reported here as an error, and
list-map keys must be unique as the API server requires.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import all_versions, latest_version, schema_contents
from referencing import Registry, Resource

REPO = Path(__file__).resolve().parent.parent
KUBERNETES_VERSIONS = ("1.29.0", latest_version())
SERVED_SINCE = {
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): "1.30.0",
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): "1.30.0",
}
"""Types the install uses that Kubernetes serves only after ``KUBERNETES_VERSIONS[0]``: the
fence's policy is GA (``admissionregistration.k8s.io/v1``) from 1.30."""
CRD_FILES = {
    "BaseModel": REPO / "metacontroller" / "crds" / "basemodels.yaml",
    "ClusterBaseModel": REPO / "metacontroller" / "crds" / "clusterbasemodels.yaml",
}
RECORD_CRD_FILE = REPO / "metacontroller" / "extractionrecords.yaml"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def served(obj: dict[str, Any], version: str) -> bool:
    """Whether Kubernetes ``version`` serves the object's type."""
    return _minor(version) >= _minor(SERVED_SINCE.get((obj["apiVersion"], obj["kind"]), KUBERNETES_VERSIONS[0]))


def versions_serving(obj: dict[str, Any]) -> tuple[str, ...]:
    """What an object is checked against: the oldest version we support that serves its type, and the newest."""
    return SERVED_SINCE.get((obj["apiVersion"], obj["kind"]), KUBERNETES_VERSIONS[0]), KUBERNETES_VERSIONS[-1]


def kubernetes_errors(obj: dict[str, Any], version: str) -> list[str]:
    """Strict validation of a built-in object against the Kubernetes OpenAPI schema."""
    error = jsonschema.exceptions.best_match(_kubernetes_validator(version, obj["kind"], obj["apiVersion"]).iter_errors(obj))
    return [] if error is None else [f"{'.'.join(str(part) for part in error.path)}: {error.message}"]


@lru_cache(maxsize=None)
def _kubernetes_validator(version: str, kind: str, api_version: str) -> jsonschema.protocols.Validator:
    """kubernetes_validate's strict schema for one type, built once: ``validate`` reads its
    schema files on every call (about 10 ms), and the property tests check thousands of
    objects. Same files, same lookup rules as ``kubernetes_validate.validate``."""
    wanted = kubernetes_validate.utils.major_minor(version)
    schema_version = [known for known in all_versions() if kubernetes_validate.utils.major_minor(known) <= wanted][-1]
    folder = f"kubernetes-json-schema/v{schema_version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"{folder}/{kind.lower()}-{group}.json", version)
    definitions = schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
GO_DURATION = re.compile(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+)$")

FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value):
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        raise ValueError(f"{value!r} is not an RFC 3339 date-time")
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    return True


@FORMATS.checks("duration")
def _is_go_duration(value):
    # kube-openapi's "duration" is a Go duration string such as 10s or 1m30s.
    return not isinstance(value, str) or bool(GO_DURATION.match(value))


@FORMATS.checks("int32")
def _is_int32(value):
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _is_int64(value):
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def closed(schema):
    """Return a copy of a CRD (OpenAPI v3) schema that rejects unknown fields.

    Adds `additionalProperties: false` to every object schema that lists
    `properties` and has neither `additionalProperties` nor
    `x-kubernetes-preserve-unknown-fields` (where the API server would prune an
    unknown field, the closed schema reports it). Nodes marked
    x-kubernetes-preserve-unknown-fields keep accepting anything.
    """

    def walk(node):
        if not isinstance(node, dict):
            return node
        node = dict(node)
        if "properties" in node:
            node["properties"] = {k: walk(v) for k, v in node["properties"].items()}
            if "additionalProperties" not in node and not node.get(
                "x-kubernetes-preserve-unknown-fields"
            ):
                node["additionalProperties"] = False
        if isinstance(node.get("additionalProperties"), dict):
            node["additionalProperties"] = walk(node["additionalProperties"])
        if isinstance(node.get("items"), dict):
            node["items"] = walk(node["items"])
        for key in ("allOf", "anyOf", "oneOf"):
            if key in node:
                node[key] = [walk(s) for s in node[key]]
        if isinstance(node.get("not"), dict):
            node["not"] = walk(node["not"])
        return node

    return walk(copy.deepcopy(schema))


def validator(schema):
    return jsonschema.Draft202012Validator(closed(schema), format_checker=FORMATS)


def list_errors(schema, instance, path="<root>"):
    """What jsonschema does not check: x-kubernetes-list-type map/set uniqueness."""
    errors = []
    if isinstance(instance, dict):
        for key, value in instance.items():
            sub = schema.get("properties", {}).get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None:
                errors += list_errors(sub, value, f"{path}/{key}")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        list_type = schema.get("x-kubernetes-list-type")
        seen = []
        for i, item in enumerate(instance):
            if list_type == "map" and isinstance(item, dict):
                key = tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"])
            elif list_type == "set":
                key = item
            else:
                key = object()
            if key in seen:
                errors.append(f"{path}/{i}: duplicate entry {key!r} in a list of type {list_type}")
            seen.append(key)
            errors += list_errors(schema["items"], item, f"{path}/{i}")
    return errors


def errors_of(schema, instance):
    """Every reason the API server would reject (or prune from) `instance`."""
    return sorted(
        [
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator(schema).iter_errors(instance)
        ]
        + list_errors(schema, instance)
    )


@lru_cache(maxsize=None)
def _crd_schema(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def status_errors(kind: str, status: dict[str, Any]) -> list[str]:
    """Errors, or fields the API server would prune, in a status written to our CRD."""
    return errors_of(_crd_schema(CRD_FILES[kind])["properties"]["status"], status)


def record_errors(record: dict[str, Any]) -> list[str]:
    """Errors, or fields the API server would prune, in an ``ExtractionRecord`` (its metadata
    aside, which the API server checks as any object's)."""
    return errors_of(_crd_schema(RECORD_CRD_FILE), {key: value for key, value in record.items() if key != "metadata"})


def child_errors(child: dict[str, Any], version: str) -> list[str]:
    """A child as the API server of ``version`` judges it: a built-in one by Kubernetes'
    schema, the hook's record by its CRD's."""
    if child["kind"] == "ExtractionRecord":
        return record_errors(child)
    return kubernetes_errors(child, version)
