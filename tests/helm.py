"""The helm binary the chart's tests run, and the tier those tests make.

No PyPI package ships a Linux helm binary that is kept up to date, so helm is built from
its Go module, at the version pinned here, with the Go toolchain, into a cache outside the
checkout keyed by that version (``~/.cache/ome-basemodel-hook/helm-<version>/helm``, under
``$XDG_CACHE_HOME`` when set): a new machine builds it once (several minutes on two cores,
Go's own caches empty) and every later run finds it there.

It is linked as Helm's Makefile links a release: with its version (a plain ``go install``
would report ``v4.3``). Helm 4 reads the Kubernetes version ``helm template`` and ``helm
lint`` assume from the ``k8s.io/client-go`` its binary was built with (its build
information, which ``go install`` records): v0.X.Y is 1.X, the chart's ``kubeVersion``
accepts it, and no flag sets it any more (Helm 3 took it from ldflags, and fell back to
1.20 without them).

The tests that run helm are marked ``helm``, a tier of their own left out of the fast
suite, so that the README's test command neither builds helm nor skips them:
``python -m pytest -m helm`` builds it first where it is missing (``tests/conftest.py``,
saying so) and runs them; ``.ci/run`` runs that tier. Where Go is missing to build it they
are ``unavailable``. A test that runs helm without the mark fails, saying so: it would
otherwise build helm in the middle of the fast suite. ``python -m tests.helm`` builds it
if needed and prints its path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.unavailable import unavailable

HELM_VERSION = "v4.3.2"
HELM_MODULE = "helm.sh/helm/v4"
BUILD_TIMEOUT_SECONDS = 1800
MARKER = "helm"

_in_an_unmarked_test = False


def cache_directory() -> Path:
    """Where this version's binary lives: per user, outside any checkout, one folder per version."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "ome-basemodel-hook" / f"helm-{HELM_VERSION}"


def binary_path() -> Path:
    return cache_directory() / "helm"


@contextmanager
def running_test(marked: bool) -> Iterator[None]:
    """Around one test: whether it is marked ``helm``, and so may run helm."""
    global _in_an_unmarked_test
    _in_an_unmarked_test = not marked
    try:
        yield
    finally:
        _in_an_unmarked_test = False


def helm() -> Path:
    """The helm binary, for a test of the ``helm`` tier (or a fixture of the cluster tier)."""
    if _in_an_unmarked_test:
        pytest.fail(f"this test runs helm but is not marked `{MARKER}`: mark it @pytest.mark.{MARKER}, so that it runs "
                    f"in the chart's tier, which builds helm, and not in the fast suite", pytrace=False)
    binary = binary_path()
    if not binary.is_file():
        unavailable(f"helm {HELM_VERSION} is not built in {binary.parent}, and Go is not installed to build it")
    return binary


def built() -> Path | None:
    """The binary, built now if it is not there yet; None where Go is missing to build it."""
    binary = binary_path()
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
    ldflags = f"-s -w -X {HELM_MODULE}/internal/version.version={HELM_VERSION}"
    with tempfile.TemporaryDirectory(dir=binary.parent) as staging:
        subprocess.run(
            [go, "install", "-ldflags", ldflags, f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"],
            env={**env, "GOBIN": staging},
            check=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        os.replace(Path(staging) / "helm", binary)


if __name__ == "__main__":
    found = built()
    if found is None:
        sys.exit(f"Go is not installed: cannot build helm {HELM_VERSION}")
    sys.stdout.write(f"{found}\n")
