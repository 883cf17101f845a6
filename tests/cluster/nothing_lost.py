"""What must hold of a model after any fault, read from the API server and its audit log.

- No second Job for one attempt: every Job name of the model was created once (a create
  that met AlreadyExists changed nothing and does not count; one the API server took
  twice is a Job run twice for one attempt, its name reused after the first was removed).
- No Job deleted while it ran: the only Job deletes are the TTL-after-finished controller's,
  which deletes finished Jobs alone (a fault story never changes a model's URI or deletes
  it, the only reasons the hook lets a running Job go).
- The grant gone: no ServiceAccount, Role or RoleBinding (ClusterRole, ClusterRoleBinding)
  of the model is left once its Jobs finished.
- The record intact: where the hook wrote one, it names the model's current URI, the last
  Job and every attempt made, and says how the last ended.
- The attempt budget: no more Jobs than the hook's attempts allow, and exactly as many as
  the story expects.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from hooks.settings import RetrySettings
from tests.cluster import audit
from tests.cluster.story import AUDIT_FLUSH_SECONDS, Story

TTL_CONTROLLER = "system:serviceaccount:kube-system:ttl-after-finished-controller"
RECORDS = ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords")
ACCESS_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def jobs_created(story: Story) -> Counter[str]:
    """How many times the API server took a create of each of the story's Jobs."""
    return Counter(write.name for write in _writes(story)
                   if write.resource == "jobs" and write.verb == "create" and write.accepted)


def _writes(story: Story) -> list[audit.Write]:
    until = datetime.now(timezone.utc) + timedelta(seconds=1)
    return [write for write in audit.writes(story.tier.plane.audit_log, story.started, until)
            if write.namespace == story.namespace]


def record(story: Story) -> dict[str, object] | None:
    """The spec of the model's ExtractionRecord, if it has one."""
    model = story.model()
    assert model is not None, f"{story.kind} {story.name} is gone"
    owned = [item for item in story.tier.objects(*RECORDS, story.namespace)
             if model["metadata"]["uid"] in {owner.get("uid") for owner in item["metadata"].get("ownerReferences") or []}]
    assert len(owned) <= 1, owned
    return owned[0]["spec"] if owned else None


def check(story: Story, jobs: int, recorded: bool = True) -> None:
    """Everything above, for a story whose model made ``jobs`` Jobs and ended with the last
    one's success, remembered in its record where ``recorded`` (a model whose Job ended and
    was removed while no sync could see it has the metadata in its spec and no record)."""
    time.sleep(AUDIT_FLUSH_SECONDS)
    created = jobs_created(story)
    assert all(count == 1 for count in created.values()), f"{story.kind} {story.name}: a Job created twice: {created}"
    assert len(created) == jobs <= RetrySettings().max_attempts, f"{story.kind} {story.name}: Jobs created {created}"
    deleted = [(write.name, write.user) for write in _writes(story)
               if write.resource == "jobs" and write.verb == "delete" and write.accepted and write.user != TTL_CONTROLLER]
    assert deleted == [], f"{story.kind} {story.name}: Jobs deleted by others than the TTL controller: {deleted}"
    left = ACCESS_KINDS & set(story.children())
    assert not left, f"{story.kind} {story.name}: {sorted(left)} left after its Jobs finished"
    kept = record(story)
    if not recorded:
        assert kept is None, kept
        return
    assert kept is not None, f"{story.kind} {story.name} has no record"
    uri = (story.model() or {})["spec"]["storage"]["storageUri"]
    assert (kept.get("storageUri"), kept.get("attempts"), kept.get("result")) == (uri, jobs, "Succeeded"), kept
    assert kept.get("jobName") in created, (kept, created)
