"""The cluster tier's binaries, built from published Go modules into a cache outside the checkout.

Each build is a small Go module under ``tests/cluster/<name>/`` that pins one upstream
release; its binaries land in ``~/.cache/ome-basemodel-hook/<name>-<version>/`` (or under
``$XDG_CACHE_HOME``), keyed by the version its ``go.mod`` requires, so a later run on the
same machine (a developer's or ``.ci/run``'s) reuses them and a version bump builds anew.
A build goes to a temporary folder renamed into place when complete, under a file lock,
so an interrupted or concurrent build never leaves half a cache.

``python -m tests.cluster.builds`` builds whatever is missing and prints what each build
cost, and the two helm releases the tier runs (``tests/helm.py``); the tier's fixtures do the
same before they start anything. ``--comparison`` adds OME v1.2.2 (``OME_PVC_BACKEND``), which
only the comparison with OME's own PVC backend needs and ``.ci/run`` leaves out
(docs/development.md says why).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests import helm

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ome-basemodel-hook"
BUILD_TIMEOUT_SECONDS = 3 * 3600
STAMP = "built"
"""Written last into a complete build: the seconds it took, which docs/development.md quotes."""


@dataclass(frozen=True)
class Build:
    """One module's binaries: ``binaries`` maps a binary's name to its Go package."""

    name: str
    module: str
    binaries: dict[str, str]
    cgo_stand_in: str | None = None
    """With cgo: the C file, under tests/cluster/, that stands in for the library cgo links."""
    unverified: tuple[str, ...] = ()
    """Modules the checksum database does not answer for here; the committed go.sum pins them."""
    version_ldflags: tuple[str, ...] = field(default=())

    @property
    def source(self) -> Path:
        return HERE / self.name

    @property
    def version(self) -> str:
        """The version of ``module`` that the build's go.mod requires."""
        text = (self.source / "go.mod").read_text(encoding="utf-8")
        found = re.search(rf"^(?:require )?\s*{re.escape(self.module)} (v\S+)", text, re.M)
        if found is None:
            raise RuntimeError(f"{self.source / 'go.mod'} requires no version of {self.module}")
        return found.group(1)

    @property
    def directory(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"

    def binary(self, name: str) -> Path:
        return self.directory / name

    def is_built(self) -> bool:
        return (self.directory / STAMP).is_file()


KUBERNETES = Build(
    name="kubernetes",
    module="k8s.io/kubernetes",
    binaries={name: f"k8s.io/kubernetes/cmd/{name}" for name in ("kube-apiserver", "kube-controller-manager", "kubectl")},
    # What Kubernetes' own build stamps (hack/lib/version.sh), so `kubectl version` and
    # discovery report the release rather than v0.0.0-master.
    version_ldflags=("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"),
)
ETCD = Build(name="etcd", module="go.etcd.io/etcd/server/v3", binaries={"etcd": "go.etcd.io/etcd/server/v3"})
# What OME's two builds share: the stand-in for libxet (one header, pkg/xet/xet.h, in both
# releases) and the modules the checksum database does not answer for here.
XET_STAND_IN = "ome/xet_unavailable.c"
OME_UNVERIFIED = ("github.com/sgl-project/ome", "sigs.k8s.io/kueue", "sigs.k8s.io/scheduler-plugins")
OME = Build(
    name="ome",
    module="github.com/sgl-project/ome",
    binaries={"manager": "github.com/sgl-project/ome/cmd/manager", "ome-agent": "github.com/sgl-project/ome/cmd/ome-agent"},
    cgo_stand_in=XET_STAND_IN,
    unverified=OME_UNVERIFIED,
)
# OME v1.2.2, with OME's own PVC backend: module sigs.k8s.io/ome, replaced in its go.mod by
# the path the Go proxy serves it under. Only the comparison with OME's backend needs it.
OME_PVC_BACKEND = Build(
    name="ome-pvc-backend",
    module="sigs.k8s.io/ome",
    binaries={"manager": "sigs.k8s.io/ome/cmd/manager", "ome-agent": "sigs.k8s.io/ome/cmd/ome-agent"},
    cgo_stand_in=XET_STAND_IN,
    unverified=OME_UNVERIFIED,
)
BUILDS = (ETCD, KUBERNETES, OME)
"""What the cluster tier needs, and ``.ci/run`` builds."""
COMPARISON_BUILDS = (*BUILDS, OME_PVC_BACKEND)
"""What the comparison with OME's own PVC backend needs (``--comparison``)."""


def _go_environment(build: Build, workdir: Path | None = None) -> dict[str, str]:
    """The Go tool's environment for ``build``; with ``workdir``, cgo links the libraries built there."""
    environment = {**os.environ, "CGO_ENABLED": "1" if build.cgo_stand_in else "0"}
    if build.unverified:
        environment["GONOSUMDB"] = ",".join(build.unverified)
    if build.cgo_stand_in and workdir is not None:
        environment["CGO_LDFLAGS"] = f"-L{workdir / 'lib'}"
    return environment


def _ldflags(build: Build) -> str:
    flags = ["-s", "-w"]
    major, minor = build.version.lstrip("v").split(".")[:2]
    for package in build.version_ldflags:
        flags += [f"-X {package}.gitVersion={build.version}", f"-X {package}.gitMajor={major}",
                  f"-X {package}.gitMinor={minor}"]
    return " ".join(flags)


def module_directory(build: Build) -> Path:
    """Where the Go tool unpacked the upstream module, downloaded first.

    ``go mod download -json`` fetches the module the build's go.mod requires and names its
    folder; ``go list -m -f {{.Dir}}`` would print an empty line for a module not yet
    downloaded, which only a machine that had downloaded it before never sees.
    """
    found = subprocess.run(["go", "mod", "download", "-json", build.module], cwd=build.source,
                           env=_go_environment(build), check=False, capture_output=True, text=True, timeout=600)
    try:
        answer = json.loads(found.stdout)
    except json.JSONDecodeError:
        answer = {}
    directory = answer.get("Dir") or ""
    if found.returncode != 0 or not directory or not Path(directory).is_dir():
        cause = answer.get("Error") or found.stderr.strip() or found.stdout.strip() or "no folder named"
        raise RuntimeError(f"could not download Go module {build.module} (required by {build.source / 'go.mod'}): {cause}")
    return Path(directory)


def _xet_stand_in(build: Build, workdir: Path) -> None:
    """``libxet.a`` from the build's stand-in, compiled against the module's own header."""
    assert build.cgo_stand_in is not None
    header = module_directory(build) / "pkg" / "xet"
    (workdir / "lib").mkdir()
    objects = workdir / "lib" / "xet_unavailable.o"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", f"-I{header}", "-c",
                    str(HERE / build.cgo_stand_in), "-o", str(objects)], check=True, timeout=120)
    subprocess.run(["ar", "rcs", str(workdir / "lib" / "libxet.a"), str(objects)], check=True, timeout=60)


def build(target: Build, log: Path | None = None) -> float:
    """Build ``target``'s binaries unless they are cached; the seconds it took (0 when cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{target.name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_built():
            return 0.0
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=CACHE))
        try:
            environment = _go_environment(target, workdir)
            if target.cgo_stand_in:
                _xet_stand_in(target, workdir)
            output = open(log, "a", encoding="utf-8") if log else None
            try:
                for name, package in target.binaries.items():
                    subprocess.run(["go", "build", "-trimpath", "-tags", "providerless", "-ldflags", _ldflags(target),
                                    "-o", str(workdir / name), package],
                                   cwd=target.source, env=environment, check=True, timeout=BUILD_TIMEOUT_SECONDS,
                                   stdout=output, stderr=subprocess.STDOUT if output else None)
            finally:
                if output:
                    output.close()
            seconds = time.monotonic() - started
            (workdir / STAMP).write_text(f"{seconds:.0f}\n", encoding="utf-8")
            shutil.rmtree(target.directory, ignore_errors=True)
            workdir.rename(target.directory)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return seconds


def build_all(log: Path | None = None, targets: tuple[Build, ...] = BUILDS) -> dict[str, float]:
    """Every build of ``targets``, in the order the control plane needs them; seconds spent on each."""
    return {target.name: build(target, log) for target in targets}


def main(argv: list[str]) -> int:
    """Build what is missing: the tier's binaries, and with ``--comparison`` OME v1.2.2's too."""
    if argv not in ([], ["--comparison"]):
        sys.stderr.write("usage: python -m tests.cluster.builds [--comparison]\n")
        return 2
    for target in COMPARISON_BUILDS if argv else BUILDS:
        cached = target.is_built()
        seconds = build(target)
        recorded = (target.directory / STAMP).read_text(encoding="utf-8").strip()
        state = "cached" if cached else f"built in {seconds:.0f} s"
        sys.stdout.write(f"{target.name} {target.version}: {state} (cold build took {recorded} s) in {target.directory}\n")
    for release in (helm.HELM_4, helm.HELM_3):
        cached = release.binary_path().is_file()
        started = time.monotonic()
        if release.built() is None:
            sys.exit(f"Go is not installed: cannot build helm {release.version}")
        state = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
        sys.stdout.write(f"helm {release.version}: {state} in {release.cache_directory()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
