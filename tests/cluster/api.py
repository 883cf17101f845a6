"""A client of the real API server: one identity (a bearer token), JSON in and out, watches.

The standard library's HTTPS client is all the tier needs: the API server's own serving
certificate (self-signed in its ``--cert-dir``) is the only one trusted, and every
request is bounded in time. A refusal raises the simulator's ``ApiError`` with the API
server's code and message, so the simulated controllers handle real answers exactly as
they handle their in-memory API server's.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

from tests.metacontroller.cluster import ApiError, Resource, kind_of, resource_of
from tests.metacontroller.selection import Obj

REQUEST_TIMEOUT_SECONDS = 30.0
BUSY_SECONDS = 30.0
IDLE_SECONDS = 60.0
"""How long a kept-alive connection may rest before a request takes a new one (the API server allows 90 s)."""
WATCH_SECONDS = 240
"""Each watch request asks the server to end it after this long; the watcher then resumes."""


@dataclass(frozen=True)
class Endpoint:
    """Where the API server listens and how to trust it."""

    host: str
    port: int
    ca_file: Path

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"


def path_of(resource: Resource, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
    """The REST path of a collection or an object (``/api/v1/...`` or ``/apis/<group>/<version>/...``)."""
    prefix = f"/api/{resource.api_version}" if "/" not in resource.api_version else f"/apis/{resource.api_version}"
    scoped = f"/namespaces/{namespace}" if resource.namespaced and namespace else ""
    path = f"{prefix}{scoped}/{resource.resource}"
    if name is not None:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


class Busy(Exception):
    """A 429 and the seconds its Retry-After asks to wait."""

    def __init__(self, message: str, after: float) -> None:
        super().__init__(message)
        self.after = after


class StaleConnection(Exception):
    """A kept-alive connection the API server closed while it was idle (kube-apiserver closes
    one after 90 s): the request never reached it, and goes again on a new connection."""


class Client:
    """Requests to the API server as one identity."""

    def __init__(self, endpoint: Endpoint, token: str) -> None:
        self.endpoint = endpoint
        self.token = token
        self._context = ssl.create_default_context(cafile=str(endpoint.ca_file))
        self._local = threading.local()

    # --- plain requests -----------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
                content_type: str = "application/json") -> Any:
        """One request; the decoded JSON answer, or ``ApiError`` for a non-2xx status. A 429 (the
        API server busy, or a CRD's storage being set up again after its schema changed) is
        retried after its Retry-After, as client-go retries it, for up to ``BUSY_SECONDS``."""
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                return self._request_once(method, path, body, query, content_type)
            except StaleConnection:
                continue
            except Busy as busy:
                if time.monotonic() + busy.after > deadline:
                    raise ApiError(429, str(busy)) from None
                time.sleep(busy.after)

    def _request_once(self, method: str, path: str, body: Any, query: dict[str, str] | None, content_type: str) -> Any:
        reused = getattr(self._local, "connection", None) is not None
        connection = self._connection()
        target = path + (f"?{urlencode(query)}" if query else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = content_type
        try:
            connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            self._local.connection = None
            connection.close()
            if reused and isinstance(error, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
                raise StaleConnection() from error
            raise
        answer = json.loads(data) if data else None
        if response.status >= 300:
            message = answer.get("message", "") if isinstance(answer, dict) else data.decode(errors="replace")
            if response.status == 429:
                raise Busy(message, float(response.getheader("Retry-After") or 1))
            raise ApiError(response.status, message)
        return answer

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200: every post-start hook (bootstrap RBAC among them) has run."""
        connection = self._connection()
        try:
            connection.request("GET", "/readyz", headers={"Authorization": f"Bearer {self.token}"})
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self._local.connection = None
            connection.close()
            return False
        return response.status == 200

    def _connection(self) -> http.client.HTTPSConnection:
        """This thread's kept-alive connection; a new one after ``IDLE_SECONDS`` unused, since
        kube-apiserver closes an idle connection after 90 s and a request sent on it then fails."""
        connection = getattr(self._local, "connection", None)
        if connection is not None and time.monotonic() - self._local.used > IDLE_SECONDS:
            connection.close()
            connection = None
        if connection is None:
            connection = http.client.HTTPSConnection(self.endpoint.host, self.endpoint.port, context=self._context,
                                                     timeout=REQUEST_TIMEOUT_SECONDS)
            self._local.connection = connection
        self._local.used = time.monotonic()
        return connection

    # --- objects ----------------------------------------------------------------------------

    def get(self, api_version: str, resource: str, namespace: str | None, name: str) -> Obj:
        return self.request("GET", path_of(resource_of(api_version, resource), namespace, name))

    def find(self, api_version: str, resource: str, namespace: str | None, name: str) -> Obj | None:
        try:
            return self.get(api_version, resource, namespace, name)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    def list(self, api_version: str, resource: str, namespace: str | None = None) -> tuple[list[Obj], str]:
        """Every object of a type and the list's resourceVersion (where a watch starts)."""
        kind = resource_of(api_version, resource)
        answer = self.request("GET", path_of(kind, namespace))
        items = [{"apiVersion": api_version, "kind": kind.kind, **item} for item in answer.get("items") or []]
        return items, answer["metadata"]["resourceVersion"]

    def create(self, obj: Obj, manager: str = "") -> Obj:
        resource = kind_of(obj)
        query = {"fieldManager": manager} if manager else None
        return self.request("POST", path_of(resource, obj["metadata"].get("namespace")), obj, query)

    def update(self, obj: Obj, manager: str = "", subresource: str = "") -> Obj:
        resource = kind_of(obj)
        metadata = obj["metadata"]
        query = {"fieldManager": manager} if manager else None
        return self.request("PUT", path_of(resource, metadata.get("namespace"), metadata["name"], subresource), obj, query)

    def delete(self, api_version: str, kind_resource: str, namespace: str | None, name: str, uid: str | None = None,
               propagation: str = "Background") -> None:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        self.request("DELETE", path_of(resource_of(api_version, kind_resource), namespace, name), options)

    # --- watches ------------------------------------------------------------------------------

    def watch(self, api_version: str, resource: str, resource_version: str, stopped: Callable[[], bool],
              opened: Callable[[http.client.HTTPSConnection], None] | None = None) -> Iterator[tuple[str, Obj]]:
        """``(type, object)`` events from ``resource_version`` on, until the server ends the
        watch or ``stopped()``; an ``ERROR`` event (410 Gone: too old) ends it too. ``opened``
        is told the watch's connection, which closing ends the watch at once."""
        kind = resource_of(api_version, resource)
        query = urlencode({"watch": "1", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
                           "timeoutSeconds": str(WATCH_SECONDS)})
        connection = http.client.HTTPSConnection(self.endpoint.host, self.endpoint.port, context=self._context,
                                                 timeout=WATCH_SECONDS + REQUEST_TIMEOUT_SECONDS)
        try:
            connection.request("GET", f"{path_of(kind)}?{query}", headers={"Authorization": f"Bearer {self.token}"})
            if opened is not None:
                opened(connection)
            response = connection.getresponse()
            if response.status != 200:
                raise ApiError(response.status, response.read().decode(errors="replace"))
            while not stopped():
                line = response.readline()
                if not line:
                    return
                event = json.loads(line)
                obj = event["object"]
                if event["type"] != "ERROR":
                    obj.setdefault("apiVersion", api_version)
                    obj.setdefault("kind", kind.kind)
                yield event["type"], obj
        finally:
            connection.close()
