"""The hook as users run it: ``basemodel-hook serve`` (gunicorn) on 127.0.0.1, as many replicas
as the install's Deployment asks for, each with the Deployment's settings.

A replica can be paused (SIGSTOP: it still accepts connections, but answers nothing),
killed (SIGKILL) and started again, as the kubelet restarts a container that died. The
Service in front of the replicas is ``hook_proxy``, whose endpoints are the replicas
``serving`` names: a killed one stays in them until it is started again, as an endpoint
stays until its readiness probe fails.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import yaml

from tests.cluster.processes import Process, free_port, wait_until

SCRIPT = Path(sys.executable).with_name("basemodel-hook")
DEPLOYMENT = Path(__file__).resolve().parents[2] / "metacontroller" / "deployment.yaml"
CONTAINER_PATHS = ("PROMETHEUS_MULTIPROC_DIR",)
"""Settings naming a path of the container's own filesystem (its /tmp emptyDir), which each
replica here makes for itself instead."""
READY_SECONDS = 30.0


def deployment() -> tuple[int, dict[str, str]]:
    """The install's replicas and its container's settings (those with a literal value)."""
    manifest = yaml.safe_load(DEPLOYMENT.read_text(encoding="utf-8"))
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    settings = {item["name"]: str(item["value"]) for item in container.get("env") or []
                if "value" in item and item["name"] not in CONTAINER_PATHS}
    return int(manifest["spec"]["replicas"]), settings


class HookServer:
    """One replica, on a port of its own: this checkout's ``basemodel-hook serve``; or, with
    ``release``, the hook of that source tree (an older release's, extracted): ``python -m
    hooks.cli serve`` run in it, so that its ``hooks`` package is the one imported, with this
    virtualenv's dependencies."""

    def __init__(self, workdir: Path, index: int, settings: dict[str, str], release: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        serve = ["serve", "--bind", f"127.0.0.1:{self.port}"]
        environment = {**os.environ, **settings}
        if release is None:
            self.process = Process(f"basemodel-hook-{index}", [str(SCRIPT), *serve], workdir / f"basemodel-hook-{index}.log",
                                   environment)
        else:
            self.process = Process(f"basemodel-hook-{index} from {release.name}", [sys.executable, "-m", "hooks.cli", *serve],
                                   workdir / f"basemodel-hook-{index}-{release.name}.log",
                                   {**environment, "PYTHONPATH": str(release)}, cwd=release)
        self.wait_ready()

    def wait_ready(self) -> None:
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/readyz", timeout=2).status == 200, READY_SECONDS,
                   f"{self.process.name}'s /readyz", self.process)

    def start(self) -> None:
        """Started again, once ready."""
        self.process.start()
        self.wait_ready()

    def stop(self) -> None:
        self.process.stop()


class HookDeployment:
    """The replicas, and which of them the Service sends calls to."""

    def __init__(self, workdir: Path, release: Path | None = None, settings: dict[str, str] | None = None) -> None:
        """The install's replicas with its settings, and the user's ``settings`` over them."""
        replicas, defaults = deployment()
        self.replicas = [HookServer(workdir, index, {**defaults, **(settings or {})}, release) for index in range(replicas)]

    def serving(self) -> list[str]:
        """The Service's endpoints, in the replicas' order: every replica, as a Service without
        a readiness gate keeps a pod that died until its endpoints are updated."""
        return [replica.url for replica in self.replicas]

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()
