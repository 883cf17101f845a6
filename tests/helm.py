"""The helm binaries the tests run, and the tier those tests make.

No PyPI package ships a Linux helm binary that is kept up to date, so helm is built from
its Go module, at the version pinned here, with the Go toolchain, into a cache outside the
checkout keyed by that version (``~/.cache/ome-basemodel-hook/helm-<version>/helm``, under
``$XDG_CACHE_HOME`` when set): a new machine builds it once (several minutes on two cores,
Go's own caches empty) and every later run finds it there.

Two releases are pinned. Helm 4 (``HELM_4``) is the one the chart's tests and the docs'
Helm install run. Helm 3 (``HELM_3``, the newest v3 approved here) is run by the cluster
tier only, where the two differ: an upgrade of a chart over CRDs another field manager
changed (server-side apply against Helm 3's three-way merge).

Each is linked as Helm's Makefile links a release: with its version (a plain ``go
install`` would report ``v4.3``). Helm 4 reads the Kubernetes version ``helm template``
and ``helm lint`` assume from the ``k8s.io/client-go`` its binary was built with (its
build information, which ``go install`` records): v0.X.Y is 1.X, the chart's
``kubeVersion`` accepts it, and no flag sets it any more. Helm 3 takes it from ldflags and
falls back to 1.20 without them, so its build passes the one its own ``go.mod``'s
client-go names, as its Makefile does.

The tests that run helm are marked ``helm``, a tier of their own left out of the fast
suite, so that the README's test command neither builds helm nor skips them:
``python -m pytest -m helm`` builds it first where it is missing (``tests/conftest.py``,
saying so) and runs them; ``.ci/run`` runs that tier. Where Go is missing to build it they
are ``unavailable``. A test that runs helm without the mark fails, saying so: it would
otherwise build helm in the middle of the fast suite. ``python -m tests.helm`` builds it
if needed and prints its path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.unavailable import unavailable

BUILD_TIMEOUT_SECONDS = 1800
MARKER = "helm"


@dataclass(frozen=True)
class Release:
    """One pinned helm: its Go module and version."""

    module: str
    version: str

    @property
    def major(self) -> int:
        return int(self.version.removeprefix("v").split(".")[0])

    def cache_directory(self) -> Path:
        """Where this version's binary lives: per user, outside any checkout, one folder per version."""
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return root / "ome-basemodel-hook" / f"helm-{self.version}"

    def binary_path(self) -> Path:
        return self.cache_directory() / "helm"

    def built(self) -> Path | None:
        """The binary, built now if it is not there yet; None where Go is missing to build it."""
        binary = self.binary_path()
        if not binary.is_file():
            go = shutil.which("go")
            if go is None:
                return None
            self._build(go, binary)
        return binary

    def _build(self, go: str, binary: Path) -> None:
        """``go install`` into a folder of its own, then one rename: a build that stops half way,
        or two suites building at once, never leave a partial binary where the next run looks."""
        binary.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}
        ldflags = " ".join(["-s -w", f"-X {self.module}/internal/version.version={self.version}", *self._kubernetes_ldflags(go, env)])
        with tempfile.TemporaryDirectory(dir=binary.parent) as staging:
            subprocess.run(
                [go, "install", "-ldflags", ldflags, f"{self.module}/cmd/helm@{self.version}"],
                env={**env, "GOBIN": staging},
                check=True,
                timeout=BUILD_TIMEOUT_SECONDS,
            )
            os.replace(Path(staging) / "helm", binary)

    def _kubernetes_ldflags(self, go: str, env: dict[str, str]) -> list[str]:
        """Helm 3's Kubernetes version for ``template`` and ``lint``, as its Makefile derives it
        from its k8s.io/client-go (v0.X.Y is 1.X); none for Helm 4, which reads its build information."""
        if self.major >= 4:
            return []
        download = subprocess.run([go, "mod", "download", "-json", f"{self.module}@{self.version}"],
                                  env=env, capture_output=True, text=True, check=True, timeout=BUILD_TIMEOUT_SECONDS)
        go_mod = Path(json.loads(download.stdout)["GoMod"]).read_text(encoding="utf-8")
        match = re.search(r"^\s*k8s\.io/client-go v0\.(\d+)\.\d+", go_mod, re.M)
        assert match, f"{self.module}@{self.version}'s go.mod names no k8s.io/client-go v0.x"
        return [f"-X {self.module}/pkg/{package}.k8sVersion{part}={value}"
                for package in ("chartutil", "lint/rules") for part, value in (("Major", "1"), ("Minor", match.group(1)))]


HELM_4 = Release("helm.sh/helm/v4", "v4.3.2")
HELM_3 = Release("helm.sh/helm/v3", "v3.21.4")
HELM_VERSION = HELM_4.version

_in_an_unmarked_test = False


def cache_directory() -> Path:
    """Helm 4's cache folder."""
    return HELM_4.cache_directory()


def binary_path() -> Path:
    return HELM_4.binary_path()


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
    """Helm 4, for a test of the ``helm`` tier (or a fixture of the cluster tier)."""
    if _in_an_unmarked_test:
        pytest.fail(f"this test runs helm but is not marked `{MARKER}`: mark it @pytest.mark.{MARKER}, so that it runs "
                    f"in the chart's tier, which builds helm, and not in the fast suite", pytrace=False)
    binary = binary_path()
    if not binary.is_file():
        unavailable(f"helm {HELM_VERSION} is not built in {binary.parent}, and Go is not installed to build it")
    return binary


def built() -> Path | None:
    """Helm 4, built now if it is not there yet; None where Go is missing to build it."""
    return HELM_4.built()


if __name__ == "__main__":
    found = built()
    if found is None:
        sys.exit(f"Go is not installed: cannot build helm {HELM_VERSION}")
    sys.stdout.write(f"{found}\n")
