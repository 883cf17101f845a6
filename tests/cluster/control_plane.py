"""A Kubernetes control plane of real processes on 127.0.0.1: etcd, kube-apiserver and
kube-controller-manager, built by ``builds``.

The API server authorizes with Node and RBAC, runs the default admission plugins (so the
status fence is a real ValidatingAdmissionPolicy with real CEL), writes an audit log of
every write, and knows each actor by a static token (``IDENTITIES``): a cluster admin,
Metacontroller's ServiceAccount as the fence names it, OME's manager, the controller
manager, the scheduler's and one node's kubelet. One RSA key signs ServiceAccount tokens,
so the TokenRequest API works. The controller manager runs only the controllers the
tier's stories need, each under its own ServiceAccount as kubeadm runs them.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import builds
from tests.cluster.api import Client, Endpoint
from tests.cluster.processes import Process, free_port, listening, wait_until
from tests.metacontroller import identities

START_SECONDS = 90.0
CONTROLLERS = (
    "job-controller", "ttl-after-finished-controller", "garbage-collector-controller", "namespace-controller",
    "serviceaccount-controller", "serviceaccount-token-controller", "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
    "validatingadmissionpolicy-status-controller",
)
"""kube-controller-manager's ``--controllers``: Jobs and their TTL, the garbage collector, namespaces and
ServiceAccounts with their tokens, the volume binder with the protection finalizers (so a PVC is bound,
lost and deleted as in a cluster), and the controller that type-checks a ValidatingAdmissionPolicy's
CEL against the CRDs and reports warnings on the policy's status."""
NODE = "node-a"


@dataclass(frozen=True)
class Identity:
    """A static-token user of the API server: ``user`` is what RBAC and admission see."""

    key: str
    user: str
    groups: tuple[str, ...] = ()


def _service_account_groups(namespace: str) -> tuple[str, ...]:
    """The groups a ServiceAccount's token carries (``serviceaccount.MakeGroupNames``)."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


ADMIN = Identity("admin", identities.KUBECTL, ("system:masters",))
METACONTROLLER = Identity("metacontroller", identities.METACONTROLLER, _service_account_groups("metacontroller"))
OME_MANAGER = Identity("ome-manager", identities.OME_MANAGER, _service_account_groups("ome"))
CONTROLLER_MANAGER = Identity("kube-controller-manager", "system:kube-controller-manager")
SCHEDULER = Identity("kube-scheduler", "system:kube-scheduler")
KUBELET = Identity("kubelet", identities.kubelet(NODE), ("system:nodes",))
IDENTITIES = (ADMIN, METACONTROLLER, OME_MANAGER, CONTROLLER_MANAGER, SCHEDULER, KUBELET)

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # Reads, and the leases every component renews, say nothing about a model's life.
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
        # Metacontroller's writes of a model carry the labels and annotations the label keeper
        # wrote, which ``audit.hook_metadata_written`` reads (the body, not the answer).
        {"level": "Request", "users": [identities.METACONTROLLER], "verbs": ["update", "patch"],
         "resources": [{"group": "ome.io", "resources": ["basemodels", "clusterbasemodels"]}]},
        {"level": "Metadata"},
    ],
}


class ControlPlane:
    """Started by ``start``, stopped (every process, in reverse order) by ``stop``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.tokens = {identity.key: secrets.token_hex(16) for identity in IDENTITIES}
        self.processes: list[Process] = []
        self.audit_log = workdir / "audit.log"
        self.endpoint: Endpoint | None = None
        self.started_seconds = 0.0

    # --- start and stop ----------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        self._write_credentials()
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        etcd = self._run("etcd", [
            str(builds.ETCD.binary("etcd")), "--data-dir", str(self.workdir / "etcd"), "--name", "tier",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}", "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"tier=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync", "--log-level", "warn",
        ])
        wait_until(lambda: listening(etcd_port), 30, "etcd", etcd)
        certificates = self.workdir / "certificates"
        api = self._run("kube-apiserver", [
            str(builds.KUBERNETES.binary("kube-apiserver")),
            "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(api_port),
            "--cert-dir", str(certificates), "--external-hostname", "localhost",
            "--endpoint-reconciler-type", "none", "--service-cluster-ip-range", "10.96.0.0/24",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(self.workdir / "service-accounts.key"),
            "--service-account-signing-key-file", str(self.workdir / "service-accounts.key"),
            "--token-auth-file", str(self.workdir / "tokens.csv"),
            "--authorization-mode", "Node,RBAC",
            "--audit-policy-file", str(self.workdir / "audit-policy.yaml"), "--audit-log-path", str(self.audit_log),
            "--audit-log-format", "json", "--audit-log-maxbackup", "0",
            "--profiling=false", "--v", "1",
        ])
        self.endpoint = Endpoint("127.0.0.1", api_port, certificates / "apiserver.crt")
        wait_until(lambda: (certificates / "apiserver.crt").is_file(), 60, "the API server's certificate", api)
        admin = self.client(ADMIN)
        wait_until(admin.ready, START_SECONDS, "the API server's /readyz", api, interval=0.25)
        self._run("kube-controller-manager", [
            str(builds.KUBERNETES.binary("kube-controller-manager")),
            "--kubeconfig", str(self.kubeconfig(CONTROLLER_MANAGER)),
            "--controllers", ",".join(CONTROLLERS), "--use-service-account-credentials",
            "--service-account-private-key-file", str(self.workdir / "service-accounts.key"),
            "--root-ca-file", str(self.endpoint.ca_file), "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", "0", "--v", "1",
        ])
        self.started_seconds = time.monotonic() - started

    def _run(self, name: str, command: list[str], environment: dict[str, str] | None = None) -> Process:
        process = Process(name, command, self.workdir / f"{name}.log", environment)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def check_running(self) -> None:
        """Every process still runs; otherwise which one stopped, and its last words."""
        for process in self.processes:
            if not process.running:
                raise RuntimeError(f"{process.name} exited with {process.popen.returncode}:\n{process.tail()}")

    # --- credentials ----------------------------------------------------------------------

    def _write_credentials(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "genrsa", "-out", str(self.workdir / "service-accounts.key"), "2048"],
                       check=True, capture_output=True, timeout=60)
        lines = [f'{self.tokens[item.key]},{item.user},{item.key},"{",".join(item.groups)}"' for item in IDENTITIES]
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY), encoding="utf-8")

    def client(self, identity: Identity) -> Client:
        assert self.endpoint is not None, "start the control plane first"
        return Client(self.endpoint, self.tokens[identity.key])

    def kubeconfig(self, identity: Identity, token: str | None = None, name: str | None = None) -> Path:
        """A kubeconfig file for ``identity`` (or for any ``token``, as ``name``), readable by
        every user: the agent runs as the Job's non-root user."""
        assert self.endpoint is not None, "start the control plane first"
        config: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Config", "current-context": "tier",
            "clusters": [{"name": "tier", "cluster": {"server": self.endpoint.url,
                                                        "certificate-authority": str(self.endpoint.ca_file)}}],
            "users": [{"name": "tier", "user": {"token": token or self.tokens[identity.key]}}],
            "contexts": [{"name": "tier", "context": {"cluster": "tier", "user": "tier"}}],
        }
        path = self.workdir / "kubeconfigs" / f"{name or identity.key}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        path.chmod(0o644)
        return path

    def kubectl(self, *arguments: str, identity: Identity = ADMIN, stdin: str | None = None, check: bool = True,
                timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """``kubectl`` of the same release as the API server, as ``identity``; with ``check``, a
        failure raises ``KubectlError`` with what kubectl said."""
        result = subprocess.run([str(builds.KUBERNETES.binary("kubectl")), "--kubeconfig", str(self.kubeconfig(identity)),
                                 *arguments], input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(arguments)} failed ({result.returncode}): {result.stderr.strip()}")
        return result


class KubectlError(RuntimeError):
    """A kubectl command that failed, with its error output."""
