"""The chart's tier: the tests that run helm are marked ``helm`` and left out of the fast
suite; a test that runs helm without the mark fails, saying so; where helm cannot be had
the tier's tests are unavailable; and the helm it builds is linked as a release is."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests import helm
from tests.helm import HELM_VERSION

REPO = Path(__file__).resolve().parents[2]


def test_the_fast_suite_leaves_the_helm_tier_out() -> None:
    addopts = re.search(r'^addopts = "(.*)"$', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert addopts is not None and "not helm" in addopts.group(1)


def test_a_test_that_runs_helm_without_the_mark_fails_saying_so() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"this test runs helm but is not marked `helm`: mark it @pytest\.mark\.helm"):
        helm.helm()


@pytest.mark.helm
def test_without_helm_and_without_go_to_build_it_the_tier_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", "")
    assert helm.built() is None
    with pytest.raises(pytest.skip.Exception, match=f"helm {HELM_VERSION} is not built in {tmp_path}/ome-basemodel-hook/helm-{HELM_VERSION}, "
                                                    "and Go is not installed to build it"):
        helm.helm()


@pytest.mark.helm
def test_helm_reports_its_release_and_the_kubernetes_of_its_client_libraries() -> None:
    """Linked as Helm's Makefile links a release; Helm 4 takes the Kubernetes version from
    its client-go (1.20, its fallback, would be below the chart's kubeVersion)."""
    result = subprocess.run([str(helm.helm()), "version", "--template", "{{.Version}} {{.KubeClientVersion}}"],
                            capture_output=True, text=True, timeout=30, check=True)
    version, kubernetes = result.stdout.split()
    assert version == HELM_VERSION
    major, minor = map(int, kubernetes.removeprefix("v").split("."))
    assert (major, minor) >= (1, 30)
