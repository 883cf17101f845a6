"""The release workflow: actionlint finds nothing, it runs CI's workflow before it publishes,
it publishes only the tag of the package's version, and it pushes the image the manifests pull.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import __version__
from tests import dockerfile
from tests.workflows import REPO, actionlint, load

RELEASE = load("release.yaml")
WORKFLOW = RELEASE.document
JOBS = RELEASE.jobs


def step_using(job: str, action: str) -> dict[str, Any]:
    return RELEASE.step_using(job, action)


def test_workflow_has_no_actionlint_finding() -> None:
    assert actionlint(RELEASE) == (0, "", "")


def test_workflow_runs_on_a_pushed_version_tag_only() -> None:
    assert RELEASE.triggers == {"push": {"tags": ["v*"]}}


def test_every_action_is_pinned_to_a_major_version_or_a_commit() -> None:
    for job in JOBS.values():
        for step in job.get("steps", []):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})", step["uses"]), step["uses"]


def test_the_tests_are_cis_own_workflow_and_the_image_job_runs_the_image_python() -> None:
    assert JOBS["test"] == {"uses": "./.github/workflows/ci.yaml"}
    assert step_using("image", "actions/setup-python")["with"] == {"python-version": dockerfile.python_version()}


def test_image_is_published_only_after_the_tests_and_with_only_the_rights_it_needs() -> None:
    assert JOBS["image"]["needs"] == "test"
    assert WORKFLOW["permissions"] == {"contents": "read"}
    assert JOBS["image"]["permissions"] == {"contents": "read", "packages": "write"}
    assert step_using("image", "docker/login-action")["with"] == {
        "registry": "ghcr.io", "username": "${{ github.actor }}", "password": "${{ secrets.GITHUB_TOKEN }}"
    }


def run_tag_check(tag: str, output: Path) -> subprocess.CompletedProcess[str]:
    """The image job's tag check, run here as the runner runs a step: bash -e -o pipefail, from the checkout."""
    (step,) = [step for step in JOBS["image"]["steps"] if step.get("id") == "version"]
    assert step["env"] == {"TAG": "${{ github.ref_name }}"}
    env = {**os.environ, "TAG": tag, "GITHUB_OUTPUT": str(output)}
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)


def test_tag_of_the_package_version_passes_the_check_and_names_the_version(tmp_path: Path) -> None:
    result = run_tag_check(f"v{__version__}", tmp_path / "output")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "output").read_text(encoding="utf-8") == f"version={__version__}\n"


@pytest.mark.parametrize("tag", [__version__, f"v{__version__}.1", f"v{__version__}-rc1", "v0.0.0-never", "latest"])
def test_tag_other_than_v_and_the_package_version_stops_the_release(tag: str, tmp_path: Path) -> None:
    result = run_tag_check(tag, tmp_path / "output")
    assert result.returncode == 1
    assert f"::error::the tag {tag} is not v{__version__}" in result.stdout
    assert not (tmp_path / "output").exists()


def test_workflow_pushes_exactly_the_image_the_kustomization_pulls_for_both_platforms() -> None:
    (image,) = yaml.safe_load((REPO / "metacontroller" / "kustomization.yaml").read_text(encoding="utf-8"))["images"]
    assert WORKFLOW["env"]["IMAGE"] == image["name"]
    build = step_using("image", "docker/build-push-action")["with"]
    assert build["tags"] == "${{ env.IMAGE }}:${{ steps.version.outputs.version }}"
    assert build["push"] is True
    assert build["context"] == "." and "file" not in build, "the Dockerfile at the root, as the tests read it"
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action"):
        step_using("image", action)
