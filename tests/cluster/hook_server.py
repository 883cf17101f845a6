"""The hook as users run it: ``basemodel-hook serve`` (gunicorn, its default settings) on 127.0.0.1."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

from tests.cluster.processes import Process, free_port, wait_until

SCRIPT = Path(sys.executable).with_name("basemodel-hook")


class HookServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = self._serve({})

    def _serve(self, settings: dict[str, str]) -> Process:
        """``basemodel-hook serve`` on the server's port, configured by ``settings`` (environment
        variables) beside the defaults, once ready."""
        process = Process("basemodel-hook", [str(SCRIPT), "serve", "--bind", f"127.0.0.1:{self.port}"],
                          self.workdir / "basemodel-hook.log", {**os.environ, **settings})
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/readyz", timeout=2).status == 200, 30,
                   "the hook's /readyz", process)
        return process

    def restart(self, settings: dict[str, str] | None = None) -> None:
        """Stopped and served again on the same port, as a rollout replaces the hook's pods,
        configured by ``settings``."""
        self.process.stop()
        self.process = self._serve(settings or {})

    def stop(self) -> None:
        self.process.stop()
