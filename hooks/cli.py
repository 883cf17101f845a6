"""``basemodel-hook``: run the server under gunicorn, or replay a saved request.

``serve`` checks the configuration, then that its address can be listened on, before
gunicorn starts, so a bad variable or a taken port stops the process with one clear line
instead of a crash loop of workers or five of gunicorn's retries.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import socket
import ssl
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

from hooks import __version__
from hooks.settings import ConfigError, ServerSettings, Settings, default_workers, parse_bind, parse_workers, variable_of

GC_YOUNG_THRESHOLD = 50_000
# Marks a PROMETHEUS_MULTIPROC_DIR as the hook's own, so a restart may clear its files.
METRICS_DIR_MARK = ".basemodel-hook-metrics"
# What every request names (the model a hook is asked about) and the fields only an answer
# has (CONTRACT.md, section 2): a file with the latter and not the former is an answer.
REQUEST_SUBJECTS = frozenset({"parent", "object"})
ANSWER_ONLY_FIELDS = frozenset({"status", "resyncAfterSeconds", "finalized", "relatedResources", "labels"})

EXIT_REPLAY_NOT_OK = 1
EXIT_BAD_CONFIGURATION = 2  # argparse's own status for a bad argument, so one code for both
# gunicorn exits 3 or 4 of its own accord (a worker failed to boot, an app failed to import).
EXIT_CANNOT_LISTEN = 5

DESCRIPTION = """\
Metacontroller hook for OME BaseModels and ClusterBaseModels stored on PVCs.

serve runs the hooks over HTTP under gunicorn; replay prints the hook's answer to a saved
request. The hook's settings come from environment variables (docs/configuration.md lists them):
a bad one stops the command with one line naming it."""

# (status, the commands that end with it, what it means): the --help epilogs.
EXIT_STATUSES: tuple[tuple[int, tuple[str, ...], str], ...] = (
    (0, ("serve", "replay"), "success (serve: stopped on a signal; replay: the answer was HTTP 200)"),
    (EXIT_REPLAY_NOT_OK, ("replay",), "the answer was another HTTP status (printed all the same)"),
    (1, ("serve",), "gunicorn stopped on an error of its own (its log says which)"),
    (EXIT_BAD_CONFIGURATION, ("serve", "replay"), "bad configuration or arguments: one line on stderr names the variable or option"),
    (3, ("serve",), "a gunicorn worker failed to boot (its log says why)"),
    (EXIT_CANNOT_LISTEN, ("serve",), "the address cannot be listened on (in use, not this host's, or not allowed): one line on stderr"),
)


def _exit_statuses(command: str | None = None) -> str:
    """The exit statuses of ``command``, or of every command (each named where it alone
    ends so), as a help epilog."""
    lines = [
        f"  {status}  {commands[0] + ': ' if command is None and len(commands) == 1 else ''}{meaning}"
        for status, commands, meaning in EXIT_STATUSES
        if command is None or command in commands
    ]
    return "\n".join(["exit status:", *lines])


class CannotListen(Exception):
    """The address ``serve`` was given cannot be bound; the message says which and why."""


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: its exit statuses are ``EXIT_STATUSES``, and a failure of its own
    is one line on stderr."""
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
        if args.command == "serve":
            return _serve(_listening(settings, args.bind, args.workers))
        return _replay(args.file, args.hook, args.now, settings)
    except ConfigError as error:
        print(f"basemodel-hook: {error}", file=sys.stderr)
        return EXIT_BAD_CONFIGURATION
    except CannotListen as error:
        print(f"basemodel-hook: {error}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN


def _parser() -> argparse.ArgumentParser:
    """The command line: each command's help shows its defaults and ends with its exit
    statuses."""
    parser = argparse.ArgumentParser(
        prog="basemodel-hook",
        description=DESCRIPTION,
        epilog=_exit_statuses(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{serve,replay}")

    serve = _add_command(
        commands,
        "serve",
        "serve the hooks with gunicorn",
        "Serve the hooks over HTTP (HTTPS with HOOK_TLS_CERT_FILE and HOOK_TLS_KEY_FILE) under gunicorn.",
    )
    serve.add_argument(
        "--bind", metavar="HOST:PORT", help=f"the address to listen on (default: $HOOK_BIND, else {ServerSettings.bind})"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help=f"gunicorn worker processes, {parse_workers.range} (default: $HOOK_WORKERS, else two per CPU plus one, at most 9: {default_workers()} here)",
    )

    replay = _add_command(
        commands,
        "replay",
        "print the hook's answer to a saved request",
        "Print the hook's answer to a saved request, through the real app without auth.",
    )
    replay.add_argument("file", type=Path, help="a request body as Metacontroller sends it")
    replay.add_argument("--hook", help="sync, customize, finalize or label (default: from the file's folder)")
    replay.add_argument("--now", help="the clock, RFC 3339 (default: now)")
    return parser


def _add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    """A command whose --help ends with the exit statuses it can give."""
    return commands.add_parser(
        name,
        help=summary,
        description=description,
        epilog=_exit_statuses(name),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _listening(settings: Settings, bind: str | None, workers: int | None) -> Settings:
    """The server settings with the flags' address and worker count, which win over the
    variables; a bad flag is named as the flag."""
    server = settings.server
    chosen = replace(
        server,
        bind=parse_bind("--bind", bind) if bind is not None else server.bind,
        workers=parse_workers("--workers", str(workers)) if workers is not None else server.workers,
    )
    return replace(settings, server=chosen)


def _tls_options(server: ServerSettings) -> dict[str, Any]:
    """TLS is gunicorn's job: a certificate and key, or neither. With a client CA as well,
    only a client holding a certificate signed by it gets through the handshake, as
    Metacontroller presents one from its webhook's ``clientTLS``.

    The files are loaded here once, so that a wrong one stops the server with one line
    instead of failing every worker's start or every handshake."""
    cert, key, client_ca = server.tls_cert_file, server.tls_key_file, server.tls_client_ca_file
    variables = [variable_of(ServerSettings, name) for name in ("tls_cert_file", "tls_key_file", "tls_client_ca_file")]
    for variable, path in zip(variables, (cert, key, client_ca), strict=True):
        if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
            raise ConfigError(f"{variable}={path!r} is not a readable file")
    if not cert:
        return {}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as error:
        raise ConfigError(f"HOOK_TLS_CERT_FILE/HOOK_TLS_KEY_FILE: not a PEM certificate and its key ({error})") from None
    if not client_ca:
        return {"certfile": cert, "keyfile": key}
    try:
        context.load_verify_locations(cafile=client_ca)
    except ssl.SSLError as error:
        raise ConfigError(f"HOOK_TLS_CLIENT_CA_FILE={client_ca!r} holds no PEM CA certificate ({error})") from None
    return {"certfile": cert, "keyfile": key, "ca_certs": client_ca, "cert_reqs": ssl.CERT_REQUIRED}


def _serve(settings: Settings) -> int:
    """Run gunicorn in this process, once every option has been checked."""
    server = settings.server
    options: dict[str, Any] = {
        "bind": server.bind,
        "workers": server.workers or default_workers(),
        "worker_class": "sync",
        "timeout": 30,
        "graceful_timeout": 20,
        "keepalive": 5,
        "accesslog": None,
        "worker_tmp_dir": tempfile.gettempdir(),
        "child_exit": _child_exit,
        **_tls_options(server),
    }
    with _metrics_directory(server.metrics_directory) as metrics_dir:
        _check_listen(server.bind)
        # prometheus_client reads it once, when the app first imports it.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        _run_gunicorn(options, settings)
    return 0


def _check_listen(bind: str) -> None:
    """Bind and listen on ``bind`` as gunicorn will (same address parsing, same socket
    family, SO_REUSEADDR), then let go: a taken port is then one line, not gunicorn's five
    retries a second apart and their ten lines. Another process may still take the port
    in between; gunicorn then reports it its own way."""
    from gunicorn.util import is_ipv6, parse_address

    host, port = parse_address(bind)
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
            probe.listen()
    except OSError as error:
        reason = error.strerror or str(error)
        raise CannotListen(
            f"cannot listen on {bind}: {reason[:1].lower()}{reason[1:]}; "
            f"choose another address with --bind or {variable_of(ServerSettings, 'bind')}"
        ) from None


def _run_gunicorn(options: dict[str, Any], settings: Settings) -> None:
    """Each worker freezes what it loaded at start out of the garbage collector's sight and
    collects its young objects less often: a request allocates a large, acyclic JSON tree
    that reference counting frees anyway, and collections that rescan it (and Flask's own
    objects) would cost more than the decision."""
    from gunicorn.app.base import BaseApplication

    from hooks.http.app import create_app

    class HookServer(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self) -> Any:
            app = create_app(settings)
            gc.freeze()
            gc.set_threshold(GC_YOUNG_THRESHOLD)
            return app

    HookServer().run()


@contextmanager
def _metrics_directory(named: str | None) -> Iterator[str]:
    """Where the workers share their metrics: the named directory, or a temporary one that
    goes when the server stops.

    Only gunicorn's master removes it: a worker's exit unwinds through here too."""
    if named:
        _claim_metrics_directory(Path(named))
        yield named
        return
    created = tempfile.mkdtemp(prefix="basemodel-hook-metrics-")
    master = os.getpid()
    try:
        yield created
    finally:
        if os.getpid() == master:
            shutil.rmtree(created, ignore_errors=True)


def _claim_metrics_directory(path: Path) -> None:
    """Use a directory that is new, empty, or the hook's own from an earlier start (a
    restarted container keeps its emptyDir), whose metric files then belong to processes
    that are gone: merged, they would count old requests again. Anything else it holds is
    someone else's, and the hook deletes nothing of theirs."""
    variable = f"PROMETHEUS_MULTIPROC_DIR={str(path)!r}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()) and not (path / METRICS_DIR_MARK).is_file():
            raise ConfigError(f"{variable} holds files basemodel-hook did not write; name an empty or new directory")
        for stale in path.glob("*.db"):
            stale.unlink()
        (path / METRICS_DIR_MARK).touch()
    except OSError as error:
        raise ConfigError(f"{variable}: {error.strerror or error}") from None


def _child_exit(server: Any, worker: Any) -> None:
    """A dead worker's live gauges must not linger in the merged metrics."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def _replay(file: Path, hook: str | None, now: str | None, settings: Settings) -> int:
    """Answer a saved request through the real app to see what a sync decided, without
    credentials: inside the hook's own pod the environment requires them of every caller."""
    from hooks.conditions import parse_time
    from hooks.http.app import HOOKS, create_app
    from hooks.http.auth import without_credentials

    try:
        body = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read a JSON request from {file}: {error}") from None
    _refuse_an_answer(file, body)
    hook = hook or _hook_of(file, HOOKS)
    if hook not in HOOKS:
        raise ConfigError(f"--hook {hook!r} is not one of {', '.join(HOOKS)}")
    moment = parse_time(now) if now else datetime.now(timezone.utc)
    if moment is None:
        raise ConfigError(f"--now {now!r} is not an RFC 3339 time with an offset, such as 2026-11-30T12:00:00Z")
    app = create_app(replace(settings, server=without_credentials(settings.server)), clock=lambda: moment)
    answer = app.test_client().post(f"/{hook}", json=body)
    try:
        print(json.dumps(answer.get_json(), indent=2), flush=True)
    except BrokenPipeError:
        # The reader (``| head``) took what it wanted. Point stdout at /dev/null so that
        # Python's own flush at exit does not complain about the closed pipe either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if answer.status_code == 200 else EXIT_REPLAY_NOT_OK


def _refuse_an_answer(file: Path, body: Any) -> None:
    """A saved answer (``tests/fixtures`` keeps one beside each request) replayed by mistake
    would get a 400 about a missing ``parent``; say what the file is instead, and which
    request it answers where that sits beside it."""
    if not isinstance(body, dict) or REQUEST_SUBJECTS & body.keys() or not ANSWER_ONLY_FIELDS & body.keys():
        return
    request = file.with_name(file.name.removesuffix(".response.json") + ".request.json")
    beside = f", {request}" if file.name.endswith(".response.json") and request.is_file() else ""
    raise ConfigError(
        f"{file} is a hook's answer ({', '.join(sorted(body))}; no parent or object), not a request: "
        f"replay the request it answers{beside}"
    )


def _hook_of(file: Path, hooks: Sequence[str]) -> str:
    """The hook a saved request is for, from its folder as ``tests/fixtures`` lays them
    out; ``sync`` anywhere else."""
    folder = file.absolute().parent.name
    return folder if folder in hooks else "sync"


if __name__ == "__main__":
    sys.exit(main())
