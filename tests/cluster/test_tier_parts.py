"""The cluster tier's own parts that need no cluster, in the fast suite: what its builds pin, what
the kubelet it plays reports, the model files the agent reads, the commands it takes from the docs,
the hook's replicas and the proxy in front of them (its turns, its holds, a dead replica), and
what a fault story's kill means to a process and to the simulated Metacontroller."""

from __future__ import annotations

import http.client
import json
import math
import re
import shutil
import struct
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from hooks.names import is_dns_subdomain
from tests.cluster import builds, hook_server, model_files
from tests.cluster.api_server_cluster import ApiServerCluster, Killed, reaching
from tests.cluster.hook_proxy import Hold, HookProxy
from tests.cluster.kubelet import MESSAGE_BYTES, MESSAGE_LINES, termination_message, transient
from tests.cluster.processes import Process, free_port, wait_until
from tests.cluster.real_time import http_hook
from tests.cluster.tier import REPO, VOLUME_NAME_LIMIT, install_commands, sample_commands, volume_name
from tests.metacontroller.cluster import ApiError
from tests.metacontroller.webhook import HookDown
from tests.unavailable import unavailable


def test_every_kubernetes_staging_module_is_pinned_to_the_release_of_kubernetes_itself() -> None:
    go_mod = (builds.KUBERNETES.source / "go.mod").read_text(encoding="utf-8")
    major, minor, patch = builds.KUBERNETES.version.lstrip("v").split(".")
    pinned = re.findall(r"^\t(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", go_mod, re.M)
    assert len(pinned) >= 30
    assert {(source == target, version) for source, target, version in pinned} == {(True, f"v0.{minor}.{patch}")}


def test_each_build_is_cached_by_the_version_its_module_requires() -> None:
    assert [target.directory.name for target in builds.BUILDS] == ["etcd-v3.6.16", "kubernetes-v1.35.4", "ome-v0.1.5"]
    assert builds.COMPARISON_BUILDS == (*builds.BUILDS, builds.OME_PVC_BACKEND)
    assert builds.OME_PVC_BACKEND.directory.name == "ome-pvc-backend-v1.2.2"
    assert all(not target.directory.is_relative_to(REPO) for target in builds.COMPARISON_BUILDS)


def test_a_failed_containers_message_is_the_tail_of_its_log_as_the_kubelet_cuts_it() -> None:
    log = "".join(f"line {number}\n" for number in range(200))
    message = termination_message(log)
    assert message.splitlines()[-1] == "line 199" and len(message.splitlines()) == MESSAGE_LINES
    long = "x" * 5000 + "\nthe cause\n"
    assert termination_message(long).endswith("the cause\n") and len(termination_message(long).encode()) == MESSAGE_BYTES


def test_the_model_files_declare_llama_31_8b_exactly_in_their_shards_headers(tmp_path: Path) -> None:
    model_files.write_model(tmp_path)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text(encoding="utf-8"))
    total = 0
    for shard in set(index["weight_map"].values()):
        data = (tmp_path / shard).read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        total += sum(math.prod(tensor["shape"]) for name, tensor in header.items() if name != "__metadata__")
    assert total == model_files.PARAMETERS
    assert json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))["model_type"] == "llama"
    with pytest.raises(json.JSONDecodeError):
        json.loads(model_files.BROKEN_CONFIG)


def test_the_docs_apply_commands_name_the_checkouts_install_then_its_samples() -> None:
    assert [command[-1] for command in install_commands()] == ["metacontroller/"]
    assert [command[-1] for command in sample_commands()] == ["metacontroller/samples/basemodel-pvc.yaml",
                                                             "metacontroller/samples/clusterbasemodel-pvc.yaml"]
    assert all((REPO / command[-1]).exists() for command in install_commands() + sample_commands())


def _empty_module_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A Go module cache as a new machine has it: empty, and writable so pytest can remove it."""
    if shutil.which("go") is None:
        unavailable("needs the Go toolchain, which builds the cluster tier")
    cache = tmp_path / "gomodcache"
    monkeypatch.setenv("GOMODCACHE", str(cache))
    monkeypatch.setenv("GOFLAGS", "-modcacherw")
    return cache


def test_omes_module_is_downloaded_on_a_machine_that_never_fetched_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = _empty_module_cache(monkeypatch, tmp_path)
    directory = builds.module_directory(builds.OME)
    assert directory.is_relative_to(cache)
    assert (directory / "pkg" / "xet" / "xet.h").is_file()


def test_ome_v1_2_2_is_found_through_its_replace_under_the_path_the_proxy_serves() -> None:
    """Its go.mod says sigs.k8s.io/ome, which no proxy serves; the build's replace names
    github.com/sgl-project/ome, where its cgo header is too."""
    if shutil.which("go") is None:
        pytest.skip("needs the Go toolchain, which builds the cluster tier")
    directory = builds.module_directory(builds.OME_PVC_BACKEND)
    assert directory.parts[-2:] == ("sgl-project", "ome@v1.2.2")
    assert re.search(r"^module sigs\.k8s\.io/ome$", (directory / "go.mod").read_text(encoding="utf-8"), re.M)
    assert (directory / "pkg" / "xet" / "xet.h").is_file()


def test_a_module_that_cannot_be_downloaded_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _empty_module_cache(monkeypatch, tmp_path)
    monkeypatch.setenv("GOPROXY", "off")
    with pytest.raises(RuntimeError, match=r"could not download Go module github\.com/sgl-project/ome .*GOPROXY=off"):
        builds.module_directory(builds.OME)


@contextmanager
def upstream_hook(answer: bytes = b'{"labels": {}}') -> Iterator[str]:
    """A stand-in for a hook replica behind the proxy: answers every POST with ``answer``."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = answer
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, timeout: float = 10) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=b'{"object": {"metadata": {"name": "m"}}}', method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("released", [True, False], ids=["released", "timed out"])
def test_a_held_answer_goes_once_its_condition_holds_and_a_hold_that_times_out_fails_naming_the_hold(released: bool) -> None:
    """A hold that never comes true must fail the story, not let the answer go: else a race
    meant to be played for certain could pass unplayed."""
    with upstream_hook() as upstream:
        proxy = HookProxy(lambda: [upstream])
        try:
            proxy.holds.append(Hold("the test's answer about m", lambda path, body: lambda: released, seconds=0.2))
            status, answer = post(f"{proxy.url}/label")
        finally:
            proxy.stop()
    if released:
        assert (status, answer, proxy.errors) == (200, b'{"labels": {}}', [])
        proxy.check()
        return
    assert status == 502
    expected = "the hold on the test's answer about m timed out: its condition was still false after 0.2 s"
    assert proxy.errors == [f"/label: HoldTimedOut: {expected}"]
    with pytest.raises(RuntimeError, match="the hold on the test's answer about m timed out"):
        proxy.check()


def test_the_service_sends_each_call_to_the_next_replica_and_a_call_whose_replica_died_ends_unanswered() -> None:
    """As a Service spreads connections over its endpoints; a connection to a pod that died
    ends without an answer, which Metacontroller reports as an http error and retries."""
    with upstream_hook(b'{"labels": {"replica": "a"}}') as first, upstream_hook(b'{"labels": {"replica": "b"}}') as second:
        endpoints = [first, second]
        proxy = HookProxy(lambda: endpoints)
        try:
            answers = [json.loads(post(f"{proxy.url}/label")[1])["labels"]["replica"] for _ in range(4)]
            endpoints = [f"http://127.0.0.1:{free_port()}"]
            with pytest.raises((http.client.RemoteDisconnected, urllib.error.URLError, ConnectionResetError)):
                post(f"{proxy.url}/label")
        finally:
            proxy.stop()
    assert sorted(answers) == ["a", "a", "b", "b"] and answers[0] != answers[1]
    assert proxy.count("label", ("None", "", "m")) == 5 and proxy.count_dropped(("None", "", "m")) == 1
    assert proxy.errors == []


def test_an_answer_held_past_its_callers_timeout_is_kept_as_one_that_never_arrived() -> None:
    with upstream_hook() as upstream:
        proxy = HookProxy(lambda: [upstream])
        released = time.monotonic() + 1.0
        try:
            proxy.holds.append(Hold("the answer, late", lambda path, body: lambda: time.monotonic() > released, seconds=5))
            with pytest.raises((TimeoutError, urllib.error.URLError)):
                post(f"{proxy.url}/label", timeout=0.3)
            wait_until(lambda: len(proxy.exchanges) == 1, 5, "the late exchange")
        finally:
            proxy.stop()
    (late,) = proxy.exchanges
    assert (late.path, late.status, late.answer, late.delivered) == ("/label", 200, b'{"labels": {}}', False)
    assert proxy.errors == []


def test_the_deployments_replicas_and_settings_are_the_installs() -> None:
    replicas, settings = hook_server.deployment()
    assert replicas == 2 and settings == {"HOOK_WORKERS": "3"}


def test_a_killed_process_is_down_on_purpose_until_it_is_started_again(tmp_path: Path) -> None:
    process = Process("sleeper", ["sleep", "60"], tmp_path / "sleeper.log")
    try:
        process.kill()
        assert (process.running, process.killed, process.popen.returncode) == (False, True, -9)
        process.resume()
        process.start()
        assert (process.running, process.killed) == (True, False)
    finally:
        process.stop()


def test_a_request_the_api_server_never_answers_fails_the_simulated_sync_as_client_go_reports_it() -> None:
    def refused() -> None:
        raise ConnectionRefusedError("connection refused")
    with pytest.raises(ApiError) as failed:
        reaching(refused)
    assert failed.value.code == 503 and "ConnectionRefusedError" in str(failed.value)


def test_a_killed_simulated_metacontroller_reaches_nothing_any_more() -> None:
    cluster = ApiServerCluster(None, "someone", [])  # type: ignore[arg-type]
    cluster.check_alive()
    cluster.kill()
    with pytest.raises(Killed):
        cluster.check_alive()
    with pytest.raises(Killed):
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


def test_a_hook_that_does_not_answer_is_an_http_error_for_metacontroller() -> None:
    call = http_hook(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(HookDown, match="/sync hook: http error: "):
        call("/sync", {})


def test_the_kubelet_waits_out_an_api_server_that_does_not_answer_and_fails_on_a_refusal() -> None:
    assert transient(ConnectionRefusedError()) and transient(http.client.RemoteDisconnected())
    assert transient(ApiError(503, "etcd unreachable")) and transient(ApiError(429, "busy"))
    assert not transient(ApiError(403, "forbidden")) and not transient(ApiError(422, "invalid"))
    assert transient(ApiError(403, "forbidden"), authorizer_ready=False)


def test_a_claim_named_at_its_limit_gets_a_volume_name_within_the_limit() -> None:
    assert volume_name("models", "model-storage") == "models-model-storage"
    long = volume_name("n" * 63, "c" * 253)
    assert len(long) == VOLUME_NAME_LIMIT and is_dns_subdomain(long)
    assert long != volume_name("n" * 63, "c" * 252 + "d")
