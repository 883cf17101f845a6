"""The hook as users run it: ``basemodel-hook serve`` (gunicorn, its default settings) on 127.0.0.1."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

from tests.cluster.processes import Process, free_port, wait_until

SCRIPT = Path(sys.executable).with_name("basemodel-hook")


class HookServer:
    def __init__(self, workdir: Path, release: Path | None = None, settings: dict[str, str] | None = None) -> None:
        """This checkout's ``basemodel-hook serve``; or, with ``release``, the hook of that source tree
        (an older release's, extracted): ``python -m hooks.cli serve`` run in it, so that its ``hooks``
        package is the one imported, with this virtualenv's dependencies. ``settings`` are
        environment variables the user sets for the hook."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        serve = ["serve", "--bind", f"127.0.0.1:{self.port}"]
        environment = {**os.environ, **(settings or {})}
        if release is None:
            self.process = Process("basemodel-hook", [str(SCRIPT), *serve], workdir / "basemodel-hook.log", environment)
        else:
            self.process = Process(f"basemodel-hook from {release.name}", [sys.executable, "-m", "hooks.cli", *serve],
                                   workdir / f"basemodel-hook-{release.name}.log",
                                   {**environment, "PYTHONPATH": str(release)}, cwd=release)
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/readyz", timeout=2).status == 200, 30,
                   "the hook's /readyz", self.process)

    def stop(self) -> None:
        self.process.stop()
