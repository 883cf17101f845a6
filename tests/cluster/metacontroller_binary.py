"""A real Metacontroller binary in place of the simulated one, when ``METACONTROLLER_BIN`` names it.

It runs as Metacontroller's ServiceAccount (the token the fence admits, and the RBAC the
install gives it plus what Metacontroller's own install grants it for its own objects),
with the stored controllers as ``kubectl apply -k`` left them, a short discovery interval
(the CRDs were just created) and no listeners. Waiting is plain polling: the binary works
on its own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from tests.cluster.control_plane import METACONTROLLER, ControlPlane
from tests.cluster.processes import Process

VARIABLE = "METACONTROLLER_BIN"
POLL_SECONDS = 0.2
OWN_RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "metacontroller-own"},
     "rules": [{"apiGroups": ["metacontroller.k8s.io"], "resources": ["controllerrevisions"], "verbs": ["*"]},
               {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]},
               {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
               {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "metacontroller-own"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metacontroller-own"},
     "subjects": [{"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}]},
]
"""What Metacontroller's own install grants it beyond the hook's ClusterRole, for its own objects only
(its stock install grants everything, which would leave nothing for the hook's RBAC to prove)."""


def binary() -> Path | None:
    value = os.environ.get(VARIABLE)
    return Path(value) if value else None


class MetacontrollerBinary:
    def __init__(self, plane: ControlPlane, path: Path, arguments: tuple[str, ...] = ()) -> None:
        self.plane = plane
        self.path = path
        self.arguments = arguments
        self.process: Process | None = None

    def start(self) -> None:
        environment = {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig(METACONTROLLER))}
        self.process = Process("metacontroller", [str(self.path), "--discovery-interval=2s", "--metrics-address=0",
                                                  "--health-probe-bind-address=0", "--zap-log-level=4", *self.arguments],
                               self.plane.workdir / "metacontroller.log", environment)
        self.plane.processes.append(self.process)

    @property
    def errors(self) -> list[str]:
        """The error lines of its log (a failed sync, a refused write), as the simulator lists its failed syncs."""
        if self.process is None or not self.process.log.exists():
            return []
        return [line for line in self.process.log.read_text(encoding="utf-8", errors="replace").splitlines()
                if '"level":"error"' in line]

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def wait_until(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            assert self.process is not None and self.process.running, f"metacontroller exited:\n{self.process and self.process.tail()}"
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {seconds:.0f} s; metacontroller's log:\n{self.process.tail()}")
            time.sleep(POLL_SECONDS)

    def run_for(self, seconds: float) -> None:
        time.sleep(seconds)
