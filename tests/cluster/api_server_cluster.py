"""The simulator's API server (``tests.metacontroller.cluster.Cluster``) replaced by the real one.

The simulated Metacontroller talks to this object exactly as it talks to its in-memory
``Cluster`` (``get``, ``find``, ``list``, ``create``, ``update``, ``update_status``,
``delete``, ``watchers``, ``clock``), and each call goes to the real API server as
Metacontroller's ServiceAccount: real resourceVersions, conflicts, validation, RBAC and
admission answers, the fence's among them.

Reads are Metacontroller's informers' (listers'): ``find`` and ``list`` answer from the
watch caches, one per type, so a write that just happened elsewhere may not be in them yet
(the label race happens through exactly that). ``get`` is the live read Metacontroller makes
in ``AtomicUpdate`` and ``AtomicStatusUpdate`` before a finalizer or status write, and
``update_status`` reads the parent live once more before it writes. Watch events are
gathered by a thread per type and handed to ``watchers`` one at a time by ``dispatch``,
on the caller's thread, so the simulated controllers stay single-threaded. A watch that
breaks (the API server restarted) is resumed from the last resourceVersion it saw, and
listed again when the API server answers that this is too old (410), as client-go's
reflector does. A request the API server does not answer (it is down, or its storage is)
is a failed request, as client-go reports one: ``ApiError`` with code 503, which fails the
sync and requeues it with backoff.

``kill`` is the process's death: every later contact with the API server raises
``Killed``, which no handler of the controllers catches, and the watches are cut.
"""

from __future__ import annotations

import http.client
import queue
import socket
import threading
from datetime import datetime, timezone
from typing import Any, Callable

from tests.cluster.api import Client
from tests.metacontroller.cluster import BY_KIND, ApiError, Clock, Resource, Watcher, ref
from tests.metacontroller.selection import Obj, clone, controller_of

Key = tuple[str, str, str | None, str]
RETRY_SECONDS = 1.0
UNREACHABLE = 503
GONE = 410


class Killed(BaseException):
    """Metacontroller's process is gone: raised at its next contact with the world, past every
    handler of its controllers (which catch ``Exception``s)."""


def reaching(call: Callable[[], Any]) -> Any:
    """``call()``, with a request the API server never answered reported as client-go reports it."""
    try:
        return call()
    except (OSError, http.client.HTTPException) as error:
        raise ApiError(UNREACHABLE, f"the API server did not answer: {type(error).__name__}: {error}") from error


class WallClock(Clock):
    """The real time: nothing moves it but the world."""

    def __init__(self) -> None:  # noqa: D107 - no start: it is now
        pass

    @property  # type: ignore[override]
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def advance(self, seconds: float) -> None:
        raise TypeError("the wall clock is not moved by the tests")


class ApiServerCluster:
    """``Cluster``'s interface on the real API server, as ``user`` (who must hold ``client``'s token)."""

    def __init__(self, client: Client, user: str, types: list[Resource]) -> None:
        self.client = client
        self.user = user
        self.clock = WallClock()
        self.types = types
        self.watchers: list[Watcher] = []
        self.objects: dict[Key, Obj] = {}
        self._events: queue.Queue[tuple[str, Obj]] = queue.Queue()
        self._stopped = threading.Event()
        self.killed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: dict[str, http.client.HTTPSConnection] = {}
        """Each type's open watch, for a kill to cut."""
        self._dispatched = 0

    # --- the watch caches ------------------------------------------------------------------

    def start(self) -> None:
        """List every type (the caches are full before anyone reads them), then watch each."""
        for resource in self.types:
            items, version = self.client.list(resource.api_version, resource.resource)
            for item in items:
                self.objects[ref(item)] = item
            thread = threading.Thread(target=self._watch, args=(resource, version), daemon=True,
                                      name=f"watch {resource.resource}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopped.set()

    def kill(self) -> None:
        """From now on nothing reaches the API server, and the open watches are cut."""
        self.killed.set()
        self._stopped.set()
        for connection in list(self._watches.values()):
            if connection.sock is not None:
                try:
                    connection.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def check_alive(self) -> None:
        if self.killed.is_set():
            raise Killed()

    def _watch(self, resource: Resource, version: str) -> None:
        """One type's events into the queue; resumes after the server ends a watch or the
        connection breaks, lists again after a 410."""
        while not self._stopped.is_set():
            try:
                opened = lambda connection: self._watches.__setitem__(resource.resource, connection)  # noqa: E731
                for kind, obj in self.client.watch(resource.api_version, resource.resource, version, self._stopped.is_set,
                                                   opened):
                    if kind == "ERROR":
                        version = self._relist(resource)
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if kind != "BOOKMARK":
                        self._events.put((kind, obj))
            except ApiError as error:
                if error.code == GONE and not self._stopped.is_set():
                    version = self._relisted(resource, version)
                elif self._stopped.wait(RETRY_SECONDS):
                    return
            except (OSError, ValueError, http.client.HTTPException):
                if self._stopped.wait(RETRY_SECONDS):
                    return

    def _relisted(self, resource: Resource, version: str) -> str:
        """The new version after listing again, or ``version`` when the list failed too (tried again later)."""
        try:
            return self._relist(resource)
        except (OSError, ApiError, ValueError, http.client.HTTPException):
            self._stopped.wait(RETRY_SECONDS)
            return version

    def _relist(self, resource: Resource) -> str:
        """A watch too old to resume: the list replaces the cache's view of the type, as events."""
        items, version = self.client.list(resource.api_version, resource.resource)
        for item in items:
            self._events.put(("MODIFIED", item))
        listed = {ref(item) for item in items}
        for key, obj in list(self.objects.items()):
            if (key[0], key[1]) == (resource.api_version, resource.kind) and key not in listed:
                self._events.put(("DELETED", obj))
        return version

    def dispatch(self, timeout: float) -> bool:
        """Apply one watch event to the cache and tell the watchers; False when none came in ``timeout``."""
        self.check_alive()
        try:
            kind, obj = self._events.get(timeout=timeout)
        except queue.Empty:
            return False
        self._dispatched += 1
        key = ref(obj)
        old = self.objects.get(key)
        if kind == "DELETED":
            self.objects.pop(key, None)
            new = None
        else:
            if old is not None and int(old["metadata"]["resourceVersion"]) >= int(obj["metadata"]["resourceVersion"]):
                return True
            self.objects[key] = new = obj
        event = "MODIFIED" if kind == "MODIFIED" and old is not None else "ADDED" if new is not None else "DELETED"
        for watcher in list(self.watchers):
            watcher(event, clone(old), clone(new))
        return True

    # --- reading ---------------------------------------------------------------------------------

    @property
    def sequence(self) -> int:
        """How many watch events the caches have taken: informers here never lag on purpose."""
        return self._dispatched

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj:
        """A live read (``AtomicUpdate``'s), as the object's own kind."""
        self.check_alive()
        live = reaching(lambda: self.client.get(api_version, _resource(api_version, kind).resource, namespace, name))
        return {"apiVersion": api_version, "kind": kind, **live}

    def find(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """From the watch cache, as Metacontroller's listers read a parent, a child or a related object."""
        stored = self.objects.get((api_version, kind, namespace or None, name))
        return clone(stored) if stored is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None, controller_uid: str | None = None) -> list[Obj]:
        """From the watch cache, sorted as the in-memory cluster sorts."""
        matching = [
            (key, obj) for key, obj in self.objects.items()
            if key[0] == api_version and key[1] == kind and (namespace is None or key[2] == namespace)
            and (controller_uid is None or (controller_of(obj) or {}).get("uid") == controller_uid)
        ]
        return [clone(obj) for _, obj in sorted(matching, key=lambda item: str(item[0]))]

    # --- writing -----------------------------------------------------------------------------------

    def create(self, obj: Obj, manager: str = "", user: str = "") -> Obj:
        self._check_user(user)
        return reaching(lambda: self.client.create(obj, manager))

    def update(self, obj: Obj, manager: str = "", user: str = "") -> Obj:
        self._check_user(user)
        return reaching(lambda: self.client.update(obj, manager))

    def update_status(self, obj: Obj, manager: str = "", user: str = "") -> Obj:
        """``updateParentStatus``'s fresh read and write: the parent is read live, nothing is
        written when its status already is the one wanted, else the status goes with the live
        resourceVersion."""
        self._check_user(user)
        metadata = obj["metadata"]
        live = reaching(lambda: self.client.get(obj["apiVersion"], _resource(obj["apiVersion"], obj["kind"]).resource,
                                                metadata.get("namespace"), metadata["name"]))
        if live["metadata"]["uid"] != metadata["uid"]:
            raise ApiError(404, f"{obj['kind']} {metadata['name']} is another object now")
        if live.get("status") == obj.get("status"):
            return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **live}
        live["status"] = obj.get("status")
        self.check_alive()
        return reaching(lambda: self.client.update(live, manager, subresource="status"))

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str, uid: str | None = None,
               user: str = "") -> None:
        self._check_user(user)
        reaching(lambda: self.client.delete(api_version, _resource(api_version, kind).resource, namespace, name, uid))

    def _check_user(self, user: str) -> None:
        """Every write is made with this client's token: a caller writing as someone else is a
        test's mistake; a killed process writes nothing."""
        self.check_alive()
        if user and user != self.user:
            raise AssertionError(f"this cluster writes as {self.user}, not {user}")


def _resource(api_version: str, kind: str) -> Resource:
    try:
        return BY_KIND[(api_version, kind)]
    except KeyError:
        raise ApiError(404, f"no kind {kind!r} is registered for version {api_version!r}") from None

