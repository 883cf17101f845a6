"""Measure the hook against a bare Flask app on the same gunicorn settings.

Both run under gunicorn on 127.0.0.1 with the same sync workers, the hook exactly as
``basemodel-hook serve`` starts it; the same saved requests are
POSTed to each for a fixed number of rounds from a few client threads. The bare app
parses the JSON body and answers a small JSON object, which is the least any hook does.
Prints latency percentiles, throughput, the server CPU time per request (master and
workers, from /proc: what answering costs, whatever the client does), the hook's cost
relative to the bare app by that CPU time, and the servers' resident memory. Bounded: it stops after ``--requests`` per case.

    python bench/bench.py [--requests 2000] [--workers 2] [--clients 4] [--rounds 3]

The servers take turns, round after round, and each keeps its cheapest round: other
work on the machine only ever adds cost, so the minimum is the steadiest estimate.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = [
    "sync/basemodel-job-running-v1-keys",
    "sync/basemodel-rbac-ready-creates-job",
    "sync/basemodel-job-failed-backoff-waiting-retry",
    "sync/basemodel-hf-hundreds-of-nodes",
    "customize/basemodel-pvc",
]
BARE_APP = textwrap.dedent(
    """
    import json
    from flask import Flask, Response, request

    def create_app():
        app = Flask(__name__)

        @app.post("/<hook>")
        def answer(hook):
            body = json.loads(request.get_data())
            return Response(json.dumps({"status": {"state": "Ready"}, "children": [], "seen": len(body)}),
                            mimetype="application/json")

        @app.get("/readyz")
        def ready():
            return "ok"

        return app
    """
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(command: list[str], pythonpath: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": pythonpath, "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp()}
    process = subprocess.Popen(
        [sys.executable, "-m", *command, "--bind", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{' '.join(command)} did not start")


def server_pids(process: subprocess.Popen[bytes]) -> list[int]:
    """The gunicorn master and its workers."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    return [process.pid, *(int(pid) for pid in children.read_text().split())] if children.exists() else [process.pid]


def cpu_seconds(process: subprocess.Popen[bytes]) -> float:
    """User plus system CPU time the server has used so far, from /proc."""
    ticks = 0
    for pid in server_pids(process):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_kib(process: subprocess.Popen[bytes]) -> int:
    """Resident memory of the master and its workers, from /proc."""
    total = 0
    for pid in server_pids(process):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def load(port: int, path: str, body: bytes, requests: int, clients: int) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = requests // clients

    def run() -> None:
        mine = []
        for _ in range(per_client):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            started = time.perf_counter()
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            reply = connection.getresponse()
            reply.read()
            mine.append(time.perf_counter() - started)
            assert reply.status == 200, reply.status
            connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def summary(latencies: list[float], elapsed: float, cpu: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[int(len(ordered) * 0.99)] * 1000,
        "rps": len(ordered) / elapsed,
        "cpu_us": cpu / len(ordered) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case; the cheapest counts")
    args = parser.parse_args()

    bare_dir = tempfile.mkdtemp()
    Path(bare_dir, "bare_app.py").write_text(BARE_APP)
    workers = ["--workers", str(args.workers)]
    servers = {
        "bare": start(["gunicorn", "--worker-class", "sync", "--log-level", "warning", *workers,
                       "bare_app:create_app()"], bare_dir),
        "hook": start(["hooks.cli", "serve", *workers], str(REPO)),
    }
    try:
        print(f"{'case':55} {'server':5} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'CPU us/req':>10} {'cost':>7}")
        for case in CASES:
            body = (REPO / "tests" / "fixtures" / f"{case}.request.json").read_bytes()
            hook = case.split("/")[0]
            results: dict[str, dict[str, float]] = {}
            for _ in range(args.rounds):
                for name, (process, port) in servers.items():
                    load(port, f"/{hook}", body, args.clients * 20, args.clients)
                    started, cpu = time.perf_counter(), cpu_seconds(process)
                    latencies = load(port, f"/{hook}", body, args.requests, args.clients)
                    figures = summary(latencies, time.perf_counter() - started, cpu_seconds(process) - cpu)
                    if name not in results or figures["cpu_us"] < results[name]["cpu_us"]:
                        results[name] = figures
            cost = results["hook"]["cpu_us"] / results["bare"]["cpu_us"] - 1
            for name, figures in results.items():
                shown = f"{cost:+7.1%}" if name == "hook" else ""
                print(f"{case + f' ({len(body) // 1024} KiB)':55} {name:5} {figures['p50_ms']:8.2f} "
                      f"{figures['p99_ms']:8.2f} {figures['rps']:8.0f} {figures['cpu_us']:10.0f} {shown:>7}")
        for name, (process, _) in servers.items():
            print(f"resident memory, {name}: {rss_kib(process) / 1024:.1f} MiB (master + {args.workers} workers)")
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)


if __name__ == "__main__":
    main()
