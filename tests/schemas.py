"""Check objects the way a cluster would: Kubernetes' own schemas and our CRDs' schemas.

The CRD check is stricter than jsonschema's default: the API server prunes every field a
structural schema does not name, so an unnamed field is reported here as an error.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import latest_version

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
KUBERNETES_VERSIONS = ("1.29.0", latest_version())
CRD_FILES = {
    "BaseModel": REPO / "metacontroller" / "crd-basemodels.yaml",
    "ClusterBaseModel": REPO / "metacontroller" / "crd-clusterbasemodels.yaml",
}


def kubernetes_errors(obj: dict[str, Any], version: str) -> list[str]:
    """Strict validation of a built-in object against the Kubernetes OpenAPI schema."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(str(part) for part in error.path)}: {error.message}"]
    return []


def no_pruning(schema: Any) -> Any:
    """A copy of a structural schema in which every field it does not name is an error."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("x-kubernetes-preserve-unknown-fields"):
                return
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


@lru_cache(maxsize=None)
def crd_schema(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    validator = jsonschema.Draft7Validator(no_pruning(schema), format_checker=jsonschema.FormatChecker())
    return sorted(f"{'.'.join(str(part) for part in error.path)}: {error.message}" for error in validator.iter_errors(instance))


def status_errors(kind: str, status: dict[str, Any]) -> list[str]:
    """Errors, or fields the API server would prune, in a status written to our CRD."""
    return schema_errors(crd_schema(CRD_FILES[kind])["properties"]["status"], status)
