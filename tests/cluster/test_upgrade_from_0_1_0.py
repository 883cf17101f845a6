"""An upgrade from release 0.1.0, whose record of a model's attempts was a ConfigMap, to this
checkout, whose record is an ``ExtractionRecord`` seeded from the model's
``status.metadataExtraction`` (issue 27).

A world of its own (the session's stays untouched) runs the real 0.1.0: its source tree as
``git archive`` gives it from the checkout's own repository, installed as its
docs/install.md said (the hook's CRDs, its ``metacontroller/`` through the "Your own URL"
overlay) and its hook served from that tree. Models of both kinds go Ready on a Bound PVC
and a BaseModel's extraction fails once and waits for its retry. Then the upgrade, as this
checkout's docs/install.md "Upgrade" says: the CRDs and the hook applied again, the hook's
server replaced, and Metacontroller, whose controllers changed, taking them anew. The API
server and its audit log then say what the upgrade kept and what it wrote.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hooks.pvc.observation import RECORD_API_VERSION
from tests.cluster import audit
from tests.cluster.conftest import running
from tests.cluster.model_files import BROKEN_CONFIG
from tests.cluster.story import AUDIT_FLUSH_SECONDS, Story
from tests.cluster.test_lifecycle import READY_SECONDS, STEP_SECONDS
from tests.cluster.tier import INSTALL_DOC, REPO, Tier, apply_commands, section, why
from tests.metacontroller.selection import Obj
from tests.unavailable import unavailable

pytestmark = pytest.mark.cluster

RELEASE_0_1_0 = "00ecb4202cd1e7b578aa4a61a07df81632f1a120"
"""The commit released as 0.1.0. dd81cef wrote the version; 838732b finished the CHANGELOG's
``## [0.1.0]`` section (its last entry, the Helm chart). The commits after it up to 00ecb42
change tests, ``.ci/run`` and docs only (``git diff --stat 838732b 00ecb42 -- hooks
metacontroller charts pyproject.toml Dockerfile requirements.lock`` is empty), and 00ecb42's
child, 663399c, is the first change the ``[Unreleased]`` section lists: 00ecb42 is the last
commit of 0.1.0, and its docs/install.md the page 0.1.0's users installed from."""
SETTINGS = {"READ_JOB_PODS": "false", "RETRY_BASE_DELAY_SECONDS": "3600", "RETRY_MAX_DELAY_SECONDS": "3600"}
"""The user's settings, the same before and after the upgrade. 0.1.0's pods in Metacontroller's
cache left out (its documented option; the tier's simulated Metacontroller watches no pod, as
this checkout's default asks for none), and a first retry an hour away, so that the model
whose extraction failed is still waiting for it when the story ends: any Job is a Job too many."""
RECORD_FIELDS = ("storageUri", "attempts", "jobName", "result")
"""What the record keeps of a finished attempt, in 0.1.0's status and in the ``ExtractionRecord``'s spec alike."""
(DELETE_CONFIG_MAPS,) = [shlex.split(line) for line in section(INSTALL_DOC, "## Upgrade").splitlines()
                         if line.startswith("kubectl delete configmaps")]
"""docs/install.md's "Upgrade": the command that deletes 0.1.0's record ConfigMaps. Its selector
is the one the story finds them by, so a selector that missed them fails the story."""
SETTLE_SECONDS = 10.0
"""How long the world runs on after a change before the story reads what it did (the Jobs
aged, the upgrade's records all there): Metacontroller's syncs of the models after it, each a
second or less here, come round within it, and any Job they asked for would be created."""


def released_tree(into: Path) -> Path:
    """0.1.0's files, from ``git archive`` of ``RELEASE_0_1_0`` in the checkout's own repository;
    unavailable (``tests/unavailable.py``) where the clone lacks that commit, a shallow one."""
    if shutil.which("git") is None:
        unavailable("the upgrade story reads release 0.1.0 with git, which is not installed")
    present = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{RELEASE_0_1_0}^{{commit}}"], capture_output=True)
    if present.returncode != 0:
        unavailable(f"the checkout's repository lacks release 0.1.0's commit {RELEASE_0_1_0[:7]} (a shallow clone?): "
                    "`git fetch --unshallow` brings it")
    archive = into / "0.1.0.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", f"--output={archive}", RELEASE_0_1_0], check=True)
    tree = into / "ome-basemodel-hook-0.1.0"
    with tarfile.open(archive) as contents:
        contents.extractall(tree, filter="data")
    assert '__version__ = "0.1.0"' in (tree / "hooks" / "__init__.py").read_text(encoding="utf-8")
    return tree


def install_0_1_0(tree: Path) -> Callable[[Tier], None]:
    """What a user of 0.1.0 did: its hook served with ``SETTINGS``, and its docs/install.md's install."""

    def install(world: Tier) -> None:
        world.serve_hook(tree, SETTINGS)
        world.install(tree)
    return install


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    """A world where release 0.1.0 is installed and its Metacontroller controllers run."""
    tree = released_tree(tmp_path_factory.mktemp("release"))
    with running(install_0_1_0(tree), existing_models=False) as world:
        yield world


def extraction(model: Obj | None) -> dict[str, Any]:
    """The record as the model's status shows it (``status.metadataExtraction``)."""
    return ((model or {}).get("status") or {}).get("metadataExtraction") or {}


def kept(record: dict[str, Any]) -> dict[str, Any]:
    """The fields both forms of the record share, to compare them (0.1.0's status has more)."""
    return {key: record.get(key) for key in RECORD_FIELDS}


def records(world: Tier, story: Story) -> list[dict[str, Any]]:
    """The spec of every ``ExtractionRecord`` in the story's namespace (a ClusterBaseModel's is its PVC's)."""
    return [record["spec"] for record in world.objects(RECORD_API_VERSION, "extractionrecords", story.namespace)]


def config_maps(world: Tier) -> dict[str, str]:
    """0.1.0's record ConfigMaps as the docs' command selects them, by namespace and name, with
    their resourceVersions."""
    selector = DELETE_CONFIG_MAPS[DELETE_CONFIG_MAPS.index("-l") + 1]
    found = world.plane.kubectl("get", "configmaps", "--all-namespaces", "--selector", selector, "--output",
                                "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{'\\n'}{end}")
    return dict(line.split(" ") for line in found.stdout.splitlines())


@dataclass
class Upgrade:
    """What the story saw: the models' records under 0.1.0, their Jobs and 0.1.0's ConfigMaps
    before the upgrade, and every write the API server took after it began."""

    world: Tier
    ready: list[Story]
    retrying: Story
    before: dict[str, dict[str, Any]]
    """Each story's ``status.metadataExtraction`` under 0.1.0, by its namespace (a BaseModel's name is not unique)."""
    jobs_before: dict[str, list[str]]
    config_maps_before: dict[str, str]
    writes: list[audit.Write]

    @property
    def stories(self) -> list[Story]:
        return [*self.ready, self.retrying]


def jobs(stories: list[Story]) -> dict[str, list[str]]:
    """The names of each story's Jobs, by its namespace: what the upgrade must neither add to nor take from."""
    return {story.namespace: sorted(job["metadata"]["name"] for job in story.jobs()) for story in stories}


def upgrade(world: Tier) -> None:
    """This checkout's docs/install.md: its CRDs applied as "The CRDs and OME's charts" says
    (0.1.0 installed them), then "Upgrade"'s ``kubectl apply -k metacontroller/`` as the user's
    overlay applies it, and the hook's server replaced. Metacontroller is stopped meanwhile and
    takes the changed controllers when it starts again, as it stops and starts a controller
    whose spec changed: the story's first syncs after the upgrade are the new hook's under the
    new controllers (the moment of a rollout where one is old and the other new is not played)."""
    assert world.metacontroller is not None
    world.metacontroller.stop()
    for command in apply_commands(section(INSTALL_DOC, "## The CRDs and OME's charts")):
        world.kubectl_as_user(command)
    assert apply_commands(section(INSTALL_DOC, "## Upgrade")) == [["kubectl", "apply", "-k", "metacontroller/"]]
    world.apply_own_url()
    world.serve_hook(settings=SETTINGS)
    world.plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                        "crd/extractionrecords.ome-basemodel-hook.ome.io")
    world.start_metacontroller()


def age(world: Tier, stories: list[Story]) -> None:
    """The stories' finished Jobs deleted, as ``JOB_TTL_SECONDS_AFTER_FINISHED`` deletes them (an
    hour after they ended, by default): what remains of the attempt is the record alone."""
    for story in stories:
        for job in story.jobs():
            world.delete("job", job["metadata"]["name"], story.namespace)
    world.wait(lambda: all(story.jobs() == [] for story in stories), STEP_SECONDS, "the aged models' Jobs gone")


@pytest.fixture(scope="module")
def upgraded(released: Tier) -> Upgrade:
    """Under 0.1.0, a BaseModel Ready within its Job's TTL (the Job, under 0.1.0's name, still
    there), a ClusterBaseModel Ready long before (its Job gone) and a BaseModel whose first
    extraction failed long before (its Job gone, its retry due in an hour); then the upgrade,
    then the world run until every model has its record and for ``SETTLE_SECONDS`` more."""
    world = released
    ready = [Story(world, "BaseModel", "recent"), Story(world, "ClusterBaseModel", "aged")]
    retrying = Story(world, "BaseModel", "retry")
    for story in ready:
        story.storage()
    retrying.storage(config=BROKEN_CONFIG)
    for story in [*ready, retrying]:
        story.create()
    for story in ready:
        world.wait(lambda story=story: (story.model() or {}).get("status", {}).get("state") == "Ready"
                   and extraction(story.model()).get("result") == "Succeeded", READY_SECONDS,
                   f"{story.kind} {story.name} Ready under 0.1.0, its attempt recorded Succeeded")
    world.wait(lambda: extraction(retrying.model()).get("result") == "Failed", READY_SECONDS,
               f"{retrying.name}'s first attempt recorded Failed under 0.1.0")
    age(world, ready[1:] + [retrying])
    assert world.metacontroller is not None
    world.metacontroller.run_for(SETTLE_SECONDS)
    stories = [*ready, retrying]
    before = {story.namespace: extraction(story.model()) for story in stories}
    jobs_before = jobs(stories)
    config_maps_before = config_maps(world)
    since = datetime.now(timezone.utc)
    upgrade(world)
    for story in stories:
        world.wait(lambda story=story: bool(records(world, story)) and bool(why(story.model(), "state")), STEP_SECONDS,
                   f"{story.kind} {story.name}'s ExtractionRecord and its why after the upgrade")
    world.metacontroller.run_for(SETTLE_SECONDS + AUDIT_FLUSH_SECONDS)
    written = list(audit.writes(world.plane.audit_log, since, datetime.now(timezone.utc)))
    return Upgrade(world, ready, retrying, before, jobs_before, config_maps_before, written)


def test_a_model_ready_before_the_upgrade_stays_ready_and_its_record_takes_its_attempts_from_its_status(upgraded: Upgrade) -> None:
    for story in upgraded.ready:
        assert story.state() == ("Ready", "Ready"), story.model()
        before = kept(upgraded.before[story.namespace])
        assert before["attempts"] == 1 and before["result"] == "Succeeded", before
        assert [kept(record) for record in records(upgraded.world, story)] == [before]


def test_a_model_waiting_to_retry_keeps_its_failed_attempt_and_waits_on(upgraded: Upgrade) -> None:
    story = upgraded.retrying
    before = kept(upgraded.before[story.namespace])
    assert before["attempts"] == 1 and before["result"] == "Failed", before
    assert [kept(record) for record in records(upgraded.world, story)] == [before]
    model = story.model()
    assert story.state() == ("Failed", "JobFailed"), model
    assert why(model, "attempt").startswith("1 of ") and why(model, "next-attempt"), (model or {}).get("metadata")


def test_no_job_is_created_or_deleted_after_the_upgrade(upgraded: Upgrade) -> None:
    """Neither for the aged models, whose attempts only their status held, nor for the recent
    one, whose Job 0.1.0 named is still its own."""
    assert [bool(names) for names in upgraded.jobs_before.values()] == [True, False, False], upgraded.jobs_before
    job_writes = [write for write in upgraded.writes if write.resource == "jobs" and write.verb in ("create", "delete")]
    assert job_writes == []
    assert jobs(upgraded.stories) == upgraded.jobs_before


def test_the_0_1_0_record_config_maps_are_left_alone_until_the_user_deletes_them_as_the_docs_say(upgraded: Upgrade) -> None:
    world = upgraded.world
    assert len(upgraded.config_maps_before) == len(upgraded.stories), upgraded.config_maps_before
    assert [write for write in upgraded.writes if write.resource == "configmaps"] == []
    assert config_maps(world) == upgraded.config_maps_before
    world.kubectl_as_user(DELETE_CONFIG_MAPS)
    assert config_maps(world) == {}
    assert world.metacontroller is not None
    world.metacontroller.run_for(5)
    assert [story.state() for story in upgraded.ready] == [("Ready", "Ready")] * len(upgraded.ready)
    assert jobs(upgraded.stories) == upgraded.jobs_before
