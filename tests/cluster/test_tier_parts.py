"""The cluster tier's own parts that need no cluster, in the fast suite: what its builds pin, what
the kubelet it plays reports, the model files the agent reads, the commands it takes from the docs,
and the hook proxy's holds."""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.cluster import builds, model_files
from tests.cluster.hook_proxy import Hold, HookProxy
from tests.cluster.kubelet import MESSAGE_BYTES, MESSAGE_LINES, termination_message
from tests.cluster.tier import REPO, install_commands, sample_commands
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
def upstream_hook() -> Iterator[str]:
    """A stand-in for the hook behind the proxy: answers every POST with ``{"labels": {}}``."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"labels": {}}'
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


def post(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=b'{"object": {"metadata": {"name": "m"}}}', method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("released", [True, False], ids=["released", "timed out"])
def test_a_held_answer_goes_once_its_condition_holds_and_a_hold_that_times_out_fails_naming_the_hold(released: bool) -> None:
    """A hold that never comes true must fail the story, not let the answer go: else a race
    meant to be played for certain could pass unplayed."""
    with upstream_hook() as upstream:
        proxy = HookProxy(upstream)
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
