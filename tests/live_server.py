"""A real ``basemodel-hook serve`` on 127.0.0.1 for the tests that need one, bounded in time."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

START_SECONDS = 20.0
STOP_SECONDS = 15.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(
    argv: list[str], port: int, log: Path, tls: ssl.SSLContext | None = None, **popen: Any
) -> Iterator[subprocess.Popen[bytes]]:
    """Start the server, wait until /readyz answers (over HTTPS with ``tls``), and stop it afterwards.

    Its output goes to ``log``: a pipe nobody reads would fill up and stall the server."""
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=sink, **popen)
    try:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"{'https' if tls else 'http'}://127.0.0.1:{port}/readyz", timeout=1, context=tls) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"the server did not become ready (exit code {process.poll()}):\n{log.read_text(errors='replace')[-3000:]}")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_SECONDS)
