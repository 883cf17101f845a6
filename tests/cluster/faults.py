"""Faults on the real control plane: the frame every fault story shares.

A fault story puts its models (a BaseModel and a ClusterBaseModel, side by side, or one
kind where the moment is one model's) through one fault: a process killed with SIGKILL at
a chosen moment and started again as its Deployment, StatefulSet or systemd unit would
start it, or a hook that answers too late. It ends with the models in their final state
and everything ``nothing_lost`` checks; ``RECOVERIES`` keeps, per fault, the seconds from
the restart (or the late answer) to that final state, which the session prints.

However a story ends, ``FaultStory`` leaves the world running for the next one: whatever
it killed is started again, whatever it paused resumed.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from tests.cluster import nothing_lost
from tests.cluster.api import path_of
from tests.cluster.control_plane import METACONTROLLER
from tests.cluster.story import KINDS, Story
from tests.cluster.tier import MODELS, PLURALS, Tier
from tests.metacontroller.cluster import ApiError, resource_of

STEP_SECONDS = 60.0
FINAL_SECONDS = 240.0
"""The longest a story waits for its models' final state after the fault: Metacontroller's
per-object backoff after half a minute of failed calls is some 20 s; the rest is a loaded
CI machine's margin."""
SETTLED = {"ExtractionRecord", "Job", "Pod"}
"""What a model that went Ready through its Job owns once the Job ended: the Job and its pods,
kept until the Job's TTL for their logs, and its record; the grant went with the Job."""


@dataclass(frozen=True)
class Recovery:
    """Seconds from a fault's restart to its models' final state."""

    fault: str
    kinds: tuple[str, ...]
    seconds: float


RECOVERIES: list[Recovery] = []
"""Every fault told this session."""


def side_by_side(tier: Tier, slug: str, kinds: tuple[str, ...] = KINDS) -> list[Story]:
    """A model of each kind, each in a namespace of its own."""
    return [Story(tier, kind, slug) for kind in kinds]


class FaultStory:
    """Models facing one fault."""

    def __init__(self, tier: Tier, fault: str, stories: list[Story]) -> None:
        self.tier = tier
        self.fault = fault
        self.stories = stories
        self.restarted: float | None = None

    def __enter__(self) -> FaultStory:
        return self

    def __exit__(self, *_: object) -> None:
        restore(self.tier)

    @property
    def namespaces(self) -> list[str]:
        return [story.namespace for story in self.stories]

    def storage(self) -> None:
        for story in self.stories:
            story.storage()

    def create(self, labels: dict[str, str] | None = None) -> None:
        for story in self.stories:
            story.create(labels=labels)

    def wait(self, condition: Callable[[], bool], what: str, seconds: float = STEP_SECONDS) -> None:
        self.tier.wait(condition, seconds, f"{self.fault}: {what}")

    def jobs(self) -> list[list[dict[str, Any]]]:
        """Each story's Jobs."""
        return [story.jobs() for story in self.stories]

    def jobs_finished(self) -> bool:
        """Every story has a Job and each has finished, as its own status says."""
        return all(jobs and all(finished(job) for job in jobs) for jobs in self.jobs())

    def pods_ended(self) -> bool:
        """Every story's Job pods ran to their end, as the kubelet reported it."""
        return all(pods and all(pod.get("status", {}).get("phase") in ("Succeeded", "Failed") for pod in pods)
                   for pods in (story.tier.objects("v1", "pods", story.namespace) for story in self.stories))

    def restart_done(self, at: float | None = None) -> None:
        """The fault is over (at ``time.monotonic()`` ``at``, or now): what was killed runs
        again, or the late answer went back."""
        self.restarted = time.monotonic() if at is None else at

    def ends(self, children: set[str] | None = None, recorded: bool = True) -> None:
        """``settles``, within ``FINAL_SECONDS`` of the restart, which ``RECOVERIES`` keeps."""
        assert self.restarted is not None, "the story never said when its fault ended"
        self.settles(children, recorded)
        RECOVERIES.append(Recovery(self.fault, tuple(story.kind for story in self.stories),
                                   time.monotonic() - self.restarted))

    def settles(self, children: set[str] | None = None, recorded: bool = True) -> None:
        """Every model Ready owning exactly the kinds ``children`` (by default what a Ready model
        keeps once its Job ended), after one Job; then nothing lost."""
        state = ("Ready", "Ready")
        wanted = SETTLED if children is None else children
        for story in self.stories:
            try:
                self.tier.wait(lambda story=story: story.state() == state and set(story.children()) == wanted,
                               FINAL_SECONDS, f"{self.fault}: {story.kind} {story.name} {state} owning {sorted(wanted)}")
            except TimeoutError as error:
                raise TimeoutError(f"{error}; it was {story.state()} owning {story.children()}") from None
        for story in self.stories:
            nothing_lost.check(story, 1, recorded)


def finished(job: dict[str, Any]) -> bool:
    return any(condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True"
               for condition in (job.get("status") or {}).get("conditions") or [])


def restore(tier: Tier) -> None:
    """Everything a story may have stopped, running again: the plane's processes (OME's manager
    and a Metacontroller binary among them), the hook's replicas, a simulated Metacontroller."""
    if tier.ome is not None:
        tier.ome.resume()
    for process in tier.plane.processes:
        if process.killed:
            tier.plane.start_again(process.name)
    assert tier.hooks is not None
    for replica in tier.hooks.replicas:
        if replica.process.killed:
            replica.start()
    if tier.metacontroller is not None and not tier.metacontroller.running:
        tier.restart_metacontroller()


# --- moments ------------------------------------------------------------------------------------------

STATUS_WITHHELD_LABEL = "faults.ome-basemodel-hook.ome.io/status-withheld"


@contextmanager
def status_withheld(tier: Tier) -> Iterator[None]:
    """Within the block, the API server refuses Metacontroller's status writes for every model
    labelled ``STATUS_WITHHELD_LABEL``, as if each were the write a process that dies never
    makes: a ValidatingAdmissionPolicy, like the status fence. Metacontroller creates the
    children of a sync before it writes the status, so a model's Job exists while its
    status was never written."""
    name = "faults-status-withheld"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["ome.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                                                         "resources": ["basemodels/status", "clusterbasemodels/status"]}]},
                 "validations": [{"expression": f"request.userInfo.username != '{METACONTROLLER.user}' || "
                                                f"!has(object.metadata.labels) || !('{STATUS_WITHHELD_LABEL}' in object.metadata.labels)",
                                  "message": "the status write is withheld by a fault story", "reason": "Forbidden"}]},
    }
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    probe = {"apiVersion": MODELS, "kind": "ClusterBaseModel",
             "metadata": {"name": f"{name}-probe", "labels": {STATUS_WITHHELD_LABEL: "true"}},
             "spec": {"storage": {"storageUri": "hf://faults/status-withheld-probe"}}}
    tier.apply(policy, binding, probe)
    metacontroller = tier.plane.client(METACONTROLLER)
    probe_status = path_of(resource_of(MODELS, PLURALS["ClusterBaseModel"]), name=f"{name}-probe", subresource="status")

    def refused() -> bool:
        """The admission plugin's own view of the policies lags their type check: the probe's
        status written back unchanged (an hf:// model the hook never answers for), dry run
        as Metacontroller, is refused once the policy is in force. Any other refusal fails."""
        stored = tier.admin.request("GET", probe_status)
        try:
            metacontroller.request("PUT", probe_status, stored, query={"dryRun": "All"})
        except ApiError as error:
            if error.code == 403 and "withheld by a fault story" in str(error):
                return True
            if error.code != 409:  # OME's manager wrote the probe (its finalizer) since the read
                raise
        return False
    tier.wait(refused, STEP_SECONDS, "the policy withholding the status, in force for Metacontroller")
    try:
        yield
    finally:
        tier.plane.kubectl("delete", "clusterbasemodel", f"{name}-probe", "--ignore-not-found", "--wait=false")
        tier.plane.kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found")
        tier.plane.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found")
