"""Kubernetes' rules for object names, for names the hook reads and names it derives.

A name the API server could not have stored means the request was not sent by a real
Metacontroller about a real object; deriving child names from it would misplace work.

Every sync checks the same few names again (the model's, its namespace, its children's),
so the verdicts are remembered, for names short enough to pass only: the memory is bounded.
"""

from __future__ import annotations

import functools
import re

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def is_dns_label(name: object) -> bool:
    """DNS-1123 label: namespaces, and each part of a subdomain."""
    return isinstance(name, str) and len(name) <= 63 and _is_label(name)


def is_dns_subdomain(name: object) -> bool:
    """DNS-1123 subdomain: the names of most objects, BaseModels and PVCs among them."""
    return isinstance(name, str) and len(name) <= 253 and _is_subdomain(name)


@functools.lru_cache(maxsize=4096)
def _is_label(name: str) -> bool:
    return _DNS_LABEL.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)
def _is_subdomain(name: str) -> bool:
    return all(_DNS_LABEL.fullmatch(part) for part in name.split("."))
