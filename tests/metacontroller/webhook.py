"""Calling a hook as ``pkg/hooks`` does: one POST, 200 or an error, strict or loose decoding.

A hook here is any callable ``(path, body) -> (status_code, body)``: the Flask test
client (``flask_hook``), the pure core (``core_hook``), or a test's own function.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable
from urllib.parse import urlparse

from tests.metacontroller.selection import clone

Hook = Callable[[str, dict[str, Any]], tuple[int, Any]]


class HookError(Exception):
    """The call failed (``webhook.go``: "unsupported status code", "can't unmarshal", "strict validation failed")."""


class HookDown(HookError):
    """No answer at all: the hook's process is gone ("http error: ..." in ``webhook.go``)."""


class TooManyRequests(HookError):
    """A 429: Metacontroller requeues after Retry-After without a SyncError (here: the body's ``retryAfter``)."""

    def __init__(self, after: float) -> None:
        super().__init__(f"too many requests, retry after {after}s")
        self.after = after


def hook_path(spec: dict[str, Any]) -> str:
    """``webhook.url`` wins over ``service`` + ``path``; only the path reaches the callable."""
    webhook = spec.get("webhook") or {}
    return urlparse(webhook["url"]).path if webhook.get("url") else webhook["path"]


def is_strict(spec: dict[str, Any]) -> bool:
    """``responseUnMarshallMode``, strict by default for hook version v2 only."""
    mode = (spec.get("webhook") or {}).get("responseUnMarshallMode")
    return mode == "strict" if mode else spec.get("version") == "v2"


Field = Callable[[Any], bool]


def is_object(value: Any) -> bool:
    return isinstance(value, dict)


def is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_boolean(value: Any) -> bool:
    return isinstance(value, bool)


def is_string_map(value: Any) -> bool:
    """``map[string]*string``: a null value deletes the key."""
    return isinstance(value, dict) and all(item is None or isinstance(item, str) for item in value.values())


def call(hook: Hook, spec: dict[str, Any], body: dict[str, Any], fields: dict[str, Field], counts: Counter[str],
         name: str) -> dict[str, Any]:
    """POST ``body`` (a JSON copy, as on the wire) and decode the answer like ``hooks.Call``.

    ``fields`` are the response type's JSON fields with the Go type each decodes into
    (``pkg/hooks/webhook.go``, ``kjson.Unmarshal`` or ``UnmarshalStrict``): an answer of
    ``null`` decodes as the empty response, a field of another type fails the call in
    either mode (``null`` is every field's zero value), and in strict mode (the default
    for v2, ``responseUnMarshallMode``) any other top-level field fails the call."""
    counts[name] += 1
    status, sent = hook(hook_path(spec), clone(body))
    answer = clone(sent)
    if status == 429:
        raise TooManyRequests(float((answer or {}).get("retryAfter", 0)) if isinstance(answer, dict) else 0.0)
    if status != 200:
        raise HookError(f"{name} hook: unsupported status code: {status} body: {json.dumps(answer)[:500]}")
    if answer is None:
        return {}
    if not isinstance(answer, dict):
        raise HookError(f"{name} hook: can't unmarshal webhookResponse: {json.dumps(answer)[:200]}")
    unknown = set(answer) - set(fields)
    if is_strict(spec) and unknown:
        raise HookError(f"{name} hook: strict validation failed: unknown fields {sorted(unknown)}")
    mistyped = sorted(key for key, fits in fields.items() if answer.get(key) is not None and not fits(answer[key]))
    if mistyped:
        raise HookError(f"{name} hook: can't unmarshal webhookResponse: wrong type for {mistyped}")
    return {key: value for key, value in answer.items() if key in fields}
