"""OME's ``ome-crd`` chart upgraded over the hook's optional CRDs, with Helm 4 and with Helm 3,
as docs/install.md's "The CRDs and OME's charts" tells it: the chart installed as OME's README
installs it, the hook's CRDs applied with the page's command, then the chart upgraded.

Helm 3 merges the chart's old and new manifests with the live object and takes the status
schema back without a word; Helm 4 applies server-side as field manager ``helm``, meets the
fields the page's apply (field manager ``kubectl``) took, and stops until told
``--force-conflicts``. Each story runs on a control plane of its own (etcd, kube-apiserver,
kube-controller-manager: nothing else takes part), so that the tier's world keeps its CRDs.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests import helm
from tests.cluster import builds, ome_manager
from tests.cluster.control_plane import ADMIN, ControlPlane
from tests.cluster.tier import INSTALL_DOC, REPO, section

pytestmark = pytest.mark.cluster

MODEL_CRDS = ("basemodels.ome.io", "clusterbasemodels.ome.io")
OME_STATUS = ["lifecycle", "nodesFailed", "nodesReady", "state"]
"""What OME's CRDs keep of a model's status."""
HOOK_STATUS = sorted([*OME_STATUS, "conditions", "metadataExtraction", "observedGeneration", "storage"])
"""What the hook's CRDs keep of it."""
OME_CHART_REFERENCE = "oci://ghcr.io/moirai-internal/charts/ome-crd"
"""The chart as OME's README names it; the story installs the same chart from OME's module."""
OME_README_COMMAND = ["helm", "upgrade", "--install", "ome-crd", OME_CHART_REFERENCE, "--namespace", "ome", "--create-namespace"]
"""How OME's README installs and upgrades its CRDs."""
CONFLICT = 'conflict with "kubectl": .spec.versions'
"""What Helm 4 says, as the page quotes it."""


def page() -> str:
    return section(INSTALL_DOC, "## The CRDs and OME's charts")


def commands(starting: str) -> list[list[str]]:
    """The page's shell lines that start with ``starting``, split as a shell would."""
    return [shlex.split(line.strip()) for line in page().splitlines() if line.strip().startswith(starting)]


class Cluster:
    """A bare control plane, OME's ``ome-crd`` chart as a folder to install and upgrade, and a
    helm of one release, run as the cluster admin types the page's commands, from the checkout."""

    def __init__(self, release: helm.Release, workdir: Path) -> None:
        binary = release.built()
        if binary is None:
            pytest.fail(f"helm {release.version} cannot be built: Go is not installed")
        self.helm_binary = binary
        self.plane = ControlPlane(workdir / "plane")
        self.chart = workdir / "ome-crd"
        shutil.copytree(ome_manager.module_directory() / "charts" / "ome-crd", self.chart)
        self.chart.chmod(0o755)

    def helm(self, command: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        """A page's ``helm`` command with OME's published chart replaced by the module's copy."""
        assert command[0] == "helm"
        arguments = [str(self.chart) if part == OME_CHART_REFERENCE else part for part in command[1:]]
        result = subprocess.run([str(self.helm_binary), "--kubeconfig", str(self.plane.kubeconfig(ADMIN)), *arguments],
                                cwd=REPO, capture_output=True, text=True, timeout=180)
        if check and result.returncode != 0:
            raise AssertionError(f"{shlex.join(command)} failed: {result.stderr}")
        return result

    def kubectl(self, command: list[str]) -> None:
        assert command[0] == "kubectl"
        subprocess.run([str(builds.KUBERNETES.binary("kubectl")), "--kubeconfig", str(self.plane.kubeconfig(ADMIN)),
                        *command[1:]], cwd=REPO, capture_output=True, text=True, timeout=120, check=True)

    def next_chart_version(self) -> None:
        """The chart as OME's next release ships it: another version, the same CRDs."""
        chart_file = self.chart / "Chart.yaml"
        lines = chart_file.read_text(encoding="utf-8").splitlines()
        chart_file.write_text("\n".join(f"{line}-next" if line.startswith("version:") else line for line in lines) + "\n",
                              encoding="utf-8")

    def status_kept(self) -> dict[str, list[str]]:
        """Per model CRD, the status fields its schema keeps."""
        found: dict[str, list[str]] = {}
        for name in MODEL_CRDS:
            crd: dict[str, Any] = json.loads(self.plane.kubectl("get", "customresourcedefinition", name, "--output=json").stdout)
            found[name] = sorted(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])
        return found


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """OME's chart installed as its README says, then the hook's CRDs applied as the page says;
    the helm release is the test's parameter."""
    for build in (builds.ETCD, builds.KUBERNETES):
        builds.build(build)
    workdir = Path(tempfile.mkdtemp(prefix="ome-basemodel-hook-crd-chart-"))
    workdir.chmod(0o755)
    built = Cluster(request.param, workdir)
    built.plane.start()
    try:
        built.helm(OME_README_COMMAND)
        assert built.status_kept() == {name: OME_STATUS for name in MODEL_CRDS}
        (apply,) = commands("kubectl apply --server-side --force-conflicts -k metacontroller/crds/")
        built.kubectl(apply)
        assert built.status_kept() == {name: HOOK_STATUS for name in MODEL_CRDS}
        built.next_chart_version()
        yield built
    finally:
        built.plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("cluster", [helm.HELM_3], indirect=True, ids=["Helm 3"])
def test_an_ome_crd_upgrade_with_helm_3_takes_the_status_schema_back_without_a_word(cluster: Cluster) -> None:
    result = cluster.helm(OME_README_COMMAND)
    assert "has been upgraded" in result.stdout and result.stderr == ""
    assert cluster.status_kept() == {name: OME_STATUS for name in MODEL_CRDS}


@pytest.mark.parametrize("cluster", [helm.HELM_4], indirect=True, ids=["Helm 4"])
def test_an_ome_crd_upgrade_with_helm_4_stops_on_the_conflict_the_page_quotes_and_force_conflicts_takes_the_schema_back(
        cluster: Cluster) -> None:
    stopped = cluster.helm(OME_README_COMMAND, check=False)
    assert stopped.returncode != 0 and CONFLICT in stopped.stderr and CONFLICT in page(), stopped.stderr
    assert cluster.status_kept() == {name: HOOK_STATUS for name in MODEL_CRDS}, "a stopped upgrade changes nothing"
    assert commands("helm upgrade --install ome-crd") == [[*OME_README_COMMAND, "--force-conflicts"]]
    cluster.helm([*OME_README_COMMAND, "--force-conflicts"])
    assert cluster.status_kept() == {name: OME_STATUS for name in MODEL_CRDS}
