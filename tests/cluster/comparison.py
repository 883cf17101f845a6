"""The same stories against the hook and against OME's own PVC backend, measured alike.

A side is a world of the cluster tier: the hook installed beside OME v0.1.5, as the docs
say (Metacontroller simulated in real time, or the binary ``METACONTROLLER_BIN`` names),
or OME v1.2.2 alone, with the ``omeAgent`` block and metadata Job RBAC its chart sets. Both
run the same control plane, the same played kubelet and their own release's real agent.

A story is what a user does to one model, step by step, each step a bounded wait for the
state the step is about: the wait records what it saw when the state did not come, for this
is a benchmark, and not reaching a state within its bound is a result. What a story records
(``Outcome``) is what each side leaves a user with: the final state and reason, what
``kubectl get`` and ``kubectl describe`` show, the Jobs created, the API writes per actor
(from the audit log), the seconds to Ready, and what is left in the cluster.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

from tests.cluster import audit, builds, ome_manager
from tests.cluster.model_files import BROKEN_CONFIG, write_model
from tests.cluster.story import CLAIM, SUB_PATH, Story
from tests.cluster.tier import PLURALS, Tier, state

KINDS = ("BaseModel", "ClusterBaseModel")
READY_SECONDS = 120.0
"""The bound on a step that should end Ready: four times what the slower side takes here."""
OBSERVE_SECONDS = 30.0
"""How long a step waits for a state that may never come (a Job that cannot start)."""
SHORT_TTL_SECONDS = 60
"""The Jobs' TTL in the TTL story, on both sides: the hook's least (both default to an hour)."""
HOOK_TTL_SETTING = "JOB_TTL_SECONDS_AFTER_FINISHED"
OTHER_NAMESPACE = "elsewhere"
HOLD_FINALIZER = "example.com/in-use"
"""Holds a deleted claim Terminating, as a serving pod still using it would (until the world ends)."""
SETTLE_SECONDS = 5.0
"""How long a side serves the model after a story's last step before the outcome is read
(longer than the audit log takes to write its last events)."""
SPEC_METADATA = {"modelType": "llama", "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "8.03B"}


@dataclass(frozen=True)
class Side:
    """One way of serving ``pvc://`` models."""

    title: str
    build: builds.Build
    with_hook: bool

    def restart(self, tier: Tier, settings: dict[str, str] | None = None) -> None:
        """What serves the models, stopped and started again: Metacontroller and the hook, or
        OME's manager; ``settings`` configure the new hook process."""
        if self.with_hook:
            assert tier.metacontroller is not None and tier.hooks is not None
            tier.metacontroller.stop()
            tier.serve_hook(settings=settings)
            tier.start_metacontroller()
        else:
            assert tier.ome is not None
            tier.ome.stop()
            tier.plane.processes.remove(tier.ome)
            tier.ome = ome_manager.start(tier.plane, self.build)

    def shorten_job_ttl(self, tier: Tier, seconds: int) -> None:
        """The Jobs' TTL set to ``seconds``, and whatever reads it restarted."""
        if self.with_hook:
            self.restart(tier, {HOOK_TTL_SETTING: str(seconds)})
            return
        config = {**ome_manager.agent_config(self.build), "ttlSecondsAfterFinished": seconds}
        patch = json.dumps({"data": {ome_manager.AGENT_CONFIG: json.dumps(config)}})
        tier.plane.kubectl("patch", "configmap", "inferenceservice-config", "--namespace", ome_manager.NAMESPACE,
                           "--type=merge", "--patch", patch)
        self.restart(tier)


HOOK = Side("ome-basemodel-hook beside OME v0.1.5", builds.OME, with_hook=True)
UPSTREAM = Side("OME v1.2.2's own PVC backend", builds.OME_PVC_BACKEND, with_hook=False)
SIDES = (HOOK, UPSTREAM)


@contextmanager
def world(side: Side) -> Iterator[Tier]:
    """The side's world, up and serving, stopped however the stories end."""
    tier = Tier(side.build)
    try:
        tier.start(with_hook=side.with_hook)
        if side.with_hook:
            tier.install()
            tier.start_metacontroller()
        yield tier
    finally:
        tier.stop()


@dataclass
class Outcome:
    """What one story left a user with, on one side, for one kind of model."""

    story: str
    kind: str
    side: str
    state: str = ""
    reason: str = ""
    message: str = ""
    """The Ready condition's message, as ``kubectl describe`` shows it."""
    columns: dict[str, str] = field(default_factory=dict)
    """``kubectl get``'s columns that hold a value (but the age)."""
    events: list[str] = field(default_factory=list)
    """``kubectl describe``'s events about the model: reason and message."""
    jobs: list[str] = field(default_factory=list)
    writes: dict[str, Counter[str]] = field(default_factory=dict)
    seconds_to_ready: float | None = None
    left: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    """What each step waited for and saw."""


class Run:
    """One story being told: the model's ``Story``, the clock, the steps seen so far."""

    def __init__(self, tier: Tier, side: Side, kind: str, slug: str, title: str) -> None:
        self.tier = tier
        self.side = side
        self.model = Story(tier, kind, slug)
        self.outcome = Outcome(title, kind, side.title)
        self.created: float | None = None

    def create(self, uri: str | None = None, fields: dict[str, str] | None = None) -> None:
        """The model, as ``Story.create`` makes it, with ``fields`` in its spec beside the URI."""
        self.model.create(uri, fields=fields)
        self.created = time.monotonic()

    def _namespace_flag(self) -> list[str]:
        return ["--namespace", self.model.namespace] if self.model.model_namespace else []

    def until(self, what: str, condition: Callable[[], bool], seconds: float) -> bool:
        """A step: wait for ``condition`` at most ``seconds``; the step records what it saw."""
        started = time.monotonic()
        try:
            self.tier.wait(condition, seconds, what)
            reached = True
        except TimeoutError:
            reached = False
        seen = "%s %s" % self.model.state()
        took = time.monotonic() - started
        self.outcome.steps.append(f"{what}: {'after' if reached else 'not within'} {took if reached else seconds:.0f} s "
                                  f"({seen.strip() or 'no status'})")
        return reached

    def until_state(self, *wanted: str, seconds: float = OBSERVE_SECONDS) -> bool:
        return self.until(" or ".join(wanted), lambda: self.model.state()[0] in wanted, seconds)

    def until_ready(self, seconds: float = READY_SECONDS) -> bool:
        reached = self.until("Ready", lambda: self.model.state()[0] == "Ready", seconds)
        if reached and self.outcome.seconds_to_ready is None and self.created is not None:
            self.outcome.seconds_to_ready = time.monotonic() - self.created
        return reached

    def observe(self, what: str, seconds: float = OBSERVE_SECONDS) -> None:
        """A step that only lets time pass, the side serving meanwhile."""
        self.tier.run_for(seconds)
        self.outcome.steps.append(f"{what}: {seconds:.0f} s later, %s %s" % self.model.state())

    def finish(self, since: datetime) -> Outcome:
        """The outcome, read from the cluster and the audit log once the side has served the
        model a few seconds more (the simulated Metacontroller runs only while the story waits)."""
        self.tier.run_for(SETTLE_SECONDS)
        until = datetime.now(timezone.utc) + timedelta(seconds=1)
        outcome = self.outcome
        model = self.model.model()
        outcome.state, outcome.reason = state(model) if model is not None else ("deleted", "")
        conditions = ((model or {}).get("status") or {}).get("conditions") or []
        outcome.message = next((item.get("message", "") for item in conditions if item.get("type") == "Ready"), "")
        if model is not None:
            outcome.columns = self._columns()
            outcome.events = self._events()
        story = self._audited()
        outcome.jobs = audit.created(self.tier.plane.audit_log, story, "jobs", since, until)
        outcome.writes = audit.costs(self.tier.plane.audit_log, story, since, until)
        outcome.left = self.left()
        return outcome

    def _columns(self) -> dict[str, str]:
        header, line = self.tier.plane.kubectl("get", PLURALS[self.model.kind], self.model.name,
                                               *self._namespace_flag()).stdout.splitlines()[:2]
        starts = [index for index, char in enumerate(header) if char != " " and (index == 0 or header[index - 1] == " ")]
        cells = {header[start:end].strip(): line[start:end].strip() for start, end in zip(starts, [*starts[1:], None])}
        return {name: value for name, value in cells.items() if value and name not in ("NAME", "AGE")}

    def _events(self) -> list[str]:
        about = f"involvedObject.kind={self.model.kind},involvedObject.name={self.model.name}"
        if self.model.model_namespace:
            about += f",involvedObject.namespace={self.model.model_namespace}"
        found = self.tier.plane.kubectl("get", "events", "--all-namespaces", "--field-selector", about,
                                        "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}").stdout
        return [line for line in found.splitlines() if line]

    def _audited(self) -> audit.Story:
        """The story as the audit log is read for it; for OME's own backend, with the objects it
        keeps for the model in OME's namespace."""
        elsewhere: frozenset[tuple[str, str]] = frozenset()
        if not self.side.with_hook:
            key = self.model.name if self.model.kind == "ClusterBaseModel" else f"{self.model.namespace}/{self.model.name}"
            account = ome_manager.agent_config(self.side.build)["serviceAccount"]
            elsewhere = frozenset({(ome_manager.NAMESPACE, "pvc-metadata-" + hashlib.sha256(key.encode()).hexdigest()[:8]),
                                   (ome_manager.NAMESPACE, f"{account}-{self.model.namespace}")})
        return audit.Story(self.model.kind, self.model.name, self.model.namespace, elsewhere)

    def left(self) -> list[str]:
        """What remains of the story besides the model and its claim: in its namespace, in OME's
        namespace for it, and for a ClusterBaseModel cluster-wide under its name."""
        story = self._audited()
        found = []
        for api_version, resource in (("batch/v1", "jobs"), ("v1", "pods"), ("v1", "serviceaccounts"), ("v1", "configmaps"),
                                      ("rbac.authorization.k8s.io/v1", "roles"), ("rbac.authorization.k8s.io/v1", "rolebindings")):
            for item in self.tier.objects(api_version, resource, self.model.namespace):
                if item["metadata"]["name"] not in ("default", "kube-root-ca.crt"):
                    found.append(f"{item['kind']} {item['metadata']['name']}")
            for namespace, name in sorted(story.elsewhere):
                found += [f"{item['kind']} {namespace}/{name}" for item in self.tier.objects(api_version, resource, namespace)
                          if item["metadata"]["name"] == name]
        if self.model.kind == "ClusterBaseModel":
            for resource in ("clusterroles", "clusterrolebindings"):
                found += [f"{item['kind']} {item['metadata']['name']}"
                          for item in self.tier.objects("rbac.authorization.k8s.io/v1", resource)
                          if self.model.name in item["metadata"]["name"]]
        return sorted(found)


# --- the stories ------------------------------------------------------------------------------------
# Each takes a fresh ``Run`` and tells its story; ``tell`` reads the outcome.

def happy_path(run: Run) -> None:
    run.model.storage()
    run.create()
    run.until_ready()


def pvc_missing_then_created(run: Run) -> None:
    run.model.namespace_only()
    run.create()
    run.observe("no PVC")
    run.model.storage()
    run.until_ready()


def pvc_pending_then_bound(run: Run) -> None:
    run.model.storage(bound=False)
    run.create()
    run.observe("PVC Pending")
    run.tier.add_volume(run.model.namespace, CLAIM)
    run.until_ready()


def pvc_lost(run: Run) -> None:
    happy_path(run)
    run.tier.lose_volume(run.model.namespace, CLAIM)
    run.until("the claim Lost said", lambda: run.model.state()[0] != "Ready", OBSERVE_SECONDS)


def pvc_terminating(run: Run) -> None:
    """The claim deleted while something still holds it (a serving pod would), before the model."""
    run.model.storage()
    run.tier.plane.kubectl("patch", "persistentvolumeclaim", CLAIM, "--namespace", run.model.namespace, "--type=json",
                           "--patch", json.dumps([{"op": "add", "path": "/metadata/finalizers/-", "value": HOLD_FINALIZER}]))
    run.tier.plane.kubectl("delete", "persistentvolumeclaim", CLAIM, "--namespace", run.model.namespace, "--wait=false")
    run.create()
    run.until_state("Failed")


def block_volume(run: Run) -> None:
    run.model.storage(volume_mode="Block")
    run.create()
    run.until_state("Failed")


def agent_fails_then_config_fixed(run: Run) -> None:
    """The agent fails on a broken config.json until its Job gives up; then the file is fixed,
    as someone who read the status would."""
    run.model.storage(config=BROKEN_CONFIG)
    run.create()
    run.until_state("Failed", seconds=READY_SECONDS)
    run.until("the Job given up", lambda: any(
        condition.get("type") == "Failed" and condition.get("status") == "True"
        for job in run.model.jobs() for condition in (job.get("status") or {}).get("conditions") or []), READY_SECONDS)
    write_model(run.tier.workdir / "volumes" / f"{run.model.namespace}-{CLAIM}" / SUB_PATH)
    run.until_ready(READY_SECONDS)


def job_ttl_after_ready(run: Run) -> None:
    """With the Jobs' TTL at ``SHORT_TTL_SECONDS`` on both sides: does a Job run again once the
    finished one is gone?"""
    happy_path(run)
    finished = {job["metadata"]["uid"] for job in run.model.jobs()}
    run.until("the finished Job gone (its TTL)",
              lambda: not finished & {job["metadata"]["uid"] for job in run.model.jobs()}, SHORT_TTL_SECONDS * 3)
    run.observe("after the TTL", SHORT_TTL_SECONDS * 2)


def restart_while_job_runs(run: Run) -> None:
    """What serves the model restarted while its Job is active (its pod held Pending)."""
    assert run.tier.kubelet is not None
    run.model.storage()
    run.tier.kubelet.pause()
    try:
        run.create()
        run.until("a Job active", lambda: bool(run.model.jobs()), READY_SECONDS)
        run.side.restart(run.tier)
    finally:
        run.tier.kubelet.resume()
    run.until_ready()


def metadata_in_spec(run: Run) -> None:
    run.model.storage()
    run.create(fields=SPEC_METADATA)
    run.until_ready()
    run.observe("once Ready")


def pvc_in_another_namespace(run: Run) -> None:
    """A BaseModel naming another namespace's claim; a ClusterBaseModel's claim, which is
    always in a namespace of its own."""
    if run.model.kind == "ClusterBaseModel":
        happy_path(run)
        return
    run.tier.storage(f"{run.model.namespace}-{OTHER_NAMESPACE}", CLAIM, SUB_PATH)
    run.model.namespace_only()
    run.create(uri=f"pvc://{run.model.namespace}-{OTHER_NAMESPACE}:{CLAIM}/{SUB_PATH}")
    run.until_state("Failed")


def deletion(run: Run) -> None:
    happy_path(run)
    run.model.delete()
    run.until("the model gone", lambda: run.model.model() is None, READY_SECONDS)
    run.until("nothing of it left", lambda: not run.left(), OBSERVE_SECONDS)


STORIES: tuple[tuple[str, str, Callable[[Run], None]], ...] = (
    ("happy", "happy path", happy_path),
    ("missing", "PVC missing, then created", pvc_missing_then_created),
    ("pending", "PVC Pending, then Bound", pvc_pending_then_bound),
    ("lost", "PVC Lost after Ready", pvc_lost),
    ("terminating", "PVC terminating", pvc_terminating),
    ("block", "volumeMode: Block", block_volume),
    ("agent", "agent fails, then config.json fixed", agent_fails_then_config_fixed),
    ("restart", "manager restarted while the Job runs", restart_while_job_runs),
    ("present", "metadata already in the spec", metadata_in_spec),
    ("elsewhere", "PVC in another namespace", pvc_in_another_namespace),
    ("delete", "deletion", deletion),
    ("ttl", f"Job's TTL ({SHORT_TTL_SECONDS} s) passing after Ready", job_ttl_after_ready),
)
"""Every story, in the order they are told; the TTL story last, since it shortens the TTL."""


def tell(tier: Tier, side: Side, kind: str, slug: str, title: str, story: Callable[[Run], None]) -> Outcome:
    """The story told, and what it left; a story that breaks off says where and why in its
    steps (its traceback on stderr), and the next one is told all the same."""
    run = Run(tier, side, kind, slug, title)
    since = datetime.now(timezone.utc)
    try:
        story(run)
    except Exception as error:  # noqa: BLE001 - a benchmark reports a broken story and goes on
        traceback.print_exc()
        run.outcome.steps.append(f"the story broke off: {type(error).__name__}: {error}")
    return run.finish(since)


def tell_all(side: Side, kinds: tuple[str, ...] = KINDS, only: tuple[str, ...] = ()) -> Iterator[Outcome]:
    """Every story (or those ``only`` names) for each kind, in one world of ``side``, each
    outcome as soon as it is told."""
    with world(side) as tier:
        for slug, title, story in STORIES:
            if only and slug not in only:
                continue
            if story is job_ttl_after_ready:
                side.shorten_job_ttl(tier, SHORT_TTL_SECONDS)
            for kind in kinds:
                yield tell(tier, side, kind, slug, title, story)
