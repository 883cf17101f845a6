"""The CI workflow: actionlint finds nothing; every push to a branch and every pull request
runs ``.ci/run`` on a runner without the reference pack, after fetching upstream's CRDs
with the documented command; Go's build cache and the tiers' binaries are kept between
runs, keyed by everything that pins a build."""

from __future__ import annotations

import re

from tests import dockerfile, reference
from tests.cluster import builds
from tests.workflows import REPO, actionlint, load

CI = load("ci.yaml")
STEPS = CI.jobs["test"]["steps"]


def test_workflow_has_no_actionlint_finding() -> None:
    assert actionlint(CI) == (0, "", "")


def test_it_runs_on_every_branch_push_and_pull_request_and_for_the_release() -> None:
    """Not on a tag push: the release workflow calls it then, and it would run twice."""
    assert CI.triggers == {"push": {"branches": ["**"]}, "pull_request": None, "workflow_call": None}


def test_it_fetches_the_references_with_the_documented_command_then_runs_ci_last() -> None:
    fetch = CI.step_named("test", "Fetch upstream's reference CRDs")
    assert fetch["run"].splitlines() == ["python3 -m venv .venv", ".venv/bin/pip install -q -e '.[test]'", reference.FETCH]
    assert STEPS[-1] == {"name": "Run the test suite as .ci/run does", "run": "bash .ci/run"}
    assert STEPS.index(fetch) == len(STEPS) - 2
    assert "env" not in CI.jobs["test"], "the tests read the default reference folder the fetch wrote"


def test_it_runs_the_image_python_and_a_go_every_build_accepts() -> None:
    assert CI.step_using("test", "actions/setup-python")["with"] == {"python-version": dockerfile.python_version()}
    go = CI.step_using("test", "actions/setup-go")["with"]
    assert go["cache"] is False, "the cache step below keeps Go's build cache with the binaries"
    wanted = [re.search(r"^go (\d+)\.(\d+)", (target.source / "go.mod").read_text(encoding="utf-8"), re.M) for target in builds.BUILDS]
    assert all(found and tuple(map(int, go["go-version"].split("."))) >= (int(found[1]), int(found[2])) for found in wanted)


def test_it_keeps_gos_build_cache_and_the_built_binaries_keyed_by_what_pins_them() -> None:
    cache = CI.step_using("test", "actions/cache")["with"]
    assert cache["path"].split() == ["~/.cache/go-build", "~/.cache/ome-basemodel-hook"]
    pinned = re.findall(r"'([^']+)'", cache["key"])
    assert "tests/helm.py" in pinned and "tests/cluster/builds.py" in pinned
    for target in builds.BUILDS:
        for name in ("go.mod", "go.sum"):
            relative = (target.source / name).relative_to(REPO)
            assert any(relative.match(pattern) for pattern in pinned), f"{relative} is not in the cache key"
    assert cache["restore-keys"] == cache["key"].split("${{ hashFiles")[0]
