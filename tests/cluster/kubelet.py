"""The scheduler and one node's kubelet, played for the metadata Jobs' pods.

There is no container runtime here, so the kubelet's part is played as far as the hook can
observe it, with the real agent binary and the real credentials:

- the scheduler binds every unscheduled pod to the one node (``pods/binding``, as
  ``system:kube-scheduler``), but one whose claim is missing or being deleted, which
  kube-scheduler's volume binding leaves unschedulable;
- the kubelet (``system:node:<node>``, authorized by the Node authorizer as a real one is)
  finds the pod's PersistentVolumeClaim, its bound PersistentVolume and that volume's
  host path; a pod whose claim is not bound waits, as ContainerCreating does, and so does
  one that mounts a ``volumeMode: Block`` claim as files (the kubelet's mount fails);
- it reports the container running, asks the TokenRequest API for a token of the pod's
  ServiceAccount bound to the pod, and runs the container's command (the agent image's
  entrypoint is the agent of that image's release) with the container's own arguments and environment, as the
  pod's ``runAsUser``/``runAsGroup``, with ``KUBECONFIG`` naming that token, so the Job's
  Role is what grants or refuses the agent's requests. Container paths are the one thing
  translated: the volume's mount path (with its ``subPath``) to the volume's host
  directory, and a file of the image (``/ome-agent.yaml``) to the same path under
  ``image_root``;
- it keeps the container's log, both streams in the order written, as the container runtime
  does (``pods/<namespace>_<pod>.log`` in the tier's folder), and writes the outcome as the
  kubelet does: phase, the container's exit code and reason,
  and for ``FallbackToLogsOnError`` a failed container's last log lines as its
  termination message (the last 80 lines, at most 2048 bytes); the real Job controller
  takes it from there;
- an API server that does not answer (it restarts, or its etcd is down) is waited out, as a
  kubelet waits it out: a pod not started yet is tried again at the next pass, and a
  finished pod's outcome is written again until it is taken (for ``STATUS_SECONDS``);
- a story may hold the containers of some namespaces running (``holding``): their pods are
  reported Running, and their agent starts only once the story releases them, so that a
  fault can strike while a Job runs.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from tests.cluster.api import Client
from tests.cluster.control_plane import KUBELET, NODE, SCHEDULER, ControlPlane
from tests.cluster.ome_manager import HF_CLIENT_OFF
from tests.metacontroller.cluster import ApiError
from tests.metacontroller.selection import Obj

POLL_SECONDS = 0.25
AGENT_TIMEOUT_SECONDS = 60.0
POD_WORKERS = 8
"""Pods started at once, as a kubelet's pod workers run every pod of its node side by side."""
MESSAGE_LINES = 80
MESSAGE_BYTES = 2048
"""``kubelet``'s limits on a termination message taken from the logs."""
STATUS_SECONDS = 120.0
"""How long a finished pod's outcome is written again while the API server does not take it."""
HOLD_SECONDS = 180.0
"""The longest a story may hold a container running: one not released by then fails it."""


@dataclass(frozen=True)
class Run:
    """One container the kubelet ran: which pod, as whom, and what came of it."""

    namespace: str
    pod: str
    arguments: tuple[str, ...]
    user: int
    exit_code: int
    output: str


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def termination_message(output: str) -> str:
    """The kubelet's ``FallbackToLogsOnError`` message: the log's tail, by lines then by bytes."""
    tail = "\n".join(output.splitlines()[-MESSAGE_LINES:]) + "\n"
    encoded = tail.encode()
    return encoded[-MESSAGE_BYTES:].decode(errors="replace")


def _not_related_yet(error: ApiError) -> bool:
    """The Node authorizer's refusal while its graph has not yet taken in the pod's binding
    (or its claim, made again): it follows the API server's own informers, so a kubelet
    that read the pod first meets it for a moment, and mounts again at its next pass, as a
    real kubelet retries a volume it could not set up."""
    return error.code == 403 and "no relationship found between node" in str(error)


def transient(error: Exception, authorizer_ready: bool = True) -> bool:
    """A request the API server did not answer, or answered that it cannot now (busy, its
    storage unreachable, or, unless ``authorizer_ready``, refused by an RBAC authorizer that
    has not listed the roles again since the API server restarted): tried again later, as a
    kubelet retries."""
    if isinstance(error, ApiError):
        return error.code == 429 or error.code >= 500 or (error.code == 403 and not authorizer_ready)
    return isinstance(error, (OSError, http.client.HTTPException))


@dataclass
class PodHold:
    """Containers of pods in ``namespaces`` held running until ``release``."""

    namespaces: frozenset[str]
    seconds: float = HOLD_SECONDS
    released: threading.Event = field(default_factory=threading.Event)
    held: list[str] = field(default_factory=list)
    """``namespace/pod`` of each pod held so far."""

    def release(self) -> None:
        self.released.set()


def _pods(client: Client, field_selector: str) -> list[Obj]:
    items: list[Obj] = client.request("GET", "/api/v1/pods", query={"fieldSelector": field_selector})["items"]
    return items


class Kubelet:
    """Serves every pod of the cluster on ``NODE`` from a thread of its own, until ``stop``."""

    def __init__(self, plane: ControlPlane, image_root: Path, agent: Path) -> None:
        self.plane = plane
        self.image_root = image_root
        self.agent = agent
        self.agents: dict[str, Path] = {}
        """Images whose entrypoint is another release's agent than ``agent``, by image reference."""
        self.paused = threading.Event()
        self.scheduler: Client = plane.client(SCHEDULER)
        self.node: Client = plane.client(KUBELET)
        self.runs: list[Run] = []
        self.logs = plane.workdir / "pods"
        self.logs.mkdir(exist_ok=True)
        self.errors: list[str] = []
        self.holds: list[PodHold] = []
        self._claimed: set[str] = set()
        """Pods a worker took: being started, run, or already reported."""
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kubelet", daemon=True)
        self._workers = ThreadPoolExecutor(POD_WORKERS, thread_name_prefix="kubelet-pod")

    def start(self) -> None:
        self.node.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                    "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        for hold in self.holds:
            hold.release()
        self._thread.join(timeout=AGENT_TIMEOUT_SECONDS + 5)
        self._workers.shutdown(wait=True, cancel_futures=True)

    @contextmanager
    def holding(self, *namespaces: str, seconds: float = HOLD_SECONDS) -> Iterator[PodHold]:
        """Within the block, the containers of pods in ``namespaces`` run only once released;
        all are released when it ends. One held longer than ``seconds`` fails the story."""
        hold = PodHold(frozenset(namespaces), seconds)
        self.holds.append(hold)
        try:
            yield hold
        finally:
            hold.release()
            self.holds.remove(hold)

    def pause(self) -> None:
        """Start no new pod until ``resume``: a Job stays active with its pod Pending."""
        self.paused.set()

    def resume(self) -> None:
        self.paused.clear()

    def _serve(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            if self.paused.is_set():
                continue
            try:
                self._schedule()
                for pod in _pods(self.node, f"spec.nodeName={NODE}"):
                    uid = pod["metadata"]["uid"]
                    if uid not in self._claimed and pod.get("status", {}).get("phase", "Pending") == "Pending" \
                            and not pod["metadata"].get("deletionTimestamp"):
                        self._claimed.add(uid)
                        self._workers.submit(self._work, pod)
            except (OSError, ApiError, http.client.HTTPException) as error:
                if not transient(error, self.plane.authorizer_ready):
                    self.errors.append(f"{type(error).__name__}: {error}")

    def _work(self, pod: Obj) -> None:
        """One pod on a worker; one that cannot start yet goes back to the next pass."""
        try:
            if not self._run(pod):
                self._claimed.discard(pod["metadata"]["uid"])
        except (OSError, ApiError, http.client.HTTPException) as error:
            if not transient(error, self.plane.authorizer_ready):
                self.errors.append(f"{type(error).__name__}: {error}")
                return
            self._claimed.discard(pod["metadata"]["uid"])

    def _schedule(self) -> None:
        for pod in _pods(self.scheduler, "spec.nodeName="):
            metadata = pod["metadata"]
            claims = self._claims(self.scheduler, metadata["namespace"], pod["spec"])
            if any(pvc is None or pvc["metadata"].get("deletionTimestamp") for _, pvc in claims):
                continue
            self.scheduler.request("POST", f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/binding",
                                   {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": metadata["name"]},
                                    "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})

    # --- one pod -----------------------------------------------------------------------------

    def _run(self, pod: Obj) -> bool:
        """The pod run to its end; False while its volume or token cannot be had yet. Until its
        agent starts, a request the API server does not answer leaves the pod to the next pass."""
        metadata, spec = pod["metadata"], pod["spec"]
        try:
            volumes = self._volumes(metadata["namespace"], spec)
            token = None if volumes is None else self._token(pod)
        except ApiError as error:
            if not _not_related_yet(error):
                raise
            return False
        if volumes is None or token is None:
            return False
        container = spec["containers"][0]
        started = _now()
        self._status(pod, "Running", {"running": {"startedAt": started}}, started, ready=True)
        self._held(pod)
        kubeconfig = self.plane.kubeconfig(KUBELET, token=token, name=f"pod-{metadata['uid']}")
        mounts = {mount["mountPath"]: volumes[mount["name"]] / mount.get("subPath", "")
                  for mount in container.get("volumeMounts") or [] if mount["name"] in volumes}
        arguments = [self._host_path(argument, mounts) for argument in container.get("args") or []]
        entrypoint = self.agents.get(container["image"], self.agent)
        command = [str(entrypoint)] if not container.get("command") else [self._host_path(item, mounts) for item in container["command"]]
        security = {**(spec.get("securityContext") or {}), **(container.get("securityContext") or {})}
        user, group = int(security.get("runAsUser", 0)), int(security.get("runAsGroup", 0))
        # A container runtime sets HOME when the container does not: "/" for a user the image's
        # /etc/passwd does not name (controller-runtime's client config asks the user database
        # for a home when HOME is unset, and fails for such a user).
        environment = {"HOME": "/", **{item["name"]: item["value"] for item in container.get("env") or [] if "value" in item},
                       **HF_CLIENT_OFF, "KUBECONFIG": str(kubeconfig), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        try:
            done = subprocess.run([*command, *arguments], env=environment, user=user, group=group, extra_groups=[],
                                  cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=AGENT_TIMEOUT_SECONDS)
            exit_code, output = done.returncode, done.stdout
        except subprocess.TimeoutExpired as timeout:
            exit_code, output = 137, str(timeout.stdout or "")
        (self.logs / f"{metadata['namespace']}_{metadata['name']}.log").write_text(output, encoding="utf-8")
        self.runs.append(Run(metadata["namespace"], metadata["name"], tuple(container.get("args") or []), user, exit_code, output))
        terminated: dict[str, Any] = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                      "startedAt": started, "finishedAt": _now()}
        if exit_code != 0 and container.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            terminated["message"] = termination_message(output)
        self._outcome(pod, "Succeeded" if exit_code == 0 else "Failed", {"terminated": terminated}, started)
        return True

    def _held(self, pod: Obj) -> None:
        """While a story holds the pod's namespace, its container runs without its agent starting."""
        namespace = pod["metadata"]["namespace"]
        for hold in [hold for hold in self.holds if namespace in hold.namespaces]:
            hold.held.append(f"{namespace}/{pod['metadata']['name']}")
            if not hold.released.wait(hold.seconds):
                self.errors.append(f"pod {namespace}/{pod['metadata']['name']} was held running for more than "
                                   f"{hold.seconds:g} s: its story never released it")

    def _outcome(self, pod: Obj, phase: str, state: dict[str, Any], started: str) -> None:
        """A finished pod's outcome, written again while the API server does not take it."""
        deadline = time.monotonic() + STATUS_SECONDS
        while True:
            try:
                self._status(pod, phase, state, started, ready=False)
                return
            except (OSError, ApiError, http.client.HTTPException) as error:
                if not transient(error, self.plane.authorizer_ready) or time.monotonic() > deadline:
                    raise
            time.sleep(POLL_SECONDS * 4)

    def _token(self, pod: Obj) -> str:
        """A token of the pod's ServiceAccount bound to the pod, as the kubelet asks for one."""
        metadata, spec = pod["metadata"], pod["spec"]
        return str(self.node.request(
            "POST", f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{spec.get('serviceAccountName', 'default')}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 3600, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                                    "name": metadata["name"], "uid": metadata["uid"]}}},
        )["status"]["token"])

    @staticmethod
    def _claims(reader: Client, namespace: str, spec: Obj) -> list[tuple[str, Obj | None]]:
        """Each PVC volume of the pod by name, with its PersistentVolumeClaim (None when there is
        none), read as ``reader``: the scheduler, or the node, which the Node authorizer lets
        read only its own pods' claims."""
        claims: list[tuple[str, Obj | None]] = []
        for volume in spec.get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim is None:
                continue
            try:
                claims.append((volume["name"], reader.request("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")))
            except ApiError as error:
                if error.code != 404:
                    raise
                claims.append((volume["name"], None))
        return claims

    def _volumes(self, namespace: str, spec: Obj) -> dict[str, Path] | None:
        """Each PVC volume's host directory, or None while a claim is missing, not bound to a
        host-path volume, or a block device the pod would mount as files."""
        found: dict[str, Path] = {}
        for volume, pvc in self._claims(self.node, namespace, spec):
            if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound" or pvc["spec"].get("volumeMode") == "Block":
                return None
            pv = self.node.request("GET", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
            found[volume] = Path(pv["spec"]["hostPath"]["path"])
        return found

    def _host_path(self, argument: str, mounts: dict[str, Path]) -> str:
        """A container path as the host sees it: under a volume's mount, or a file of the image."""
        for mount_path, host in sorted(mounts.items(), key=lambda item: -len(item[0])):
            if argument == mount_path or argument.startswith(mount_path.rstrip("/") + "/"):
                return str(host / argument[len(mount_path):].lstrip("/"))
        if argument.startswith("/") and (self.image_root / argument.lstrip("/")).exists():
            return str(self.image_root / argument.lstrip("/"))
        return argument

    def _status(self, pod: Obj, phase: str, state: dict[str, Any], started: str, ready: bool) -> None:
        container = pod["spec"]["containers"][0]
        status = {"phase": phase, "startTime": started, "hostIP": "127.0.0.1", "containerStatuses": [{
            "name": container["name"], "image": container["image"], "imageID": "", "ready": ready, "restartCount": 0,
            "started": "running" in state, "state": state}]}
        metadata = pod["metadata"]
        self.node.request("PATCH", f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/status",
                          {"status": status}, content_type="application/merge-patch+json")
