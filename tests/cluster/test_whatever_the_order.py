"""Faults on the real control plane: every process killed at its worst moment, and nothing lost.

Each story puts models through one fault (the control plane's three in turn, as an upgrade
restarts them), injected at a chosen moment with SIGKILL (or, for
the slow hook, an answer held past Metacontroller's webhook timeout), the process then
started again as its Deployment, StatefulSet or systemd unit would; each ends with the
models in their final state and ``nothing_lost``'s checks (docs/design.md, "Whatever the
order", lists which promise each story proves). A story faces a BaseModel and a
ClusterBaseModel at once, or one kind at a time where the moment is one model's.

The module runs after the tier's other stories (its name sorts last): it kills the world's
processes, and leaves them running again however a story ends (``faults.restore``).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest
import yaml

from hooks.names import is_dns_label, is_dns_subdomain
from tests.cluster import audit, race
from tests.cluster.faults import STATUS_WITHHELD_LABEL, FaultStory, finished, side_by_side, status_withheld
from tests.cluster.hook_proxy import Exchange, Hold, model_of
from tests.cluster.story import KINDS, Story
from tests.cluster.tier import PLURALS, REPO, Tier, why
from tests.metacontroller import identities

pytestmark = pytest.mark.cluster

HOOKS_DOWN_SECONDS = 30.0
"""How long both replicas stay dead: half the issue's minute, for the tier's CI budget. Every
call in that time fails and Metacontroller's per-object backoff (5 ms doubling) has spaced
its retries by about 16 s when the replicas come back, so the story still proves that the
retries, not a prompt event, bring the grant's removal and the record."""
ETCD_DOWN_SECONDS = 5.0


def sync_webhook_timeout_seconds() -> float:
    """The install's CompositeControllers' sync ``webhook.timeout`` (each the same): an answer
    later than this is one Metacontroller gave up on."""
    controllers = yaml.safe_load_all((REPO / "metacontroller" / "compositecontrollers.yaml").read_text(encoding="utf-8"))
    (timeout,) = {controller["spec"]["hooks"]["sync"]["webhook"]["timeout"] for controller in controllers if controller}
    assert timeout.endswith("s"), timeout
    return float(timeout[:-1])


WEBHOOK_TIMEOUT_SECONDS = sync_webhook_timeout_seconds()
LATE_SECONDS = WEBHOOK_TIMEOUT_SECONDS + 1.0
FINISHED_TTL_SECONDS = 1
"""The TTL a story gives its Jobs by hand, so that one ended is removed at once instead of after
the hook's shortest setting (60 s): what the story proves needs the Job gone, not a long TTL."""


def asking_for_the_job(story: Story, path: str, body: dict[str, Any]) -> bool:
    """A sync of ``story``'s model that sees its grant and no Job: the call whose answer asks
    Metacontroller to create the Job."""
    children = body.get("children") or {}
    return (path == "/sync" and model_of(body) == story.about
            and bool(children.get("ServiceAccount.v1")) and not children.get("Job.batch/v1"))


def held_running(fault: FaultStory, held: list[str]) -> Callable[[], bool]:
    """Every story's Job has a pod the kubelet holds running; the stories' children noted, so that
    their Jobs' pods are known once the Jobs are gone."""
    def running() -> bool:
        for story in fault.stories:
            story.children()
        return {entry.split("/")[0] for entry in held} >= set(fault.namespaces)
    return running


# --- the hook ------------------------------------------------------------------------------------------


def test_a_hook_replica_killed_while_it_holds_a_call_fails_that_call_alone(tier: Tier) -> None:
    """A replica that stalls (SIGSTOP) with a call about a new model, then is killed: the call
    fails, Metacontroller asks again, the other replica or the restarted one answers."""
    assert tier.hooks is not None and tier.proxy is not None
    proxy, replica = tier.proxy, tier.hooks.replicas[0]
    with FaultStory(tier, "a hook replica killed while it holds a call", side_by_side(tier, "replica")) as fault:
        fault.storage()
        replica.process.pause()
        fault.create()
        fault.wait(lambda: any(proxy.in_flight[(replica.url, story.about)] for story in fault.stories),
                   "a call about a model held by the stalled replica")
        replica.process.kill()
        replica.start()
        fault.restart_done()
        assert sum(proxy.count_dropped(story.about) for story in fault.stories) >= 1
        fault.ends()


def test_both_hook_replicas_killed_for_half_a_minute_while_the_jobs_end_the_retries_bring_the_grants_removal_and_the_record(tier: Tier) -> None:
    """Every replica gone for ``HOOKS_DOWN_SECONDS``, during which the Jobs end: every call about them fails,
    and Metacontroller's retries, spaced by its backoff, bring the grant's removal and the
    record once the replicas are back."""
    assert tier.hooks is not None and tier.proxy is not None and tier.kubelet is not None and tier.metacontroller is not None
    with FaultStory(tier, "both hook replicas killed for half a minute", side_by_side(tier, "hooksdown")) as fault, \
            tier.kubelet.holding(*fault.namespaces) as pods:
        fault.storage()
        fault.create()
        fault.wait(held_running(fault, pods.held), "every model's Job running")
        killed = time.monotonic()
        for replica in tier.hooks.replicas:
            replica.process.kill()
        pods.release()
        fault.wait(fault.jobs_finished, "the Jobs ended while no replica answers")
        tier.metacontroller.run_for(max(0.0, killed + HOOKS_DOWN_SECONDS - time.monotonic()))
        for replica in tier.hooks.replicas:
            replica.start()
        fault.restart_done()
        assert all(tier.proxy.count_dropped(story.about) for story in fault.stories), \
            {story.name: tier.proxy.count_dropped(story.about) for story in fault.stories}
        fault.ends()


def test_an_answer_later_than_the_webhook_timeout_is_asked_for_again_and_given_the_same(tier: Tier) -> None:
    """The answer that asks for each model's Job is held past Metacontroller's webhook timeout:
    Metacontroller gives up on it and syncs again; the answer is the same, and the Job is
    created once."""
    assert tier.proxy is not None
    proxy = tier.proxy
    with FaultStory(tier, "the Job's answer later than the webhook timeout", side_by_side(tier, "slow")) as fault:
        fault.storage()
        late: dict[str, float] = {}

        def past_the_timeout(path: str, body: dict[str, Any]) -> Callable[[], bool] | None:
            story = next((story for story in fault.stories if asking_for_the_job(story, path, body)), None)
            if story is None or story.name in late:
                return None
            late[story.name] = time.monotonic()
            return lambda: time.monotonic() > late[story.name] + LATE_SECONDS
        hold = Hold("the answer asking for a Job, past the webhook timeout", past_the_timeout, seconds=LATE_SECONDS + 5)
        proxy.holds.append(hold)
        try:
            fault.create()
            fault.wait(lambda: all(late_and_again(list(proxy.exchanges), story) for story in fault.stories),
                       "every model's late answer given up on, and its sync answered again")
        finally:
            proxy.holds.remove(hold)
        fault.restart_done(at=max(late.values()) + LATE_SECONDS)
        for story in fault.stories:
            pair = late_and_again(list(proxy.exchanges), story)
            assert pair is not None
            given_up, again = pair
            assert again.request["children"] == given_up.request["children"]
            assert timeless(json.loads(given_up.answer or b"")) == timeless(json.loads(again.answer or b"")), (given_up, again)
        fault.ends()


def late_and_again(exchanges: list[Exchange], story: Story) -> tuple[Exchange, Exchange] | None:
    """The answer asking for the model's Job that Metacontroller gave up on, and the next
    answer to the same sync, asked again; None until both were given."""
    syncs = sorted((exchange for exchange in exchanges
                    if exchange.answer is not None and asking_for_the_job(story, exchange.path, exchange.request)),
                   key=lambda exchange: exchange.asked)
    late = next((index for index, exchange in enumerate(syncs) if not exchange.delivered), None)
    if late is None:
        return None
    again = next((exchange for exchange in syncs[late + 1:] if exchange.delivered), None)
    return None if again is None else (syncs[late], again)


def timeless(answer: Any) -> Any:
    """An answer without its conditions' ``lastTransitionTime``: a condition that changes takes
    the time of the call that changed it, which differs between two calls."""
    if isinstance(answer, dict):
        return {key: timeless(value) for key, value in answer.items() if key != "lastTransitionTime"}
    if isinstance(answer, list):
        return [timeless(item) for item in answer]
    return answer


# --- Metacontroller ------------------------------------------------------------------------------------


def test_metacontroller_killed_after_it_created_the_job_and_before_it_wrote_the_status_creates_no_second_job(tier: Tier) -> None:
    """The API server refuses Metacontroller's status writes for the models (a policy the story
    sets), so when their Jobs exist their status was never written; Metacontroller is killed
    then, and started again with nothing but what it lists."""
    assert tier.kubelet is not None
    with FaultStory(tier, "Metacontroller killed between the Job and the status", side_by_side(tier, "mcstatus")) as fault:
        with status_withheld(tier), tier.kubelet.holding(*fault.namespaces):
            fault.storage()
            fault.create(labels={STATUS_WITHHELD_LABEL: "true"})
            fault.wait(lambda: all(fault.jobs()), "every model's Job created")
            tier.kill_metacontroller()
            assert [(story.model() or {}).get("status") for story in fault.stories] == [None] * len(fault.stories)
            for story in fault.stories:
                tier.plane.kubectl("label", PLURALS[story.kind], story.name, f"{STATUS_WITHHELD_LABEL}-",
                                   *(["--namespace", story.namespace] if story.model_namespace else []))
            tier.restart_metacontroller()
            fault.restart_done()
        fault.ends()


@pytest.mark.parametrize("kind", KINDS)
def test_metacontroller_killed_between_the_grant_and_the_job_creates_the_job_once_started_again(tier: Tier, kind: str) -> None:
    """Killed as the sync that asks for the Job waits for its answer: the grant exists, the Job
    does not. Started again, it creates the Job once."""
    assert tier.proxy is not None
    with FaultStory(tier, f"Metacontroller killed between the grant and the Job ({kind})", side_by_side(tier, "mcgrant", (kind,))) as fault:
        (story,) = fault.stories
        fault.storage()
        killed: list[bool] = []

        def kill_at_the_job(path: str, body: dict[str, Any]) -> Callable[[], bool] | None:
            if killed or not asking_for_the_job(story, path, body):
                return None
            killed.append(True)
            tier.kill_metacontroller()
            return lambda: True
        hold = Hold("the answer asking for the Job, Metacontroller killed before it", kill_at_the_job)
        tier.proxy.holds.append(hold)
        try:
            story.create()
            fault.wait(lambda: bool(killed) and not (tier.metacontroller and tier.metacontroller.running),
                       "Metacontroller killed as it asked for the Job")
        finally:
            tier.proxy.holds.remove(hold)
        assert "ServiceAccount" in story.children() and story.jobs() == [], story.children()
        tier.restart_metacontroller()
        fault.restart_done()
        fault.ends()


def test_metacontroller_back_after_the_jobs_ended_and_their_ttl_removed_them_finds_the_models_ready_and_runs_no_attempt_again(tier: Tier) -> None:
    """Metacontroller killed while the Jobs run, started again once they ended and their TTL
    removed them (the Jobs' TTL shortened by hand meanwhile, ``FINISHED_TTL_SECONDS``). The
    agent wrote the metadata, so the models are Ready without a Job; the grant left behind
    goes at the first sync; no attempt runs again. No record was written: no sync saw a Job end."""
    assert tier.kubelet is not None
    with FaultStory(tier, "Metacontroller killed while the Jobs run, back after their TTL", side_by_side(tier, "mcttl")) as fault:
        with tier.kubelet.holding(*fault.namespaces) as pods:
            fault.storage()
            fault.create()
            fault.wait(held_running(fault, pods.held), "every model's Job running")
            tier.kill_metacontroller()
            for story in fault.stories:
                for job in story.jobs():
                    tier.plane.kubectl("patch", "job", job["metadata"]["name"], "--namespace", story.namespace, "--type=merge",
                                       "--patch", json.dumps({"spec": {"ttlSecondsAfterFinished": FINISHED_TTL_SECONDS}}))
        fault.wait(lambda: all(not {"Job", "Pod"} & set(story.children()) for story in fault.stories),
                   "the Jobs ended and their TTL removed them, with their pods")
        tier.restart_metacontroller()
        fault.restart_done()
        fault.ends(children=set(), recorded=False)


# --- the control plane and OME -------------------------------------------------------------------------


def test_the_control_plane_restarted_in_turn_under_running_jobs_loses_nothing_and_keeps_the_grant_while_a_job_runs(tier: Tier) -> None:
    """The control plane's processes killed in turn under the same running Jobs, as an upgrade
    of the control plane restarts each (one story instead of three: the tier's CI budget).
    kube-apiserver killed and started again while the Jobs run: every watch breaks and lists
    again. kube-controller-manager killed, then etcd as the agents start: the agents'
    writes, the kubelet's reports and Metacontroller's writes meet an API server without its
    storage for a few seconds. etcd back, the pods end and the agents' metadata makes the
    models Ready, but the Jobs' status still says they run (no Job controller), so their
    grant stays; the controller manager back, the Jobs finish and the grant goes."""
    assert tier.kubelet is not None and tier.metacontroller is not None
    with FaultStory(tier, "kube-apiserver restarted, etcd stopped a few seconds, kube-controller-manager down while the pods finish",
                    side_by_side(tier, "plane")) as fault, tier.kubelet.holding(*fault.namespaces) as pods:
        fault.storage()
        fault.create()
        fault.wait(held_running(fault, pods.held), "every model's Job running")
        tier.plane.kill("kube-apiserver")
        tier.plane.start_again("kube-apiserver")
        tier.plane.kill("kube-controller-manager")
        tier.plane.kill("etcd")
        pods.release()
        tier.metacontroller.run_for(ETCD_DOWN_SECONDS)
        tier.plane.start_again("etcd")
        fault.wait(lambda: fault.pods_ended() and all(story.state() == ("Ready", "Ready") for story in fault.stories),
                   "the pods ended and the models Ready")
        for story in fault.stories:
            assert not any(finished(job) for job in story.jobs()) and "ServiceAccount" in story.children(), story.children()
        tier.plane.start_again("kube-controller-manager")
        fault.restart_done()
        fault.ends()


@pytest.mark.parametrize("kind", KINDS)
def test_omes_manager_killed_as_it_wins_the_label_race_the_label_still_converges(tier: Tier, kind: str) -> None:
    """The label race of ``race.played``, OME's manager killed right after its finalizer went in
    and before the keeper's label write (which meets a Conflict), then started again."""
    assert tier.ome is not None
    ome = tier.ome
    with FaultStory(tier, f"OME's manager killed as it wins the label race ({kind})", side_by_side(tier, "omekill", (kind,))) as fault:
        (story,) = fault.stories
        fault.storage()

        def finalized() -> bool:
            return race.OME_FINALIZERS[kind] in ((story.model() or {}).get("metadata", {}).get("finalizers") or [])
        with race.played(tier, kind, story.name, finalized, then=ome.kill) as happened:
            story.create(as_sample=True)
            fault.wait(lambda: bool(happened) and ome.killed, "OME's manager killed with its finalizer in")
        ome.start()
        fault.restart_done()
        fault.ends()
        model = story.model() or {}
        assert story.labelled() and model["metadata"]["finalizers"].count(race.OME_FINALIZERS[kind]) == 1, model["metadata"]


# --- what a user can really create -----------------------------------------------------------------------

ODD_SLUG = "odd-" + "m" * 55
"""Namespaces at the 63-character limit: ``<slug>-cbm``."""
SUB_PATH = "models/Llama-3.1-8B.v1.0/..hidden/版本-ünï/"
"""Dots, a segment starting with two dots, unicode, and the one trailing '/' the grammar ignores."""


def long_name(stem: str, length: int = 253) -> str:
    """A DNS-1123 subdomain of exactly ``length`` characters."""
    name = (stem * (length // len(stem) + 1))[:length - 1] + "0"
    assert is_dns_subdomain(name) and len(name) == length
    return name


def test_odd_but_valid_models_applied_with_kubectl_get_names_within_the_limits_and_a_clear_status(tier: Tier) -> None:
    """Models at the edges of what the API server and the URI grammar accept: names of 253
    characters, a PVC named at its limit in a namespace at its own, sub-paths with dots and
    unicode, the explicit own-namespace form; and one refused for a '..' segment."""
    namespaced = Story(tier, "BaseModel", ODD_SLUG, named=long_name("llama-3.1-8b.instruct-"))
    cluster_wide = Story(tier, "ClusterBaseModel", ODD_SLUG, named=long_name("cluster.llama-3.1-"))
    refused = Story(tier, "BaseModel", ODD_SLUG, named="refused")
    claim = "model.storage.v1"
    long_claim = long_name("claim.")
    odd = FaultStory(tier, "odd but valid models", [namespaced, cluster_wide])
    tier.storage(namespaced.namespace, claim, SUB_PATH.rstrip("/"))
    tier.storage(cluster_wide.namespace, long_claim, SUB_PATH.rstrip("/"))
    namespaced.create(f"pvc://{namespaced.namespace}:{claim}/{SUB_PATH}")
    cluster_wide.create(f"pvc://{cluster_wide.namespace}:{long_claim}/{SUB_PATH}")
    refused.create(f"pvc://{claim}/models/../llama")
    odd.settles()
    failed = refused.wait_for(("Failed", "InvalidStorageURI"), 60)
    assert "has a '..' segment" in why(failed, "message") and refused.children() == [], why(failed, "message")
    for story in odd.stories:
        for job in story.jobs():
            assert is_dns_label(job["metadata"]["name"]), job["metadata"]["name"]
            assert all(len(value) <= 63 for value in job["metadata"]["labels"].values()), job["metadata"]["labels"]
    until = datetime.now(timezone.utc) + timedelta(seconds=1)
    refusals = [(write.verb, write.resource, write.name, write.code) for write in audit.writes(tier.plane.audit_log, namespaced.started, until)
                if write.user == identities.METACONTROLLER and write.namespace in odd.namespaces
                and write.code >= 400 and write.code not in (404, 409)]
    assert refusals == []
