"""The release workflow publishes the chart beside the image: packaged by the helm the tests
ran, after the image is pushed, as an OCI artifact of the release's version under the
image's owner. The packaging step is run here as the runner runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import __version__
from tests import docs
from tests.chart import CHART
from tests.helm import HELM_VERSION, helm
from tests.workflows import REPO, load

RELEASE = load("release.yaml")
WORKFLOW, JOBS = RELEASE.document, RELEASE.jobs


def step_using(job: str, action: str) -> dict[str, Any]:
    return RELEASE.step_using(job, action)


def step_named(name: str) -> dict[str, Any]:
    return RELEASE.step_named("image", name)


def test_the_chart_is_pushed_beside_the_image_after_it_by_the_helm_the_tests_ran() -> None:
    steps = JOBS["image"]["steps"]
    image = steps.index(step_using("image", "docker/build-push-action"))
    helm_setup = step_using("image", "azure/setup-helm")
    assert helm_setup["with"] == {"version": HELM_VERSION}
    package, push = step_named("Package the chart"), step_named("Push the chart beside the image")
    assert image < steps.index(helm_setup) < steps.index(package) < steps.index(push)
    owner = WORKFLOW["env"]["IMAGE"].rsplit("/", 1)[0]
    assert WORKFLOW["env"]["CHARTS"] == f"{owner}/charts"
    assert push["env"]["VERSION"] == "${{ steps.version.outputs.version }}"
    assert 'helm push "dist/ome-basemodel-hook-$VERSION.tgz" "oci://$CHARTS"' in push["run"]
    assert "--password-stdin" in push["run"] and "${{" not in push["run"], "the token goes in by the environment, never the command line"


@pytest.mark.helm
def test_the_packaging_step_makes_the_chart_of_this_version_with_its_linked_files_inside(tmp_path: Path) -> None:
    """`helm package` follows the chart's links into metacontroller/: the package holds the files themselves."""
    checkout = tmp_path / "checkout"
    for folder in ("charts", "metacontroller"):
        shutil.copytree(REPO / folder, checkout / folder, symlinks=True)
    env = {**os.environ, "PATH": f"{helm().parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step_named("Package the chart")["run"]],
                            cwd=checkout, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with tarfile.open(checkout / "dist" / f"ome-basemodel-hook-{__version__}.tgz") as package:
        members = {member.name: member for member in package.getmembers()}
        chart = yaml.safe_load(package.extractfile(members["ome-basemodel-hook/Chart.yaml"]).read())  # type: ignore[union-attr]
        assert (chart["version"], chart["appVersion"]) == (__version__, __version__)
        for linked in (CHART / "files").rglob("*"):
            if linked.is_symlink():
                member = members[f"ome-basemodel-hook/{linked.relative_to(CHART).as_posix()}"]
                assert member.isfile()
                assert package.extractfile(member).read() == linked.read_bytes()  # type: ignore[union-attr]


def test_the_docs_pull_the_chart_the_workflow_pushes_at_this_version() -> None:
    pulls = re.findall(r"^helm pull oci://(\S+) --version (\S+) --untar$", docs.text(), re.M)
    assert pulls == [(f"{WORKFLOW['env']['CHARTS']}/{CHART.name}", __version__)]
    assert f"oci://{WORKFLOW['env']['CHARTS']}/{CHART.name}" in docs.README.read_text(encoding="utf-8")
