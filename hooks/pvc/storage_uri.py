"""Parse and judge ``pvc://`` storage URIs.

Upstream OME's parser accepts far more than Kubernetes can mount (absolute or ``..``
sub-paths, any PVC name) and leaves namespace policy to the controller. This module
applies all of it in one place, so every refusal carries one reason and a message that
says what was wrong and what the right form is. Syntax is judged before namespace policy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from hooks.names import is_dns_label, is_dns_subdomain
from hooks.reasons import Reason

PVC_SCHEME = "pvc://"


@dataclass(frozen=True)
class PVCLocation:
    """Where a model lives: the PVC's namespace and name, and the directory inside it."""

    namespace: str
    pvc_name: str
    sub_path: str


@dataclass(frozen=True)
class StorageURIError(Exception):
    """A URI this hook refuses; ``reason`` is the condition reason to report."""

    reason: Reason
    message: str

    def __str__(self) -> str:
        return self.message


def is_pvc_uri(uri: object) -> bool:
    """The flow switch: OME matches schemes with a case-sensitive prefix, and so do we."""
    return isinstance(uri, str) and uri.startswith(PVC_SCHEME)


def expected_form(parent_namespace: str | None) -> str:
    """The accepted URI shape for a parent, quoted in every refusal."""
    if parent_namespace is None:
        return "pvc://{namespace}:{pvc-name}/{sub-path}"
    return f"pvc://{{pvc-name}}/{{sub-path}} or pvc://{parent_namespace}:{{pvc-name}}/{{sub-path}}"


@functools.lru_cache(maxsize=4096)
def parse_pvc_uri(uri: str, parent_namespace: str | None) -> PVCLocation:
    """Resolve ``uri`` for a BaseModel in ``parent_namespace``, or a ClusterBaseModel (None).

    Remembered for the models synced lately (a refusal is not: it is judged again)."""

    def refuse(problem: str, reason: Reason = Reason.INVALID_STORAGE_URI) -> StorageURIError:
        return StorageURIError(
            reason, f"storageUri {uri!r} {problem}; expected {expected_form(parent_namespace)}"
        )

    namespace, pvc_name, sub_path = _read(uri, refuse)
    if parent_namespace is None:
        if namespace is None:
            raise refuse("has no namespace; a ClusterBaseModel must name the PVC's namespace")
        return PVCLocation(namespace, pvc_name, sub_path)
    if namespace is not None and namespace != parent_namespace:
        raise refuse(
            f"points at namespace {namespace!r}, but a BaseModel may only use PVCs in its own "
            f"namespace {parent_namespace!r} (use a ClusterBaseModel to share a PVC across namespaces)",
            Reason.CROSS_NAMESPACE_PVC,
        )
    return PVCLocation(parent_namespace, pvc_name, sub_path)


Refuse = Callable[[str], StorageURIError]


def _read(uri: str, refuse: Refuse) -> tuple[str | None, str, str]:
    """The syntax: ``pvc://[namespace:]pvc-name/sub-path``, each part as Kubernetes names it."""
    if not is_pvc_uri(uri):
        raise refuse("does not start with pvc://")
    rest = uri[len(PVC_SCHEME) :]
    if not rest:
        raise refuse("is empty after pvc://")
    head, slash, sub_path = rest.partition("/")
    if not slash:
        raise refuse("has no sub-path after the PVC name")
    namespace, pvc_name = _read_claim(head, refuse)
    return namespace, pvc_name, _check_sub_path(sub_path, refuse)


def _read_claim(head: str, refuse: Refuse) -> tuple[str | None, str]:
    """``[namespace:]pvc-name``: a DNS-1123 label, then a DNS-1123 subdomain."""
    namespace: str | None = None
    pvc_name = head
    if ":" in head:
        namespace, _, pvc_name = head.partition(":")
        if ":" in pvc_name:
            raise refuse("has more than one ':' before the first '/'")
        if not namespace:
            raise refuse("has an empty namespace before ':'")
        if not is_dns_label(namespace):
            raise refuse(
                f"names namespace {namespace!r}, which is not a DNS-1123 label "
                "(lowercase letters, digits and '-', at most 63 characters)"
            )
    if not pvc_name:
        raise refuse("has an empty PVC name")
    if not is_dns_subdomain(pvc_name):
        raise refuse(
            f"names PVC {pvc_name!r}, which is not a DNS-1123 subdomain "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    return namespace, pvc_name


def _check_sub_path(sub_path: str, refuse: Refuse) -> str:
    """Kubernetes refuses absolute and ``..`` sub-paths; empty segments are always typos."""
    if sub_path.endswith("/"):
        sub_path = sub_path[:-1]
    if not sub_path:
        raise refuse("has an empty sub-path")
    if sub_path.startswith("/"):
        raise refuse(f"has an absolute sub-path {sub_path!r}; the sub-path is relative to the PVC's root")
    segments = sub_path.split("/")
    if ".." in segments:
        raise refuse(f"has a '..' segment in sub-path {sub_path!r}")
    if "" in segments:
        raise refuse(f"has an empty segment ('//') in sub-path {sub_path!r}")
    return sub_path
