"""Stand-ins for the rest of the cluster, each doing only what the hook can observe, each
writing as the user it is in a cluster (``identities``).

- ``JobController``: a pod per try (Pending, then Running, then terminated with the
  agent's exit code and termination message); pod failures retried after the Job
  controller's backoff (10 s doubling) until ``backoffLimit``; then ``FailureTarget`` and,
  a second later, ``Failed`` with reason ``BackoffLimitExceeded``; past
  ``activeDeadlineSeconds`` the pod is deleted and the reason is ``DeadlineExceeded``;
  success adds ``SuccessCriteriaMet`` and ``Complete`` (Kubernetes 1.31+).
- ``TTLController``: deletes a finished Job ``ttlSecondsAfterFinished`` after it finished.
- ``PVCBinder``: binds a Pending PVC after a delay, can lose it, and releases the
  ``kubernetes.io/pvc-protection`` finalizer of a deleted PVC once no running pod uses it.
- ``Agent``: what ``ome-agent model-metadata`` does in a succeeding pod: it writes the
  metadata into the model's spec (a generation bump), as the Job's ServiceAccount.

OME's model agents and manager are in ``ome``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hooks.conditions import format_time
from tests.metacontroller.selection import clone
from tests.metacontroller.cluster import ApiError, Obj
from tests.metacontroller.identities import (
    JOB_CONTROLLER, PV_BINDER, PVC_PROTECTION, TTL_CONTROLLER, kubelet, service_account,
)
from tests.metacontroller.manage_children import controller_ref

if TYPE_CHECKING:
    from tests.metacontroller.simulator import Simulator


def agent_error(cause: str) -> str:
    """The line zap logs as the agent gives up (its JSON encoder escapes quotes)."""
    escaped = cause.replace("\\", "\\\\").replace('"', '\\"')
    return ('{"level":"error","ts":1764503962.3,"caller":"ome-agent/model_metadata_agent.go:74",'
            f'"msg":"model-metadata encountered an error during execution","error":"{escaped}"}}')


AGENT_ERROR = agent_error("no model config file found (tried: config.json, model_config.json, configuration.json)")
METADATA = {"modelType": "llama", "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "8.03B"}
POD_START_SECONDS = 2.0
KUBE = "kube-controller-manager"


@dataclass(frozen=True)
class Run:
    """How a Job's pods behave: ``succeed`` or ``fail`` after ``seconds``, or ``hang`` until the deadline."""

    outcome: str
    seconds: float = 30.0


def _suffix(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:5]


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now}


class JobController:
    """``plan`` says how each Job runs (by order of creation); Jobs beyond it succeed."""

    def __init__(self, sim: Simulator, plan: list[Run] | None = None, agent: Agent | None = None) -> None:
        self.sim = sim
        self.plan = list(plan or [])
        self.agent = agent
        self.started = 0
        sim.cluster.watchers.append(self._on_event)

    def _on_event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        if event == "ADDED" and new is not None and new["kind"] == "Job" and not new["spec"].get("suspend"):
            run = self.plan[self.started] if self.started < len(self.plan) else Run("succeed")
            self.started += 1
            key = (new["metadata"]["namespace"], new["metadata"]["name"], new["metadata"]["uid"])
            self.sim.after(0, lambda: self._start(key, run))

    def _job(self, key: tuple[str, str, str]) -> Obj | None:
        job = self.sim.cluster.find("batch/v1", "Job", key[0], key[1])
        return job if job is not None and job["metadata"]["uid"] == key[2] else None

    def _set_status(self, job: Obj, **changes: Any) -> Obj:
        job["status"] = {**job.get("status", {}), **changes}
        return self.sim.cluster.update(job, manager=KUBE, user=JOB_CONTROLLER)

    def _start(self, key: tuple[str, str, str], run: Run) -> None:
        job = self._job(key)
        if job is None:
            return
        now = format_time(self.sim.clock.now)
        self._set_status(job, startTime=now, active=1, ready=0, terminating=0, uncountedTerminatedPods={})
        deadline = job["spec"].get("activeDeadlineSeconds")
        if deadline is not None:
            self.sim.after(deadline, lambda: self._deadline(key))
        self._new_pod(key, run, 0)

    def _new_pod(self, key: tuple[str, str, str], run: Run, tries: int) -> None:
        job = self._job(key)
        if job is None or self._finished(job):
            return
        template = job["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-{_suffix(key[2] + str(tries))}",
                "namespace": key[0],
                "labels": clone(template["metadata"]["labels"]),
                "ownerReferences": [controller_ref(job)],
            },
            "spec": {**clone(template["spec"]), "nodeName": "node-a"},
            "status": {"phase": "Pending", "containerStatuses": [self._container(job, {"waiting": {"reason": "ContainerCreating"}})]},
        }
        created = self.sim.cluster.create(pod, manager=KUBE, user=JOB_CONTROLLER)
        pod_key = (key[0], created["metadata"]["name"])
        self.sim.after(POD_START_SECONDS, lambda: self._running(key, pod_key, run, tries))

    def _container(self, job: Obj, state: dict[str, Any], ready: bool = False) -> dict[str, Any]:
        container = job["spec"]["template"]["spec"]["containers"][0]
        return {"name": container["name"], "image": container["image"], "imageID": "", "ready": ready,
                "restartCount": 0, "started": "running" in state, "state": state}

    def _pod(self, pod_key: tuple[str, str]) -> Obj | None:
        return self.sim.cluster.find("v1", "Pod", *pod_key)

    def _running(self, key: tuple[str, str, str], pod_key: tuple[str, str], run: Run, tries: int) -> None:
        job, pod = self._job(key), self._pod(pod_key)
        if job is None or pod is None or self._finished(job):
            return
        now = format_time(self.sim.clock.now)
        pod["status"] = {"phase": "Running", "startTime": now,
                         "containerStatuses": [self._container(job, {"running": {"startedAt": now}}, ready=True)]}
        self.sim.cluster.update(pod, manager="kubelet", user=kubelet(pod["spec"]["nodeName"]))
        self._set_status(job, ready=1)
        if run.outcome != "hang":
            self.sim.after(max(run.seconds - POD_START_SECONDS, 0), lambda: self._ended(key, pod_key, run, tries, now))

    def _ended(self, key: tuple[str, str, str], pod_key: tuple[str, str], run: Run, tries: int, started: str) -> None:
        job, pod = self._job(key), self._pod(pod_key)
        if job is None or pod is None or self._finished(job):
            return
        now = format_time(self.sim.clock.now)
        said = AGENT_ERROR if run.outcome != "succeed" else self.agent.fill(job) if self.agent is not None else ""
        succeeded = not said
        terminated = {"exitCode": 0 if succeeded else 1, "reason": "Completed" if succeeded else "Error",
                      "startedAt": started, "finishedAt": now}
        if not succeeded:
            terminated["message"] = said + "\n"
        pod["status"] = {"phase": "Succeeded" if succeeded else "Failed", "startTime": started,
                         "containerStatuses": [self._container(job, {"terminated": terminated})]}
        self.sim.cluster.update(pod, manager="kubelet", user=kubelet(pod["spec"]["nodeName"]))
        if succeeded:
            self._set_status(job, active=0, ready=0, succeeded=1, completionTime=now, conditions=[
                _condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods", now),
                _condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods", now)])
            return
        failed = job["status"].get("failed", 0) + 1
        if failed > job["spec"].get("backoffLimit", 6):
            self._fail(key, "BackoffLimitExceeded", "Job has reached the specified backoff limit", failed=failed)
            return
        self._set_status(job, active=0, ready=0, failed=failed)
        self.sim.after(10 * 2 ** (failed - 1), lambda: self._retry(key, run, tries + 1))

    def _retry(self, key: tuple[str, str, str], run: Run, tries: int) -> None:
        job = self._job(key)
        if job is not None and not self._finished(job):
            self._set_status(job, active=1)
            self._new_pod(key, run, tries)

    def _deadline(self, key: tuple[str, str, str]) -> None:
        job = self._job(key)
        if job is None or self._finished(job):
            return
        for pod in self.sim.cluster.list("v1", "Pod", key[0]):
            if pod["metadata"]["labels"].get("batch.kubernetes.io/controller-uid") == key[2] \
                    and pod["status"]["phase"] in ("Pending", "Running"):
                self.sim.cluster.delete("v1", "Pod", key[0], pod["metadata"]["name"], user=JOB_CONTROLLER)
        self._fail(key, "DeadlineExceeded", "Job was active longer than specified deadline",
                   failed=job["status"].get("failed", 0) + job["status"].get("active", 0))

    def _fail(self, key: tuple[str, str, str], reason: str, message: str, failed: int) -> None:
        """``FailureTarget`` first; ``Failed`` once the pods are accounted for."""
        job = self._job(key)
        assert job is not None
        now = format_time(self.sim.clock.now)
        self._set_status(job, active=0, ready=0, failed=failed, conditions=[_condition("FailureTarget", reason, message, now)])

        def failed_condition() -> None:
            later = self._job(key)
            if later is not None:
                conditions = later["status"]["conditions"] + [_condition("Failed", reason, message, format_time(self.sim.clock.now))]
                self._set_status(later, conditions=conditions)
        self.sim.after(1, failed_condition)

    @staticmethod
    def _finished(job: Obj) -> bool:
        return any(item["type"] in ("Complete", "Failed", "FailureTarget") and item["status"] == "True"
                   for item in job.get("status", {}).get("conditions") or [])


class TTLController:
    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.scheduled: set[str] = set()
        sim.cluster.watchers.append(self._on_event)

    def _on_event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        if new is None or new["kind"] != "Job" or new["metadata"]["uid"] in self.scheduled:
            return
        finished = [item for item in new.get("status", {}).get("conditions") or []
                    if item["type"] in ("Complete", "Failed") and item["status"] == "True"]
        ttl = new["spec"].get("ttlSecondsAfterFinished")
        if finished and ttl is not None:
            self.scheduled.add(new["metadata"]["uid"])
            namespace, name, uid = new["metadata"]["namespace"], new["metadata"]["name"], new["metadata"]["uid"]

            def expire() -> None:
                try:
                    self.sim.cluster.delete("batch/v1", "Job", namespace, name, uid=uid, user=TTL_CONTROLLER)
                except ApiError:
                    pass
            self.sim.after(ttl, expire)


class PVCBinder:
    PROTECTION = "kubernetes.io/pvc-protection"

    def __init__(self, sim: Simulator, bind_after: float | None = 0.0) -> None:
        self.sim = sim
        self.bind_after = bind_after
        sim.cluster.watchers.append(self._on_event)

    def create(self, namespace: str, name: str, phase: str | None = "Pending") -> Obj:
        """A PVC as ``kubectl apply`` makes it (the protection finalizer added by admission)."""
        pvc = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "finalizers": [self.PROTECTION]},
            "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "500Gi"}},
                     "storageClassName": "nfs-models", "volumeMode": "Filesystem"},
        }
        if phase is not None:
            pvc["status"] = {"phase": phase}
        return self.sim.cluster.create(pvc)

    def bind(self, namespace: str, name: str) -> None:
        self._phase(namespace, name, "Bound")

    def lose(self, namespace: str, name: str) -> None:
        self._phase(namespace, name, "Lost")

    def _phase(self, namespace: str, name: str, phase: str) -> None:
        pvc = self.sim.cluster.find("v1", "PersistentVolumeClaim", namespace, name)
        if pvc is None:
            return
        volume = f"pvc-{_suffix(pvc['metadata']['uid'])}"
        if phase == "Bound":
            pvc["spec"]["volumeName"] = volume
            pvc["status"] = {"phase": "Bound", "accessModes": ["ReadOnlyMany"], "capacity": {"storage": "500Gi"}}
        else:
            pvc["status"] = {**pvc.get("status", {}), "phase": phase}
        self.sim.cluster.update(pvc, manager=KUBE, user=PV_BINDER)

    def _on_event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        if obj["kind"] == "PersistentVolumeClaim" and event == "ADDED" and self.bind_after is not None \
                and (obj.get("status") or {}).get("phase") in (None, "Pending"):
            namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            self.sim.after(self.bind_after, lambda: self.bind(namespace, name))
        if obj["kind"] in ("PersistentVolumeClaim", "Pod"):
            self.sim.after(0, self._release_deleted)

    def _release_deleted(self) -> None:
        """The pvc-protection controller: a deleted PVC goes once no running pod mounts it."""
        for pvc in self.sim.cluster.list("v1", "PersistentVolumeClaim"):
            if not pvc["metadata"].get("deletionTimestamp") or self.PROTECTION not in pvc["metadata"].get("finalizers", []):
                continue
            users = [pod for pod in self.sim.cluster.list("v1", "Pod", pvc["metadata"]["namespace"])
                     if pod["status"]["phase"] in ("Pending", "Running")
                     and any((volume.get("persistentVolumeClaim") or {}).get("claimName") == pvc["metadata"]["name"]
                             for volume in pod["spec"].get("volumes") or [])]
            if not users:
                pvc["metadata"]["finalizers"].remove(self.PROTECTION)
                self.sim.cluster.update(pvc, manager=KUBE, user=PVC_PROTECTION)


class Agent:
    """``ome-agent model-metadata``: finds its model from its arguments, reads it and fills
    the spec with one Update (``internal/ome-agent/model-metadata/metadata.go``); an
    error (a Conflict when another writer updated the model in between) ends the pod
    with exit code 1 and the error in its log."""

    def __init__(self, sim: Simulator, metadata: dict[str, str] | None = None) -> None:
        self.sim = sim
        self.metadata = metadata or METADATA
        self.writes = 0

    def fill(self, job: Obj) -> str:
        """The agent's last log line when it failed, else ""."""
        args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        name = args[args.index("--basemodel-name") + 1]
        if "--cluster-scoped" in args:
            kind, namespace, what = "ClusterBaseModel", None, name
        else:
            kind, namespace = "BaseModel", args[args.index("--basemodel-namespace") + 1]
            what = f"{namespace}/{name}"
        model = self.sim.cluster.find("ome.io/v1beta1", kind, namespace, name)
        if model is None:
            return agent_error(f"failed to get {kind} {what}: {kind.lower()}s.ome.io \"{name}\" not found")
        model["spec"].update(self.metadata)
        pod_spec = job["spec"]["template"]["spec"]
        user = service_account(job["metadata"]["namespace"], pod_spec.get("serviceAccountName") or "default")
        try:
            self.sim.cluster.update(model, manager="ome-agent", user=user)
        except ApiError as error:
            return agent_error(f"failed to update {kind} {what}: {error}")
        self.writes += 1
        return ""

