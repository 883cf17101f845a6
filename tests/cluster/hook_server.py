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
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process("basemodel-hook", [str(SCRIPT), "serve", "--bind", f"127.0.0.1:{self.port}"],
                               workdir / "basemodel-hook.log", dict(os.environ))
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/readyz", timeout=2).status == 200, 30,
                   "the hook's /readyz", self.process)

    def stop(self) -> None:
        self.process.stop()
