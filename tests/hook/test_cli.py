"""The console script: a real gunicorn server answers the examples of the README and docs/."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hooks import __version__
from hooks.cli import EXIT_BAD_CONFIGURATION, EXIT_CANNOT_LISTEN, EXIT_REPLAY_NOT_OK, main
from hooks.settings import default_workers, parse_workers
from tests import docs, golden
from tests.live_server import free_port, running
from tests.unavailable import unavailable

REPO = Path(__file__).resolve().parents[2]
README_FILE = docs.README
README = README_FILE.read_text(encoding="utf-8")
SCRIPT = Path(sys.executable).with_name("basemodel-hook")
def example_id(match: re.Match[str]) -> str:
    return (match.groupdict().get("data") or match["file"]).split("/")[-1][:60]


@contextmanager
def serving(log: Path, env: dict[str, str] | None = None, workers: int = 2, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """``basemodel-hook serve`` on a free port, ready to answer, stopped afterwards."""
    port = free_port()
    argv = [str(SCRIPT), "serve", "--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
    with running(argv, port, log, tls, cwd=REPO, env=env):
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server as the README starts it."""
    with serving(tmp_path_factory.mktemp("server") / "serve.log") as base:
        yield base


def post(url: str, data: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_readme_starts_with_the_serve_and_test_commands() -> None:
    """Serve and the fast suite; the tiers come after the first screen."""
    blocks = re.findall(r"```sh\n(.*?)\n```", README.split("---")[0], re.S)
    assert len(blocks) == 2
    assert "basemodel-hook serve" in blocks[0] and "pip install" in blocks[0]
    assert "pytest" in blocks[1] and "pip install" in blocks[1]


def test_docs_have_a_curl_example_for_each_main_case() -> None:
    files = {match["data"] for match in docs.documented_examples()}
    assert len(files) >= 10
    for data in files:
        if data.startswith("@"):
            assert (REPO / data[1:]).is_file(), data


@pytest.mark.parametrize("example", docs.documented_examples(), ids=example_id)
def test_documented_example_answers_what_the_docs_say(server: str, example: re.Match[str]) -> None:
    data = (REPO / example["data"][1:]).read_bytes() if example["data"].startswith("@") else example["data"].strip("'").encode()
    status, body = post(f"{server}/{example['hook']}", data)
    assert_answer_as_described(example["hook"], example["expect"], status, body)


@pytest.mark.parametrize("example", docs.documented_replay_examples(), ids=example_id)
def test_documented_replay_example_answers_what_the_docs_say(example: re.Match[str]) -> None:
    result = subprocess.run(
        [str(SCRIPT), "replay", example["file"], "--now", example["now"]],
        cwd=REPO, capture_output=True, text=True, timeout=20,
    )
    assert result.returncode == 0, result.stderr
    assert_answer_as_described(golden.hook_of(REPO / example["file"]), example["expect"], 200, json.loads(result.stdout))


def assert_answer_as_described(hook: str, expect: str, status: int, body: dict) -> None:
    """The line under a documented example: an HTTP error and its body, or a 200's gist."""
    if expect.startswith("HTTP"):
        code = int(re.search(r"HTTP \*\*(\d+)\*\*", expect).group(1))
        assert status == code
        assert json.loads(re.search(r"`(\{.*\})`", expect).group(1)) == body
        return
    assert status == 200, body
    if hook == "customize":
        wanted = re.search(r"relatedResources \*\*([^*]+)\*\*", expect).group(1).split(", ")
        assert [rule["resource"] for rule in body["relatedResources"]] == wanted
        return
    state, reason, children = re.search(
        r"state \*\*(\w+)\*\*, Ready reason \*\*(\w+)\*\*, children \*\*([^*]+)\*\*", expect
    ).groups()
    ready = next(c for c in body["status"]["conditions"] if c["type"] == "Ready")
    assert (body["status"]["state"], ready["reason"]) == (state, reason)
    kinds = [child["kind"] for child in body["children"]]
    assert kinds == ([] if children == "none" else children.split(", "))


@contextmanager
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 this process listens on while the block runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def serve_refusal(args: list[str], env: dict[str, str]) -> str:
    """What ``serve`` says when it refuses to start: exit status 2 and one line.

    Unless the case is about the address, it is one already taken, so that a server that
    starts after all fails at once instead of answering on someone's port."""
    with taken_port() as port:
        if "--bind" not in args and "HOOK_BIND" not in env:
            args = [*args, "--bind", f"127.0.0.1:{port}"]
        result = subprocess.run(
            [str(SCRIPT), "serve", *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=20
        )
    assert result.returncode == EXIT_BAD_CONFIGURATION, result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ([], {"JOB_BACKOFF_LIMIT": "9"}, "JOB_BACKOFF_LIMIT="),
        (["--bind", "127.0.0.1:70000"], {}, "--bind="),
        ([], {"HOOK_BIND": "0.0.0.0:65536"}, "HOOK_BIND="),
        (["--bind", "::1:8080"], {}, "IPv6 address only in brackets"),
        (["--workers", "0"], {"HOOK_WORKERS": "3"}, "--workers="),
        ([], {"HOOK_WORKERS": "0"}, "HOOK_WORKERS="),
        ([], {"HOOK_TLS_CLIENT_CA_FILE": str(README_FILE)}, "HOOK_TLS_CLIENT_CA_FILE needs HOOK_TLS_CERT_FILE"),
        (
            [],
            {"HOOK_TLS_CERT_FILE": str(README_FILE), "HOOK_TLS_KEY_FILE": str(README_FILE), "HOOK_TLS_CLIENT_CA_FILE": "/nonexistent/ca.crt"},
            "HOOK_TLS_CLIENT_CA_FILE='/nonexistent/ca.crt' is not a readable file",
        ),
        ([], {"HOOK_TLS_CERT_FILE": str(README_FILE), "HOOK_TLS_KEY_FILE": str(README_FILE)}, "HOOK_TLS_CERT_FILE/HOOK_TLS_KEY_FILE"),
    ],
    ids=["job-backoff", "bind-flag-port", "bind-variable-port", "bind-ipv6-without-brackets", "workers-flag", "workers-variable",
         "client-ca-without-certificate", "client-ca-unreadable", "certificate-not-pem"],
)
def test_bad_configuration_stops_serve_naming_what_was_given(args: list[str], env: dict[str, str], named: str) -> None:
    assert named in serve_refusal(args, env)


def test_version_flag_prints_the_package_version() -> None:
    result = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, timeout=20)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"basemodel-hook {__version__}\n", "")


def test_serve_with_an_image_the_kubelet_would_refuse_stops_with_one_line_naming_it() -> None:
    assert serve_refusal([], {"OME_AGENT_IMAGE": "ghcr.io/Foo/Bar:v1"}) == (
        "basemodel-hook: OME_AGENT_IMAGE='ghcr.io/Foo/Bar:v1' is not an image reference: repository path must be "
        "lowercase; expected [registry[:port]/]path[:tag][@sha256:digest], such as ghcr.io/moirai-internal/ome-agent:v0.1.5\n"
    )


def test_serve_on_an_address_in_use_says_so_in_one_line_and_exits_with_its_own_status(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PROMETHEUS_MULTIPROC_DIR"}
    with taken_port() as port:
        result = subprocess.run(
            [str(SCRIPT), "serve", "--bind", f"127.0.0.1:{port}"],
            env={**env, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=20,
        )
    assert result.returncode == EXIT_CANNOT_LISTEN
    assert result.stderr == (
        f"basemodel-hook: cannot listen on 127.0.0.1:{port}: address already in use; choose another address with --bind or HOOK_BIND\n"
    )
    assert list(tmp_path.iterdir()) == [], "the metrics directory it made is gone with it"


def test_help_is_plain_text_with_every_exit_status() -> None:
    result = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0
    assert "``" not in result.stdout
    statuses = re.findall(r"^  (\d+)  (.+)$", result.stdout.split("exit status:")[1], re.M)
    assert [int(status) for status, _ in statuses] == [0, EXIT_REPLAY_NOT_OK, 1, EXIT_BAD_CONFIGURATION, 3, EXIT_CANNOT_LISTEN]
    assert dict(statuses)[str(EXIT_CANNOT_LISTEN)].startswith("serve: the address cannot be listened on")


def test_serve_help_shows_each_default_and_the_variable_that_changes_it() -> None:
    result = subprocess.run([str(SCRIPT), "serve", "--help"], capture_output=True, text=True, timeout=20)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "(default: $HOOK_BIND, else 127.0.0.1:8080)" in text
    assert f"{parse_workers.range} (default: $HOOK_WORKERS, else two per CPU plus one, at most 9: {default_workers()} here)" in text
    assert f"`--workers` overrides ({parse_workers.range})" in (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "exit status: 0 " in text and f" {EXIT_CANNOT_LISTEN} the address cannot be listened on" in text
    assert f" {EXIT_REPLAY_NOT_OK} the answer was" not in text, "replay's statuses stay on replay's page"


def test_replay_of_a_request_the_hook_refuses_prints_the_answer_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request_file = tmp_path / "empty.request.json"
    request_file.write_text("{}", encoding="utf-8")
    assert main(["replay", str(request_file), "--hook", "sync", "--now", "2026-11-30T12:00:00Z"]) == EXIT_REPLAY_NOT_OK
    assert set(json.loads(capsys.readouterr().out)) == {"error"}


@pytest.mark.parametrize("hook", golden.HOOKS)
def test_replay_prints_the_golden_answer_of_the_hook_its_folder_names(hook: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Without ``--hook``, a saved request goes to the hook of its folder. (The console
    script itself runs in the tests of the documented examples.)"""
    request_file = sorted((golden.FIXTURES / hook).glob("*.request.json"))[0]
    assert main(["replay", str(request_file), "--now", "2026-11-30T12:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out) == golden.load(golden.response_file(request_file))


@pytest.mark.parametrize(
    "credentials",
    [{"HOOK_AUTH_TOKEN": "s3cr3t-token"}, {"HOOK_BASIC_AUTH_USERNAME": "metacontroller", "HOOK_BASIC_AUTH_PASSWORD": "s3cr3t"}],
    ids=["bearer", "basic"],
)
def test_replay_answers_without_credentials_where_the_environment_requires_them(
    credentials: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inside the hook's own pod, where the docs send an operator to replay a request."""
    for variable, value in credentials.items():
        monkeypatch.setenv(variable, value)
    request_file = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
    assert main(["replay", str(request_file), "--now", "2026-11-30T12:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out) == golden.load(golden.response_file(request_file))


def test_replay_refuses_a_hook_the_server_does_not_serve(capsys: pytest.CaptureFixture[str]) -> None:
    request_file = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
    assert main(["replay", str(request_file), "--hook", "nodes/sync"]) == EXIT_BAD_CONFIGURATION
    assert capsys.readouterr().err.splitlines() == ["basemodel-hook: --hook 'nodes/sync' is not one of sync, customize, finalize, label, label-customize"]


def test_replay_into_a_pipe_closed_early_ends_quietly() -> None:
    """As ``basemodel-hook replay … | head`` does: the reader is gone before the answer."""
    request_file = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
    reader, writer = os.pipe()
    process = subprocess.Popen(
        [str(SCRIPT), "replay", str(request_file), "--now", "2026-11-30T12:00:00Z"],
        stdout=writer, stderr=subprocess.PIPE, text=True,
    )
    os.close(writer)
    os.close(reader)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert [json.loads(line)["hook"] for line in stderr.splitlines()] == ["sync"]


def test_serve_removes_the_metrics_directory_it_created(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PROMETHEUS_MULTIPROC_DIR"}
    env["TMPDIR"] = str(tmp_path)
    with serving(tmp_path / "serve.log", env, workers=1):
        assert len(list(tmp_path.glob("basemodel-hook-metrics-*"))) == 1
    assert list(tmp_path.glob("basemodel-hook-metrics-*")) == []


def test_serve_refuses_a_metrics_directory_holding_someone_elses_files(tmp_path: Path) -> None:
    (tmp_path / "counter_1.db").write_bytes(b"not the hook's")
    (tmp_path / "notes.txt").write_text("mine")
    assert "PROMETHEUS_MULTIPROC_DIR=" in serve_refusal([], {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    assert sorted(path.name for path in tmp_path.iterdir()) == ["counter_1.db", "notes.txt"]


def test_serve_clears_only_the_metric_files_of_its_own_earlier_start(tmp_path: Path) -> None:
    """A restarted container finds its emptyDir as the last run left it."""
    metrics = tmp_path / "metrics"
    with serving(tmp_path / "first.log", {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics)}, workers=1) as base:
        post(f"{base}/customize", (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes())
    assert list(metrics.glob("*.db"))
    (metrics / "notes.txt").write_text("someone's")
    with serving(tmp_path / "second.log", {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics)}, workers=1) as base:
        assert customize_count(base) == 0
    assert (metrics / "notes.txt").read_text() == "someone's"


def customize_count(server: str) -> float:
    with urllib.request.urlopen(f"{server}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(r'^basemodel_hook_requests_total\{hook="customize",outcome="ok"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_metrics_merge_every_gunicorn_worker(server: str) -> None:
    before = customize_count(server)
    body = (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes()
    for _ in range(20):
        assert post(f"{server}/customize", body)[0] == 200
    assert customize_count(server) - before == 20


@pytest.mark.parametrize("now", ["2026-11-30T12:00:00", "yesterday"])
def test_replay_refuses_a_clock_without_an_offset(now: str, capsys: pytest.CaptureFixture[str]) -> None:
    request_file = golden.FIXTURES / "sync" / "basemodel-rbac-ready-creates-job.request.json"
    assert main(["replay", str(request_file), "--now", now]) == EXIT_BAD_CONFIGURATION
    assert "RFC 3339" in capsys.readouterr().err


def test_concurrent_requests_all_get_the_same_answer(server: str) -> None:
    """A bounded burst from eight clients: every answer is a 200 and identical."""
    from concurrent.futures import ThreadPoolExecutor

    body = (golden.FIXTURES / "customize" / "clusterbasemodel-pvc.request.json").read_bytes()
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda _: post(f"{server}/customize", body), range(160)))
    assert {status for status, _ in replies} == {200}
    assert len({json.dumps(answer, sort_keys=True) for _, answer in replies}) == 1


def requests_counted(server: str, hook: str, outcome: str) -> float:
    with urllib.request.urlopen(f"{server}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(rf'^basemodel_hook_requests_total\{{hook="{hook}",outcome="{outcome}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_client_that_hangs_up_mid_body_gets_a_400_and_the_server_goes_on(server: str) -> None:
    before = requests_counted(server, "sync", "bad_request")
    host, port = server.removeprefix("http://").split(":")
    for _ in range(5):
        with socket.create_connection((host, int(port)), timeout=5) as broken:
            broken.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"parent\":")
    body = (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes()
    assert post(f"{server}/customize", body)[0] == 200
    deadline = time.monotonic() + 10
    while requests_counted(server, "sync", "bad_request") - before < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert requests_counted(server, "sync", "bad_request") - before == 5


def test_a_chunked_body_over_the_limit_gets_413(server: str) -> None:
    """No Content-Length to refuse up front: the server must count what it reads."""
    limit = 32 * 1024 * 1024
    chunk = b" " * (1024 * 1024)
    chunks = [b"{", *[chunk] * (limit // len(chunk)), b'"parent": {}}']
    connection = http.client.HTTPConnection(server.removeprefix("http://"), timeout=30)
    try:
        connection.request("POST", "/sync", body=iter(chunks), headers={"Content-Type": "application/json"}, encode_chunked=True)
        reply = connection.getresponse()
        assert (reply.status, json.loads(reply.read())) == (413, {"error": f"request body over {limit} bytes (HOOK_MAX_REQUEST_BYTES)"})
    finally:
        connection.close()


def server_processes(server: str) -> tuple[int, set[int]]:
    """The gunicorn master and its workers, from /proc (Linux)."""
    bind = f"--bind\x00{server.removeprefix('http://')}\x00".encode()
    parents = {}
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if bind in entry.read_bytes():
                stat = (entry.parent / "stat").read_text()
                parents[int(entry.parent.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    [master] = [pid for pid, parent in parents.items() if parent not in parents]
    return master, {pid for pid, parent in parents.items() if parent == master}


def test_a_killed_worker_is_replaced_and_the_server_keeps_answering(server: str) -> None:
    import signal

    if not Path("/proc/self/stat").exists():
        unavailable("finds gunicorn's workers through /proc, which this system does not have")

    _master, workers = server_processes(server)
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        _, now_serving = server_processes(server)
        if victim not in now_serving and len(now_serving) == len(workers):
            break
        time.sleep(0.1)
    else:
        pytest.fail("gunicorn did not replace the killed worker within 15 s")
    body = (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes()
    assert all(post(f"{server}/customize", body)[0] == 200 for _ in range(20))


@pytest.fixture
def openssl() -> None:
    """The openssl command, which makes the throwaway certificates."""
    if shutil.which("openssl") is None:
        unavailable("needs the openssl command to make throwaway certificates")


needs_openssl = pytest.mark.usefixtures("openssl")


def certificate(folder: Path, name: str, issuer: str | None = None, *extensions: str) -> tuple[Path, Path]:
    """A P-256 certificate and key valid for two days, self-signed or signed by ``issuer``'s."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    signed = ["-CA", str(folder / f"{issuer}.crt"), "-CAkey", str(folder / f"{issuer}.key")] if issuer else []
    command = ["openssl", "req", "-x509", *signed, "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
               "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert)]
    for extension in extensions:
        command += ["-addext", extension]
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return cert, key


def certificate_authority(folder: Path, name: str) -> Path:
    return certificate(folder, name, None, "basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign")[0]


def server_certificate(folder: Path, issuer: str) -> dict[str, str]:
    """The hook's certificate for 127.0.0.1, as HOOK_TLS_* variables."""
    cert, key = certificate(folder, "hook", issuer, "subjectAltName=IP:127.0.0.1", "basicConstraints=critical,CA:FALSE")
    return {"HOOK_TLS_CERT_FILE": str(cert), "HOOK_TLS_KEY_FILE": str(key)}


def client_context(server_ca: Path, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """What Metacontroller does: check the hook's certificate with the caBundle, present clientTLS."""
    context = ssl.create_default_context(cafile=str(server_ca))
    if client:
        context.load_cert_chain(str(client[0]), str(client[1]))
    return context


def refused_by_tls(url: str, context: ssl.SSLContext) -> bool:
    """True when the TLS layer refuses the client, so no HTTP answer is ever sent."""
    try:
        with urllib.request.urlopen(url, timeout=10, context=context):
            return False
    except urllib.error.HTTPError:
        return False
    except urllib.error.URLError as error:
        return isinstance(error.reason, (ssl.SSLError, ConnectionError))
    except (ssl.SSLError, ConnectionError):
        return True


@needs_openssl
def test_serve_speaks_tls_with_the_configured_certificate(tmp_path: Path) -> None:
    ca = certificate_authority(tmp_path, "ca")
    env = {**os.environ, **server_certificate(tmp_path, "ca")}
    with serving(tmp_path / "serve.log", env, workers=1, tls=client_context(ca)) as base:
        body = (golden.FIXTURES / "customize" / "basemodel-pvc.request.json").read_bytes()
        request = urllib.request.Request(f"{base}/customize", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10, context=client_context(ca)) as reply:
            assert reply.status == 200


@needs_openssl
def test_with_a_client_ca_serve_answers_only_clients_whose_certificate_that_ca_signed(tmp_path: Path) -> None:
    ca = certificate_authority(tmp_path, "ca")
    client_ca = certificate_authority(tmp_path, "metacontroller-ca")
    metacontroller = certificate(tmp_path, "metacontroller", "metacontroller-ca", "extendedKeyUsage=clientAuth")
    certificate_authority(tmp_path, "stranger-ca")
    stranger = certificate(tmp_path, "stranger", "stranger-ca", "extendedKeyUsage=clientAuth")
    env = {**os.environ, **server_certificate(tmp_path, "ca"), "HOOK_TLS_CLIENT_CA_FILE": str(client_ca)}
    trusted = client_context(ca, metacontroller)
    with serving(tmp_path / "serve.log", env, workers=1, tls=trusted) as base:
        assert refused_by_tls(f"{base}/readyz", client_context(ca))
        assert refused_by_tls(f"{base}/readyz", client_context(ca, stranger))
        with urllib.request.urlopen(f"{base}/readyz", timeout=10, context=trusted) as reply:
            assert reply.status == 200


def test_replay_logs_the_clock_it_was_given_not_the_real_one(capsys: pytest.CaptureFixture[str]) -> None:
    request_file = golden.FIXTURES / "sync" / "basemodel-pvc-pending.request.json"
    assert main(["replay", str(request_file), "--now", "2026-11-30T12:00:00+01:00"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["time"] == "2026-11-30T11:00:00.000Z"


@pytest.mark.parametrize("hook", golden.HOOKS)
def test_replaying_a_saved_answer_says_it_is_an_answer_and_names_its_request(hook: str, capsys: pytest.CaptureFixture[str]) -> None:
    request_file = sorted((golden.FIXTURES / hook).glob("*.request.json"))[0]
    answer_file = golden.response_file(request_file)
    assert main(["replay", str(answer_file), "--now", "2026-11-30T12:00:00Z"]) == EXIT_BAD_CONFIGURATION
    captured = capsys.readouterr()
    fields = ", ".join(sorted(golden.load(answer_file)))
    assert (captured.out, captured.err.splitlines()) == ("", [
        f"basemodel-hook: {answer_file} is a hook's answer ({fields}; no parent or object), not a request: "
        f"replay the request it answers, {request_file}"
    ])


def test_an_answer_outside_the_fixtures_is_named_for_what_it_is_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer_file = tmp_path / "copied-from-a-log.json"
    answer_file.write_text('{"labels": {"ome-basemodel-hook.ome.io/storage": "pvc"}}', encoding="utf-8")
    assert main(["replay", str(answer_file)]) == EXIT_BAD_CONFIGURATION
    assert capsys.readouterr().err == (
        f"basemodel-hook: {answer_file} is a hook's answer (labels; no parent or object), not a request: replay the request it answers\n"
    )
