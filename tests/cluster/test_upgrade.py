"""OME upgraded under the hook (issue 28, item 5): models the hook serves beside OME v0.1.5,
then OME's charts upgraded to v1.2.2, which has its own PVC backend, in the order Helm
applies them (CRDs, then configuration and RBAC, then the new manager). Every model must end
served by OME alone: its status OME's, none of the hook's labels, finalizers, objects or
conditions left, no Job of the hook's started after the upgrade and one of OME's for each
model whose claim is Bound, and no write of the new manager's refused by the fence. The old
manager, v0.1.5, runs until Helm replaces it and is refused as it always was (its typed
write of a `pvc://` model's status) if it writes in between: that is not a write the upgrade
made rightful.

Marked ``comparison`` (it needs OME v1.2.2, which ``.ci/run`` does not build) and told in a
world of its own, since it replaces OME's manager.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Callable

import pytest

from hooks import upstream_backend
from tests.cluster import audit, builds
from tests.cluster.story import AUDIT_FLUSH_SECONDS, LABEL, Story
from tests.cluster.test_lifecycle import COMPOSITE_FINALIZERS, KINDS, READY_SECONDS, STEP_SECONDS
from tests.cluster.tier import Tier

pytestmark = pytest.mark.comparison
HOOK_CONDITIONS = {"StorageReady", "MetadataReady"}
UPGRADE_SECONDS = 180.0
"""The bound on OME taking every model over: its manager starts, lists, and runs one Job a model."""


def served_by_ome(story: Story) -> bool:
    """OME's backend wrote the status last, and nothing of the hook's is left on the model."""
    model = story.model() or {}
    status, metadata = model.get("status") or {}, model.get("metadata") or {}
    return (upstream_backend.written_by_ome_backend(status)
            and not {item.get("type") for item in status.get("conditions") or []} & HOOK_CONDITIONS
            and LABEL not in (metadata.get("labels") or {})
            and COMPOSITE_FINALIZERS[story.kind] not in (metadata.get("finalizers") or []))


def wait_for_ome(story: Story, done: Callable[[Story], bool], what: str) -> None:
    """Wait until ``done(story)``; a timeout says what the model and its Jobs then were."""
    try:
        story.tier.wait(lambda: done(story), UPGRADE_SECONDS, f"{what}: {story.kind} {story.name}")
    except TimeoutError as error:
        model = story.model() or {}
        metadata = model.get("metadata") or {}
        jobs = [(job["metadata"]["name"], job.get("status")) for job in story.tier.objects("batch/v1", "jobs", story.namespace)]
        raise AssertionError(f"{error}\nlabels {metadata.get('labels')}, finalizers {metadata.get('finalizers')}, "
                             f"status {model.get('status')}\nJobs {jobs}") from None


def test_every_model_ends_served_by_ome_with_one_job_and_no_refused_write(comparison_tier: Tier) -> None:
    world = comparison_tier
    ready = [Story(world, kind, "upgrade") for kind in KINDS]
    missing = [Story(world, kind, "upgrade-missing") for kind in KINDS]
    for story in ready:
        story.storage()
        story.create()
    for story in missing:
        story.namespace_only()
        story.create()
    for story in ready:
        story.wait_for(("Ready", "Ready"), READY_SECONDS)
    for story in missing:
        story.wait_for(("Failed", "PVCNotFound"), STEP_SECONDS)

    upgraded = datetime.now(timezone.utc)
    world.upgrade_ome(builds.OME_PVC_BACKEND)
    replaced = datetime.now(timezone.utc)  # v0.1.5's manager has exited; v1.2.2's starts
    for story in [*ready, *missing]:
        wait_for_ome(story, served_by_ome, "OME serving")
    for story in ready:
        wait_for_ome(story, lambda story: story.state() == ("Ready", "PVCMetadataReady"), "Ready by OME")
    for story in missing:
        assert story.state() == ("Failed", "PVCNotFound")

    time.sleep(AUDIT_FLUSH_SECONDS)
    until = datetime.now(timezone.utc) + timedelta(seconds=1)
    refused = [write for write in audit.writes(world.plane.audit_log, upgraded, until) if write.refused]
    assert [write for write in refused if write.time >= replaced] == [], "the new manager refused"
    assert {(audit.actor(write.user), write.subresource) for write in refused} <= {("OME's manager", "status")}, refused
    for story in [*ready, *missing]:
        about = audit.Story(story.kind, story.name, story.namespace)
        creators = [audit.actor(write.user) for write in audit.writes(world.plane.audit_log, upgraded, until)
                    if write.verb == "create" and write.resource == "jobs" and write.accepted and about.concerns(write)]
        assert creators == (["OME's manager"] if story in ready else []), (story.kind, story.name, creators)
        assert [kind for kind in story.children() if kind not in ("Job", "Pod")] == []
