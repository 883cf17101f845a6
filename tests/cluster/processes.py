"""The tier's child processes: each started in a session of its own with its log in a file,
and each stopped by its own process group id (never by name), also when a test fails or
the run is interrupted. A fault story kills one with SIGKILL and starts it again with the
same command, as a Deployment or a systemd unit restarts what died; until then it is down
on purpose, which ``ControlPlane.check_running`` does not count as a failure.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

STOP_SECONDS = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Process:
    """One running program; ``log`` holds what it printed."""

    def __init__(self, name: str, command: list[str], log: Path, environment: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.command = command
        self.log = log
        self.environment = environment
        self.cwd = cwd
        self.killed = False
        """Killed by a fault story and not started again yet."""
        self.popen = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as output:
            return subprocess.Popen(self.command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=self.environment, cwd=self.cwd, start_new_session=True)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL to its process group, as a node losing the process does: no handler runs,
        nothing is flushed or closed cleanly. It stays down until ``start``."""
        self.killed = True
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout=STOP_SECONDS)

    def start(self) -> None:
        """The same command again, its log appended to, as a restarted container or unit."""
        assert not self.running, f"{self.name} is still running"
        self.popen = self._spawn()
        self.killed = False

    def tail(self, lines: int = 30) -> str:
        """The end of its log, for a failure message."""
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def pause(self) -> None:
        """SIGSTOP: the process keeps its state and connections but runs no more until ``resume``."""
        os.killpg(self.popen.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT, to a process that still runs (one killed meanwhile has nothing to resume)."""
        if self.running:
            os.killpg(self.popen.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL if it is still there after ``STOP_SECONDS``."""
        if not self.running:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGCONT)
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=STOP_SECONDS)
        except ProcessLookupError:
            pass


def wait_until(condition: Callable[[], bool], seconds: float, what: str, process: Process | None = None,
               interval: float = 0.1) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds`` (or as soon as ``process`` exits)
    with what was awaited and the end of the process's log."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - a server not yet listening refuses or resets: keep polling
            pass
        if process is not None and not process.running:
            raise RuntimeError(f"{process.name} exited with {process.popen.returncode} while waiting for {what}:\n"
                               f"{process.tail()}")
        if time.monotonic() > deadline:
            log = f":\n{process.tail()}" if process is not None else ""
            raise TimeoutError(f"{what} not within {seconds:.0f} s{log}")
        time.sleep(interval)
