"""Measure ``basemodel-hook serve`` against a bare Flask app, side by side in one run.

    python bench/bench.py [--rounds 11] [--seconds 1] [--connections 4] [--workers 2] [--baseline REV]
    python bench/bench.py --profile     # where the decision's time goes, per shape

Both servers run under gunicorn on 127.0.0.1 with the same flags (sync workers): the
hook exactly as ``basemodel-hook serve --workers 2`` starts it, and ``bench/bare_app.py``,
which parses the body with orjson and answers a canned answer of the size the hook gives.
The load generator is ``wrk`` (Debian: ``apt-get install -y wrk``); without it the bench
says so and falls back to a Python load generator, which needs more CPU of its own, so its
absolute figures are lower, its ratios still comparable.

For each request shape (golden fixtures, sent compact as Metacontroller sends them) the
servers take turns for ``--rounds`` rounds (hook, bare, hook, bare...), each round a
``--seconds`` wrk run after one unmeasured warm-up round. The machine is shared and noisy,
so the table quotes medians over rounds, and the ratio is the median of the ratios of
neighbouring rounds. Beside them, each server's CPU time per request (master and
workers, from /proc), which moves less than throughput when others load the machine.
Then: the resident memory of each worker after 1,000, 10,000 and 20,000 requests (it
must not grow), the core alone per shape (``hooks.sync.sync``, CPU µs per call, each
round in a fresh process: ``bench/core_round.py``), and a check that the hook's
``/metrics`` and its log counted every request it answered, one line per request.

``--baseline REV`` compares the hook with itself before a change, in the same run: REV (a
git revision of this repository) is checked out into a temporary git worktree, removed
again at the end however the bench ends, and its hook is measured beside this tree's. Its
server, started as this tree's is but importing the worktree's ``hooks``, takes its turn
in every round (hook, baseline, bare, hook, baseline, bare...), and its core is timed in
processes of its own alternating with this tree's (hook, baseline, hook...). Measured
apart, the two would see different loads from the rest of the machine and a change of
load would pass for a change of code; in alternation neighbouring rounds see about the
same load, so the tables quote the median of the ratios of neighbouring rounds: the
hook's req/s over the baseline's (below 1: the refactor costs throughput) and the hook's
decision p50 over the baseline's (above 1: it costs CPU per call). Last, both hooks'
answers to each shape, parsed, are compared: a refactor changes none, a change of
behaviour shows where. A shape the baseline answers with an error (it did not serve that
request yet) is reported as such in the tables and not measured for the baseline.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import orjson

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# This tree's hooks, and core_round beside this file also when the bench is imported by path.
sys.path[:0] = [str(REPO), str(BENCH)]

from core_round import percentile  # noqa: E402
from hooks.cli import GC_YOUNG_THRESHOLD  # noqa: E402
from hooks.settings import Settings  # noqa: E402
from hooks.sync import sync  # noqa: E402

SHAPES = {
    "steady state, running Job": "sync/basemodel-job-running-v1-keys",
    "Job creation": "sync/basemodel-rbac-ready-creates-job",
    "hand-back, pvc:// -> hf://": "sync/basemodel-switched-from-pvc-to-hf",
}
# What ``basemodel-hook serve`` hands gunicorn (hooks/cli.py), as gunicorn's own flags.
GUNICORN_FLAGS = ["--worker-class", "sync", "--timeout", "30", "--graceful-timeout", "20", "--keep-alive", "5",
                  "--worker-tmp-dir", tempfile.gettempdir()]
MEMORY_STEPS = (1_000, 10_000, 20_000)
CORE_CALLS = 1_000
CORE_ROUNDS = 5
PROFILED_CALLS = 10_000
WRK_SCRIPT = """
local paths = {%(paths)s}
local prepared = {}
local sent = 0

function init(args)
  for i, path in ipairs(paths) do
    local file = assert(io.open(path, "rb"))
    prepared[i] = wrk.format("POST", "/sync", {["Content-Type"] = "application/json"}, file:read("*a"))
    file:close()
  end
end

function request()
  sent = sent %% #prepared + 1
  return prepared[sent]
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'BENCH {"requests": %%d, "duration_us": %%d, "errors": %%d, "p50_us": %%d, "p99_us": %%d}\\n',
    summary.requests, summary.duration,
    errors.connect + errors.read + errors.write + errors.status + errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


class Refused(SystemExit):
    """A server's answer other than 200. Uncaught, as for this tree's hook, it ends the bench
    with the status and the answer's start; a baseline's refusal of a request shape it did not
    serve yet is caught, and reported in the tables instead."""

    def __init__(self, server: str, status: int, answer: bytes) -> None:
        super().__init__(f"{server} answered {status}: {answer[:300]!r}")
        self.status, self.answer = status, answer


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int

    def workers(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return sorted(int(pid) for pid in children.read_text().split())

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the master and its workers so far, from /proc."""
        ticks = 0
        for pid in (self.process.pid, *self.workers()):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def worker_rss_mib(self) -> list[float]:
        sizes = []
        for pid in self.workers():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        return sizes

    def get(self, path: str) -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.request("GET", path)
        return connection.getresponse().read()

    def post(self, path: str, body: bytes) -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        answer = reply.read()
        if reply.status != 200:
            raise Refused(self.name, reply.status, answer)
        return answer

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(name: str, command: list[str], env: dict[str, str], stderr: Any, cwd: Path) -> Server:
    port = free_port()
    process = subprocess.Popen([*command, "--bind", f"127.0.0.1:{port}"], env={**os.environ, **env},
                               stdout=subprocess.DEVNULL, stderr=stderr, cwd=cwd)
    server = Server(name, process, port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            server.get("/readyz")
            if len(server.workers()) == int(command[command.index("--workers") + 1]):
                return server
        except OSError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"{name} did not start: {' '.join(command)}")


def start_hook(name: str, tree: Path, workers: int, metrics: Path, stderr: Any) -> Server:
    """``basemodel-hook serve`` of ``tree``'s ``hooks`` package, as a deployment starts it.

    ``python -m`` puts its working directory first on sys.path and PYTHONPATH next, both the
    tree, ahead of this virtualenv's editable install of the current tree; a ``python -c`` in
    the same directory and environment confirms which ``hooks`` the server imports."""
    env = {"PYTHONPATH": str(tree), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    probe = subprocess.run([sys.executable, "-c", "import hooks; print(hooks.__file__)"], env={**os.environ, **env},
                           cwd=tree, capture_output=True, text=True, check=True, timeout=60)
    check_imported_from(tree, probe.stdout.strip())
    return start(name, [sys.executable, "-m", "hooks.cli", "serve", "--workers", str(workers)], env, stderr, tree)


def git(*arguments: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True, timeout=120)


@contextmanager
def checked_out(revision: str) -> Iterator[Path]:
    """``revision`` of this repository in a temporary git worktree, removed again however the
    bench ends (an error, Ctrl-C): left behind, it would stay registered in the repository
    (``git worktree list``) and keep a copy of the tree in the temporary directory."""
    commit = git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").stdout.strip()
    if not commit:
        raise SystemExit(f"--baseline {revision}: not a revision of the repository at {REPO}")
    parent = Path(tempfile.mkdtemp(prefix="basemodel-hook-baseline-"))
    tree = parent / "tree"
    try:
        added = git("worktree", "add", "--detach", str(tree), commit)
        if added.returncode:
            raise SystemExit(f"--baseline {revision}: git worktree add failed: {added.stderr.strip()}")
        print(f"baseline: {revision} = {describe(tree)}, checked out in {tree}", file=sys.stderr)
        yield tree
    finally:
        # Twice forced: a worktree that Ctrl-C interrupted while git added it is still locked.
        git("worktree", "remove", "--force", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)


def describe(tree: Path) -> str:
    """The tree's commit as the table names it, and whether its files differ from it."""
    commit = git("log", "-1", "--format=%h %s", cwd=tree).stdout.strip()
    changed = git("status", "--porcelain", "--untracked-files=no", cwd=tree).stdout.strip()
    return f"{commit}{' (with uncommitted changes)' if changed else ''}"


class Wrk:
    """``wrk`` with a Lua script that POSTs the given bodies to /sync in turn."""

    def __init__(self, workdir: Path, connections: int) -> None:
        self.workdir, self.connections = workdir, connections

    def run(self, server: Server, bodies: list[Path], seconds: int) -> dict[str, int]:
        script = self.workdir / f"load-{len(bodies)}.lua"
        script.write_text(WRK_SCRIPT % {"paths": ", ".join(json.dumps(str(path)) for path in bodies)})
        output = subprocess.run(
            ["wrk", "-t1", f"-c{self.connections}", f"-d{seconds}s", "--timeout", "5s", "-s", str(script),
             f"http://127.0.0.1:{server.port}/sync"],
            capture_output=True, text=True, timeout=seconds + 30, check=True,
        ).stdout
        return json.loads(next(line for line in output.splitlines() if line.startswith("BENCH "))[6:])


class PythonLoad:
    """The fallback: one process per connection, each a plain socket loop, no keep-alive."""

    def __init__(self, workdir: Path, connections: int) -> None:
        self.connections = connections

    def run(self, server: Server, bodies: list[Path], seconds: int) -> dict[str, int]:
        requests = [b"POST /sync HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                    for body in (path.read_bytes() for path in bodies)]
        jobs = [(server.port, requests, time.monotonic() + seconds)] * self.connections
        started = time.perf_counter()
        with multiprocessing.Pool(self.connections) as pool:
            results = pool.map(_client_loop, jobs)
        duration = time.perf_counter() - started
        latencies = sorted(latency for result, _ in results for latency in result)
        return {
            "requests": len(latencies),
            "duration_us": int(duration * 1e6),
            "errors": sum(errors for _, errors in results),
            "p50_us": int(percentile(latencies, 50) * 1e6),
            "p99_us": int(percentile(latencies, 99) * 1e6),
        }


def _client_loop(job: tuple[int, list[bytes], float]) -> tuple[list[float], int]:
    port, requests, deadline = job
    latencies: list[float] = []
    errors = 0
    while time.monotonic() < deadline:
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(requests[len(latencies) % len(requests)])
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        latencies.append(time.perf_counter() - started)
        errors += not answer.startswith(b"HTTP/1.1 200")
    return latencies, errors


def compact_bodies(workdir: Path) -> dict[str, Path]:
    """Each shape's request as Metacontroller sends it: compact JSON, no indentation."""
    paths = {}
    for index, (shape, fixture) in enumerate(SHAPES.items()):
        body = orjson.dumps(orjson.loads((REPO / "tests" / "fixtures" / f"{fixture}.request.json").read_bytes()))
        paths[shape] = workdir / f"shape-{index}.json"
        paths[shape].write_bytes(body)
    return paths


def throughput(load: Wrk | PythonLoad, servers: list[Server], body: Path, rounds: int,
               seconds: int) -> dict[str, list[dict[str, int]]]:
    """Alternating rounds after one warm-up round each; every round's figures are kept."""
    for server in servers:
        load.run(server, [body], 1)
    results: dict[str, list[dict[str, int]]] = {server.name: [] for server in servers}
    for _ in range(rounds):
        for server in servers:
            cpu = server.cpu_seconds()
            figures = load.run(server, [body], seconds)
            figures["cpu_us"] = (server.cpu_seconds() - cpu) / figures["requests"] * 1e6
            if figures["errors"]:
                raise SystemExit(f"{server.name}: {figures['errors']} failed requests in a round: {figures}")
            figures["rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
            results[server.name].append(figures)
    return results


def hook_requests_counted(server: Server) -> int:
    """The sum of ``basemodel_hook_requests_total`` over labels, as a scrape sees it."""
    total = 0.0
    for line in server.get("/metrics").decode().splitlines():
        if line.startswith("basemodel_hook_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def memory(load: Wrk | PythonLoad, servers: list[Server], bodies: list[Path]) -> dict[str, dict[int, list[float]]]:
    """Worker RSS once the server has answered each of ``MEMORY_STEPS`` requests in all.

    One-second runs until a step is passed: wrk stops only on time (whole seconds), so a
    step is overshot by less than a second's worth of requests."""
    sizes: dict[str, dict[int, list[float]]] = {}
    for server in servers:
        done = 0
        sizes[server.name] = {}
        for step in MEMORY_STEPS:
            deadline = time.monotonic() + 120
            while done < step and time.monotonic() < deadline:
                done += load.run(server, bodies, 1)["requests"]
            sizes[server.name][step] = server.worker_rss_mib()
    return sizes


def core(trees: dict[str, Path], bodies: dict[str, Path], rounds: int) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The decision alone, as a worker runs it, per tree and shape: every round's figures.

    Each round is a process of its own per tree (``core_round.py``), the trees in turn, so
    that each imports its own ``hooks`` and all see the same machine load; every tree gets
    this tree's garbage-collector settings, so that only their code differs."""
    figures: dict[str, dict[str, list[dict[str, Any]]]] = {name: {shape: [] for shape in bodies} for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            measured = subprocess.run(
                [sys.executable, str(BENCH / "core_round.py"), str(GC_YOUNG_THRESHOLD), str(CORE_CALLS),
                 *map(str, bodies.values())],
                env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, capture_output=True, text=True, timeout=600,
            )
            if measured.returncode:
                raise SystemExit(f"the core of {name} ({tree}) could not be measured:\n{measured.stderr[-2000:]}")
            answer = json.loads(measured.stdout)
            check_imported_from(tree, answer["hooks"])
            for shape, shape_figures in zip(bodies, answer["shapes"]):
                figures[name][shape].append(shape_figures)
    return figures


def check_imported_from(tree: Path, hooks_file: str) -> None:
    """Stop unless ``hooks`` came from ``tree``: the editable install of this tree sits on
    every path of this virtualenv, and measuring it twice would show no difference at all."""
    if not Path(hooks_file).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"meant to measure the hooks package of {tree}, but {hooks_file} was imported")


def profile_core(bodies: dict[str, Path]) -> None:
    """Where each shape's decision spends its time: pyinstrument over many calls.

    The requests are parsed first and frozen out of the garbage collector's sight, as a
    worker freezes what it loaded: else the collections that thousands of parsed requests
    cause would be charged to whatever line allocated last."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise SystemExit("--profile needs pyinstrument: .venv/bin/pip install -e '.[bench]'") from None
    settings = Settings()
    for shape, path in bodies.items():
        requests = [orjson.loads(path.read_bytes()) for _ in range(PROFILED_CALLS)]
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD)
        now = datetime.now(timezone.utc)
        profiler = Profiler(interval=0.0001)
        profiler.start()
        for body in requests:
            sync(body, settings, now)
        profiler.stop()
        print(f"\n{shape}: {PROFILED_CALLS:,} calls of hooks.sync.sync")
        print(profiler.output_text(unicode=True, color=False))


class RequestLines(threading.Thread):
    """Reads the hook's stderr from a pipe, as a container runtime does, counting the
    JSON request lines (gunicorn's own lines are not JSON)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream, self.count = stream, 0

    def run(self) -> None:
        for line in self.stream:
            if line.startswith(b"{"):
                orjson.loads(line)
                self.count += 1


def neighbour_ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    """Round by round, one figure over the other's from the same round, sorted: neighbouring
    rounds saw about the same load from the rest of the machine, which a ratio of medians
    taken over the whole run would not cancel."""
    return sorted(numerator / denominator for numerator, denominator in zip(numerators, denominators, strict=True))


def ratio_cell(ratios: list[float]) -> str:
    """The median ratio in bold, the range of the rounds' ratios beside it."""
    return f"**{statistics.median(ratios):.2f}×** ({ratios[0]:.2f}–{ratios[-1]:.2f})"


def report_throughput(shapes: dict[str, Path], answers: dict[str, bytes], names: list[str],
                      results: dict[str, dict[str, list[dict[str, int]]]], rounds: int) -> None:
    """The servers' table, ``names`` in the order they took turns; the hook's rate is quoted
    over each other server's. A server missing from a shape's results refused that shape."""
    first, *others = names
    ratios = ["ratio"] if len(others) == 1 else [f"{first} / {other}" for other in others]
    print(f"\nThroughput and latency, median of {rounds} alternating rounds ({' / '.join(names)}):\n")
    columns = ["in KB", "out KB", *(f"{name} req/s" for name in names), *(f"{ratio} (range)" for ratio in ratios),
               *(f"{name} p50 / p99 ms" for name in names), f"CPU µs/req {' / '.join(names)}"]
    print(f"| shape | {' | '.join(columns)} |")
    print(f"|---|{'---:|' * len(columns)}")
    for shape, path in shapes.items():
        rows = results[shape]

        def median(name: str, key: str) -> float:
            return statistics.median(row[key] for row in rows[name])

        def each(cell: Callable[[str], str]) -> list[str]:
            return [cell(name) if name in rows else "refused" for name in names]

        def ratio(other: str) -> str:
            if other not in rows:
                return "—"
            return ratio_cell(neighbour_ratios([row["rps"] for row in rows[first]], [row["rps"] for row in rows[other]]))

        cells = [f"{path.stat().st_size / 1000:.1f}", f"{len(answers[shape]) / 1000:.1f}",
                 *each(lambda name: f"{median(name, 'rps'):.0f}"), *map(ratio, others),
                 *each(lambda name: f"{median(name, 'p50_us') / 1000:.2f} / {median(name, 'p99_us') / 1000:.2f}"),
                 " / ".join(each(lambda name: f"{median(name, 'cpu_us'):.0f}"))]
        print(f"| {shape} | {' | '.join(cells)} |")


def report_core(cores: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """The core's table; with more than one tree each cell holds their figures in turn, and
    a column per further tree quotes the first tree's decision p50 over that tree's."""
    names = list(cores)
    first, *others = names
    compared = f" {' / '.join(names)}" if others else ""
    print(f"\nThe core alone (hooks.sync.sync, CPU µs per call; median over {CORE_ROUNDS} rounds of "
          f"{CORE_CALLS} calls{', the trees in turn' if others else ''}), with the JSON work around it:\n")
    columns = [f"decision p50{compared}", *(f"{first} / {other} p50 (range)" for other in others),
               f"decision p99{compared}", f"orjson parse p50{compared}", f"orjson dumps p50{compared}"]
    print(f"| shape | {' | '.join(columns)} |")
    print(f"|---|{'---:|' * len(columns)}")
    for shape in cores[first]:
        errors = {name: next((row["error"] for row in cores[name][shape] if "error" in row), None) for name in names}

        def figures(key: str) -> str:
            return " / ".join("error" if errors[name] else f"{statistics.median(row[key] for row in cores[name][shape]):.0f}"
                              for name in names)

        def ratio(other: str) -> str:
            failed = [f"{name}: {errors[name]}" for name in (first, other) if errors[name]]
            if failed:
                return "; ".join(failed)
            return ratio_cell(neighbour_ratios([row["p50"] for row in cores[first][shape]],
                                               [row["p50"] for row in cores[other][shape]]))

        cells = [figures("p50"), *map(ratio, others), figures("p99"), figures("parse"), figures("dumps")]
        print(f"| {shape} | {' | '.join(cells)} |")


def report_memory(sizes: dict[str, dict[int, list[float]]]) -> None:
    print("\nResident memory per worker (MiB), the three shapes in turn:\n")
    print(f"| server | {' | '.join(f'after {step:,} requests' for step in MEMORY_STEPS)} | growth, last {MEMORY_STEPS[-1] - MEMORY_STEPS[-2]:,} |")
    print(f"|---|{'---:|' * (len(MEMORY_STEPS) + 1)}")
    for name, steps in sizes.items():
        cells = [" / ".join(f"{size:.1f}" for size in steps[step]) for step in MEMORY_STEPS]
        growth = max(last - before for last, before in zip(steps[MEMORY_STEPS[-1]], steps[MEMORY_STEPS[-2]]))
        print(f"| {name} | {' | '.join(cells)} | {growth:+.1f} |")


ABSENT = object()


def differences(current: Any, baseline: Any, where: str = "") -> list[str]:
    """Where two parsed JSON answers differ, as paths such as ``status.conditions[1].reason``:
    a refactor changes none, and a change of behaviour is easier to judge when it is named."""
    if isinstance(current, dict) and isinstance(baseline, dict):
        return [path for key in sorted(current.keys() | baseline.keys())
                for path in differences(current.get(key, ABSENT), baseline.get(key, ABSENT),
                                        f"{where}.{key}" if where else key)]
    if isinstance(current, list) and isinstance(baseline, list) and len(current) == len(baseline):
        return [path for index, (mine, theirs) in enumerate(zip(current, baseline))
                for path in differences(mine, theirs, f"{where}[{index}]")]
    return [] if current == baseline else [where or "the whole answer"]


def compared_answer(answer: bytes, theirs: bytes | Refused) -> str:
    """One cell of the answers' table: identical, where they differ, or what the other refused."""
    if isinstance(theirs, Refused):
        return f"not compared: answered {theirs.status}, {theirs.answer[:160].decode(errors='replace')}"
    changed = differences(orjson.loads(answer), orjson.loads(theirs))
    if not changed:
        return "identical"
    return f"**differ** at {', '.join(changed[:3])}{f' and {len(changed) - 3} more' if len(changed) > 3 else ''}"


def report_answers(answers: dict[str, bytes], compared: dict[str, dict[str, bytes | Refused]]) -> None:
    for name, theirs in compared.items():
        print(f"\nThe answers of hook and {name} to each shape, parsed (a refactor changes none):\n")
        print(f"| shape | hook against {name} |")
        print("|---|---|")
        for shape, answer in answers.items():
            print(f"| {shape} | {compared_answer(answer, theirs[shape])} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11, help="measured rounds per server and shape")
    parser.add_argument("--seconds", type=int, default=1, help="length of one round, whole seconds")
    parser.add_argument("--connections", type=int, default=4, help="concurrent client connections")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers of each server")
    parser.add_argument("--profile", action="store_true",
                        help="only profile the core per shape (pyinstrument), no servers")
    parser.add_argument("--baseline", metavar="REV",
                        help="also measure the hook of this git revision, in turn with this tree's")
    args = parser.parse_args(argv)
    if args.profile:
        if args.baseline is not None:
            parser.error("--profile profiles this tree's core only; leave out --baseline")
        workdir = Path(tempfile.mkdtemp(prefix="basemodel-hook-bench-"))
        profile_core(compact_bodies(workdir))
        shutil.rmtree(workdir, ignore_errors=True)
        return
    with ExitStack() as worktrees:
        trees = {"hook": REPO}
        if args.baseline is not None:
            trees["baseline"] = worktrees.enter_context(checked_out(args.baseline))
        measure(args, trees)


def measure(args: argparse.Namespace, trees: dict[str, Path]) -> None:
    """Everything but the profile: the trees' hooks (this tree's first) and the bare app
    under load in turn, then each tree's core, then the tables."""
    workdir = Path(tempfile.mkdtemp(prefix="basemodel-hook-bench-"))
    if shutil.which("wrk"):
        load: Wrk | PythonLoad = Wrk(workdir, args.connections)
    else:
        print("wrk not found (Debian/Ubuntu: apt-get install -y wrk); falling back to a Python load generator, "
              "whose own CPU use lowers the servers' figures alike.", file=sys.stderr)
        load = PythonLoad(workdir, args.connections)
    shapes = compact_bodies(workdir)
    servers: list[Server] = []
    try:
        # Every hook logs to a pipe read as a container runtime reads it, so that a baseline
        # does not skip the cost of its log; this tree's lines are counted against /metrics.
        for name, tree in trees.items():
            servers.append(start_hook(name, tree, args.workers, workdir / f"metrics-{name}", subprocess.PIPE))
        hook, *baselines = servers
        readers = [RequestLines(server.process.stderr) for server in servers]
        for reader in readers:
            reader.start()
        request_lines = readers[0]
        answers = {shape: hook.post("/sync", path.read_bytes()) for shape, path in shapes.items()}
        compared = {baseline.name: {shape: answer_or_refusal(baseline, path) for shape, path in shapes.items()}
                    for baseline in baselines}
        (workdir / "canned.json").write_bytes(orjson.dumps({str(path.stat().st_size): answers[shape].decode()
                                                            for shape, path in shapes.items()}))
        servers.append(start("bare", [sys.executable, "-m", "gunicorn", *GUNICORN_FLAGS, "--workers", str(args.workers),
                                      "--pythonpath", str(BENCH), "bare_app:create_app()"],
                             {"BENCH_CANNED_ANSWERS": str(workdir / "canned.json")}, subprocess.DEVNULL, REPO))
        print(f"load: {type(load).__name__}, {args.connections} connections; {args.workers} sync workers each",
              file=sys.stderr)
        sizes = memory(load, servers, list(shapes.values()))
        refused = {(name, shape) for name, theirs in compared.items() for shape, answer in theirs.items()
                   if isinstance(answer, Refused)}
        results = {}
        for shape, path in shapes.items():
            print(f"measuring: {shape}", file=sys.stderr)
            served = [server for server in servers if (server.name, shape) not in refused]
            results[shape] = throughput(load, served, path, args.rounds, args.seconds)
        counted = hook_requests_counted(hook)
    finally:
        for server in servers:
            server.stop()
    for reader in readers:
        reader.join(timeout=30)
    lines = request_lines.count
    cores = core(trees, shapes, CORE_ROUNDS)
    if baselines:
        print("\n" + "; ".join(f"{name}: {describe(tree)}" for name, tree in trees.items()))
    report_throughput(shapes, answers, [server.name for server in servers], results, args.rounds)
    report_core(cores)
    report_memory(sizes)
    report_answers(answers, compared)
    print(f"\nThe hook's /metrics counted {counted:,} hook requests and its log has {lines:,} request lines"
          f" ({'one per request' if counted == lines else 'MISMATCH'}).")
    shutil.rmtree(workdir, ignore_errors=True)
    if counted != lines:
        raise SystemExit(1)


def answer_or_refusal(server: Server, body: Path) -> bytes | Refused:
    """A baseline's answer to a shape; an older revision may not serve every shape yet."""
    try:
        return server.post("/sync", body.read_bytes())
    except Refused as refusal:
        return refusal


if __name__ == "__main__":
    main()
