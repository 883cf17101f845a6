"""The helm binary the chart's tests (and anyone installing the chart from a test) run.

No PyPI package ships a Linux helm binary that is kept up to date, so helm is built from
its Go module, at the version pinned here, with the Go toolchain, into a cache outside the
checkout keyed by that version (``~/.cache/ome-basemodel-hook/helm-<version>/helm``, under
``$XDG_CACHE_HOME`` when set): a clean clone builds it once (several minutes on two cores,
Go's own build cache empty) and every later run finds it there.

It is linked as Helm's Makefile links a release: with its version, and with the newest
Kubernetes its client libraries know as the version ``helm template`` and ``helm lint``
assume (a plain ``go install`` would leave Helm's fallback, 1.20, which the chart's
``kubeVersion`` refuses).

``python -m tests.helm`` builds it if needed and prints its path; ``.ci/run`` does so before
the suite. A test never builds it: the suite stays fast on a machine that has not built it
yet, where the chart's tests skip, saying how to build it (in CI, which must run them, they
fail instead).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"
BUILD_TIMEOUT_SECONDS = 1800


def cache_directory() -> Path:
    """Where this version's binary lives: per user, outside any checkout, one folder per version."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "ome-basemodel-hook" / f"helm-{HELM_VERSION}"


@lru_cache(maxsize=None)
def helm() -> Path:
    """The helm binary this machine has built; a test without it skips (fails in CI)."""
    binary = cache_directory() / "helm"
    if not binary.is_file():
        message = f"helm {HELM_VERSION} is not built yet: `.venv/bin/python -m tests.helm` builds it into {binary.parent}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def built() -> Path | None:
    """The binary, built now if it is not there yet; None where Go is missing to build it."""
    binary = cache_directory() / "helm"
    if not binary.is_file():
        go = shutil.which("go")
        if go is None:
            return None
        _build(go, binary)
    return binary


def _build(go: str, binary: Path) -> None:
    """``go install`` into a folder of its own, then one rename: a build that stops half way,
    or two suites building at once, never leave a partial binary where the next run looks."""
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}
    major, minor = _kubernetes_version(go, env)
    ldflags = " ".join(
        [
            "-s -w",
            f"-X {HELM_MODULE}/internal/version.version={HELM_VERSION}",
            *(
                f"-X {HELM_MODULE}/pkg/{package}.k8sVersion{part}={value}"
                for package in ("chartutil", "lint/rules")
                for part, value in (("Major", major), ("Minor", minor))
            ),
        ]
    )
    with tempfile.TemporaryDirectory(dir=binary.parent) as staging:
        subprocess.run(
            [go, "install", "-ldflags", ldflags, f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"],
            env={**env, "GOBIN": staging},
            check=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        os.replace(Path(staging) / "helm", binary)


def _kubernetes_version(go: str, env: dict[str, str]) -> tuple[str, str]:
    """The Kubernetes version Helm's Makefile derives from its k8s.io/client-go: v0.X.Y is 1.X."""
    download = subprocess.run(
        [go, "mod", "download", "-json", f"{HELM_MODULE}@{HELM_VERSION}"],
        env=env, capture_output=True, text=True, check=True, timeout=BUILD_TIMEOUT_SECONDS,
    )
    go_mod = Path(json.loads(download.stdout)["GoMod"]).read_text(encoding="utf-8")
    match = re.search(r"^\s*k8s\.io/client-go v0\.(\d+)\.\d+", go_mod, re.M)
    assert match, f"{HELM_MODULE}@{HELM_VERSION}'s go.mod names no k8s.io/client-go v0.x"
    return "1", match.group(1)


if __name__ == "__main__":
    found = built()
    if found is None:
        sys.exit(f"Go is not installed: cannot build helm {HELM_VERSION}")
    sys.stdout.write(f"{found}\n")
