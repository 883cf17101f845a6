"""What the hook costs the cluster's shared Metacontroller, on the cluster tier's real components.

    python -m bench.cluster [--models 100] [--pods 10000] [--configmaps 2000]
                            [--service-accounts 1000] [--role-bindings 1000]
                            ["--flags=[hook-crds:]--client-go-qps=50 --client-go-burst=100" ...]
                            [--per-kind 2000 --gogc 10]

Each ``--flags`` value is one run, in a world of its own, under OME's own CRDs (as the
install leaves them) or, with the ``hook-crds:`` prefix, the hook's optional ones. By
default three: Metacontroller's defaults, then the client rate limit the install docs
recommend, both under OME's CRDs, then that limit under the hook's CRDs. A run starts the cluster
tier's world (etcd, kube-apiserver and kube-controller-manager, OME's manager, the hook,
the played kubelet), fills it with a modest cluster's objects that are not the hook's (pods
of about 7 KB stored, on a node nobody serves, ConfigMaps of about 5 KB, ServiceAccounts,
RoleBindings), then:

1. starts Metacontroller before the hook is installed, and measures it alone;
2. installs the hook as docs/install.md says, and measures Metacontroller again;
3. creates ``--models`` ``pvc://`` models at once, each on a Bound PVC of its own, and
   waits until every one is Ready; seconds from the creation to Ready (p50, p95, all),
   and Metacontroller measured once more;
4. with ``--per-kind N``, adds N objects of each kind Metacontroller caches for the hook
   (and of Pods, which it caches only with ``READ_JOB_PODS=true``), one kind at a time,
   and measures what each 1,000 cost (with ``--gogc 10`` the binary collects its garbage
   often enough that its heap in use follows what it holds);
5. reads the API server's audit log: every write per model, by actor.

With a real Metacontroller (``METACONTROLLER_BIN``, built by hand from its repository, as
the cluster tier takes it), "measured" is its resident memory (``VmRSS``, what an OOM kill
goes by) and its Go heap in use (its own metrics), each the median of several samples once
it has settled. With the simulator, which holds no informers of its own, it is the bytes of
every object of every kind Metacontroller would cache for these controllers (the kinds
they name as children or related objects, and the namespaces), which is what its
informers would hold; the seconds to Ready then are the simulator's, which is neither
rate-limited nor parallel as Metacontroller is, and say little.

Nothing here is a test: the figures go to docs/performance.md with the date and versions.
Everything talks only to 127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable

import yaml

from tests.cluster import audit, builds
from tests.cluster.api import Client
from tests.cluster.metacontroller_binary import MetacontrollerBinary, binary
from tests.cluster.processes import free_port
from tests.cluster.tier import MODELS, Tier, state
from tests.metacontroller.selection import Obj

LOAD_NAMESPACES = 20
LOAD_NODE = "nobody-serves-this-node"
"""The background pods' node: the played scheduler binds only unscheduled pods, and the
played kubelet runs only its own node's, so these stay as they are stored."""
CREATE_THREADS = 8
SETTLE_SECONDS = 20.0
SAMPLES = 7
READY_TIMEOUT_SECONDS = 900.0
POLL_SECONDS = 0.5
RECOMMENDED_FLAGS = "--client-go-qps=50 --client-go-burst=100"
HOOK_CRDS = "hook-crds:"
CACHED_KINDS = (
    ("ome.io/v1beta1", "basemodels"), ("ome.io/v1beta1", "clusterbasemodels"),
    ("batch/v1", "jobs"), ("v1", "serviceaccounts"), ("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords"),
    ("rbac.authorization.k8s.io/v1", "roles"), ("rbac.authorization.k8s.io/v1", "rolebindings"),
    ("rbac.authorization.k8s.io/v1", "clusterroles"), ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    ("v1", "persistentvolumeclaims"), ("v1", "namespaces"),
)
"""What Metacontroller caches for the hook's controllers: parents, children, related types."""


@dataclass
class Run:
    """One run's figures."""

    flags: str
    hook_crds: bool
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)
    """By stage: (resident MiB, heap MiB) for a binary, (cached MiB, 0) for the simulator."""
    ready_seconds: list[float] = field(default_factory=list)
    writes: dict[str, Counter[str]] = field(default_factory=dict)
    per_kind: dict[str, tuple[float, float]] = field(default_factory=dict)
    """MiB per 1,000 objects of a kind: (resident, Go heap in use) for a binary, (cached, 0) for the simulator."""


# --- the background load -----------------------------------------------------------------------

def _padding(size: int) -> str:
    return "x" * size


def load(world: Tier, pods: int, configmaps: int, service_accounts: int, role_bindings: int) -> None:
    """A modest cluster's objects that are not the hook's, created in parallel."""
    admin = world.admin
    assert admin is not None
    namespaces = [f"load-{index}" for index in range(LOAD_NAMESPACES)]
    world.apply(*({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in namespaces))
    poll(lambda: all(_has_default_account(admin, name) for name in namespaces), 120, "the load's namespaces' default ServiceAccounts")
    jobs: list[tuple[str, Obj]] = []
    jobs += [(namespaces[index % LOAD_NAMESPACES], _pod(index)) for index in range(pods)]
    jobs += [(namespaces[index % LOAD_NAMESPACES], _configmap(index)) for index in range(configmaps)]
    jobs += [(namespaces[index % LOAD_NAMESPACES], _service_account(index)) for index in range(service_accounts)]
    jobs += [(namespaces[index % LOAD_NAMESPACES], _role_binding(index)) for index in range(role_bindings)]
    create_all(admin, jobs)


def poll(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Until ``condition()``; fails with ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds:.0f} s")
        time.sleep(POLL_SECONDS)


def create_all(client: Client, objects: Iterable[tuple[str | None, Obj]]) -> None:
    """Every object, by ``CREATE_THREADS`` requests at once."""
    def create(item: tuple[str | None, Obj]) -> None:
        namespace, obj = item
        if namespace is not None:
            obj["metadata"]["namespace"] = namespace
        client.create(obj, "bench")
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        for _ in pool.map(create, list(objects)):
            pass


def _has_default_account(admin: Client, namespace: str) -> bool:
    return admin.find("v1", "serviceaccounts", namespace, "default") is not None


def _pod(index: int) -> Obj:
    """About 7 KB stored, as a pod with a few containers, probes and labels is."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"load-{index}", "labels": {"app": f"load-{index % 50}", "tier": "background"},
                         "annotations": {"bench.ome-basemodel-hook/padding": _padding(5500)}},
            "spec": {"nodeName": LOAD_NODE, "automountServiceAccountToken": False,
                     "containers": [{"name": "app", "image": "registry.example.com/app:1.0",
                                     "env": [{"name": f"SETTING_{number}", "value": f"value-{number}"} for number in range(20)]}]}}


def _configmap(index: int) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"load-{index}"},
            "data": {"settings.yaml": _padding(5000)}}


def _service_account(index: int) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"load-{index}"}}


def _role_binding(index: int) -> Obj:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": f"load-{index}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}


# --- what Metacontroller holds ---------------------------------------------------------------------

class Measure:
    """Metacontroller's memory now: a binary's, or what the simulator's informers would hold."""

    def __init__(self, world: Tier, metrics_port: int | None) -> None:
        self.world = world
        self.metrics_port = metrics_port

    def __call__(self) -> tuple[float, float]:
        metacontroller = self.world.metacontroller
        if isinstance(metacontroller, MetacontrollerBinary) and metacontroller.process is not None:
            time.sleep(SETTLE_SECONDS)
            samples = []
            for _ in range(SAMPLES):
                samples.append((_resident_mib(metacontroller.process.popen.pid), self._heap_mib()))
                time.sleep(1)
            return statistics.median(rss for rss, _ in samples), statistics.median(heap for _, heap in samples)
        return _cached_mib(self.world), 0.0

    def _heap_mib(self) -> float:
        if self.metrics_port is None:
            return 0.0
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("go_memstats_heap_inuse_bytes "):
                    return float(line.split()[1]) / 2**20
        return 0.0


def _resident_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"process {pid} reports no VmRSS")


def _cached_mib(world: Tier) -> float:
    """The JSON bytes of every object of every kind Metacontroller caches for the hook."""
    total = sum(len(json.dumps(obj)) for api_version, resource in CACHED_KINDS for obj in world.objects(api_version, resource))
    return total / 2**20


# --- the models ------------------------------------------------------------------------------------

def create_models(world: Tier, count: int) -> dict[str, datetime]:
    """``count`` BaseModels on PVCs of their own, the PVCs first, then the models at once; when each was created."""
    namespace = "bench-models"
    for index in range(count):
        world.storage(namespace, f"claim-{index}", "llama")
    models = [{"apiVersion": MODELS, "kind": "BaseModel", "metadata": {"name": f"model-{index}", "namespace": namespace},
               "spec": {"storage": {"storageUri": f"pvc://claim-{index}/llama"}}} for index in range(count)]
    created = datetime.now(timezone.utc)
    world.plane.kubectl("apply", "--filename=-", stdin=yaml.safe_dump_all(models), timeout=300)
    return {model["metadata"]["name"]: created for model in models}


def wait_ready(world: Tier, created: dict[str, datetime]) -> list[float]:
    """Seconds from each model's creation to its first Ready (its state, and the why that says so)."""
    ready: dict[str, float] = {}

    def all_ready() -> bool:
        now = datetime.now(timezone.utc)
        for model in world.objects(MODELS, "basemodels", "bench-models"):
            name = model["metadata"]["name"]
            if name in created and name not in ready and state(model) == ("Ready", "Ready"):
                ready[name] = (now - created[name]).total_seconds()
        return len(ready) == len(created)
    world.wait(all_ready, READY_TIMEOUT_SECONDS, f"{len(created)} models Ready")
    return sorted(ready.values())


def wait_settled(world: Tier, count: int) -> None:
    """A model is Ready once the agent wrote its spec; its Job ends a moment later, its grant
    goes and its record is written: until every model's has."""
    def settled() -> bool:
        records = world.objects("ome-basemodel-hook.ome.io/v1alpha1", "extractionrecords", "bench-models")
        grants = world.objects("v1", "serviceaccounts", "bench-models")
        return len(records) == count and not [item for item in grants if item["metadata"]["name"] != "default"]
    world.wait(settled, READY_TIMEOUT_SECONDS, "every model's Job ended, its grant gone and its record written")


# --- per kind ----------------------------------------------------------------------------------------

PER_KIND: dict[str, Callable[[int], Obj]] = {
    "Pod (only with READ_JOB_PODS=true)": _pod,
    "BaseModel (hf://, OME's)": lambda index: {"apiVersion": MODELS, "kind": "BaseModel", "metadata": {"name": f"kind-{index}"},
                                              "spec": {"modelFormat": {"name": "safetensors"},
                                                       "storage": {"storageUri": f"hf://example/model-{index}"}}},
    "ExtractionRecord": lambda index: {"apiVersion": "ome-basemodel-hook.ome.io/v1alpha1", "kind": "ExtractionRecord",
                                       "metadata": {"name": f"kind-{index}"},
                                       "spec": {"storageUri": f"pvc://claim/model-{index}", "attempts": 1,
                                                "jobName": f"model-{index}-metadata-0123abcd-456789", "result": "Succeeded",
                                                "message": f"Job models/model-{index}-metadata-0123abcd-456789 completed"}},
    "ServiceAccount": _service_account,
    "RoleBinding": _role_binding,
    "Role": lambda index: {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": f"kind-{index}"},
                           "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
    "ClusterRole": lambda index: {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                  "metadata": {"name": f"bench-kind-{index}"},
                                  "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
    "PersistentVolumeClaim": lambda index: {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"kind-{index}"},
                                            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "nobody",
                                                     "resources": {"requests": {"storage": "1Gi"}}}},
    "Job": lambda index: {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"kind-{index}"},
                          "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                              {"name": "job", "image": "registry.example.com/job:1.0", "args": ["run"]}]}}}},
}
CLUSTER_SCOPED = {"ClusterRole"}


def per_kind(world: Tier, measure: Measure, count: int) -> dict[str, tuple[float, float]]:
    """What ``count`` more objects of each kind cost, per 1,000, one kind after another: the
    Go heap in use moves in steps much smaller than the resident memory, which grows in the
    runtime's own chunks, so it says more of one kind."""
    admin = world.admin
    assert admin is not None
    found: dict[str, tuple[float, float]] = {}
    before = measure()
    for label, make in PER_KIND.items():
        kind = label.split()[0]
        namespace = None if kind in CLUSTER_SCOPED else f"load-kind-{kind.lower()}"
        if namespace is not None:
            world.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            poll(lambda namespace=namespace: _has_default_account(admin, namespace), 60, f"{namespace}'s default ServiceAccount")
        create_all(admin, [(namespace, make(index)) for index in range(count)])
        after = measure()
        found[label] = ((after[0] - before[0]) * 1000 / count, (after[1] - before[1]) * 1000 / count)
        before = after
    return found


# --- one run ------------------------------------------------------------------------------------------

def install(world: Tier, hook_crds: bool) -> None:
    """The hook as docs/install.md's "Apply" says, with its optional CRDs where asked."""
    world.install()
    if hook_crds:
        world.kubectl_as_user(["kubectl", "apply", "--server-side", "--force-conflicts", "-k", "metacontroller/crds/"])


def one_run(flags: str, hook_crds: bool, args: argparse.Namespace) -> Run:
    run = Run(flags, hook_crds)
    builds.build_all()
    world = Tier()
    try:
        world.start()
        load(world, args.pods, args.configmaps, args.service_accounts, args.role_bindings)
        metrics_port = free_port() if binary() is not None else None
        arguments = (*shlex.split(flags), *([f"--metrics-address=127.0.0.1:{metrics_port}"] if metrics_port else []))
        measure = Measure(world, metrics_port)
        started = datetime.now(timezone.utc)
        if binary() is not None:
            world.start_metacontroller(arguments)
            run.memory["alone, under the load"] = measure()
            install(world, hook_crds)
        else:
            install(world, hook_crds)
            world.start_metacontroller(arguments)
        run.memory["with the hook, no model yet"] = measure()
        created = create_models(world, args.models)
        run.ready_seconds = wait_ready(world, created)
        wait_settled(world, len(created))
        until = datetime.now(timezone.utc)
        run.memory[f"with the hook, {args.models} models Ready"] = measure()
        run.writes = writes_by_actor(world, started, until)
        if args.per_kind:
            run.per_kind = per_kind(world, measure, args.per_kind)
    finally:
        world.stop()
        shutil.rmtree(world.workdir, ignore_errors=True)
    return run


def writes_by_actor(world: Tier, since: datetime, until: datetime) -> dict[str, Counter[str]]:
    """Every write of the window, by actor and by what it wrote."""
    found: dict[str, Counter[str]] = {}
    for write in audit.writes(world.plane.audit_log, since, until):
        if write.namespace.startswith("load"):
            continue
        counts = found.setdefault(audit.actor(write.user), Counter())
        target = f"{write.resource}/{write.subresource}" if write.subresource else write.resource
        answered = "" if write.accepted else f" ({write.code})"
        counts[f"{write.verb} {target}{answered}"] += 1
        counts["all"] += 1
    return found


# --- the report -------------------------------------------------------------------------------------------

def report(runs: list[Run], args: argparse.Namespace) -> str:
    path = binary()
    who = f"Metacontroller binary {path}" if path else "the simulated Metacontroller (cached bytes, not a process)"
    gogc = f" (GOGC={args.gogc})" if args.gogc is not None else ""
    lines = [f"Measured {datetime.now(timezone.utc):%Y-%m-%d} with {who}{gogc}; Kubernetes {builds.KUBERNETES.version}, "
             f"etcd {builds.ETCD.version}, OME {builds.OME.version}. Load: {args.pods} pods, {args.configmaps} ConfigMaps, "
             f"{args.service_accounts} ServiceAccounts, {args.role_bindings} RoleBindings; {args.models} models.", ""]
    unit = "resident MiB (Go heap in use)" if path else "MiB its informers would hold"
    lines += [f"| Metacontroller flags, CRDs | stage | {unit} |", "|---|---|---:|"]
    for run in runs:
        for stage, (memory, heap) in run.memory.items():
            shown = f"{memory:.0f} ({heap:.0f})" if path else f"{memory:.1f}"
            lines.append(f"| {_setting(run)} | {stage} | {shown} |")
    lines += ["", "| Metacontroller flags, CRDs | models Ready | p50 s | p95 s | all within s |", "|---|---:|---:|---:|---:|"]
    for run in runs:
        seconds = run.ready_seconds
        lines.append(f"| {_setting(run)} | {len(seconds)} | {statistics.median(seconds):.0f} | "
                     f"{seconds[max(0, int(len(seconds) * 0.95) - 1)]:.0f} | {seconds[-1]:.0f} |")
    for run in runs:
        lines += ["", f"Writes per model, {_setting(run)} (audit log, from Metacontroller's start until every model "
                      "is Ready, its Job ended and its record written):", ""]
        for actor_name, counts in sorted(run.writes.items(), key=lambda item: -item[1]["all"]):
            detail = ", ".join(f"{what} {count / args.models:.2f}" for what, count in sorted(counts.items()) if what != "all")
            lines.append(f"- {actor_name}: {counts['all'] / args.models:.2f} ({detail})")
    for run in runs:
        if run.per_kind:
            lines += ["", f"| kind | MiB per 1,000 objects, {'resident (Go heap in use)' if path else 'cached'} ({_setting(run)}) |",
                      "|---|---:|"]
            lines += [f"| {kind} | {rss:.1f} ({heap:.1f}) |" if path else f"| {kind} | {rss:.1f} |"
                      for kind, (rss, heap) in run.per_kind.items()]
    return "\n".join(lines)


def _setting(run: Run) -> str:
    """A run's Metacontroller flags and the models' CRDs, for the tables."""
    return f"`{run.flags or 'defaults'}`, {'the hook' if run.hook_crds else 'OME'}'s CRDs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--configmaps", type=int, default=2000)
    parser.add_argument("--service-accounts", type=int, default=1000)
    parser.add_argument("--role-bindings", type=int, default=1000)
    parser.add_argument("--flags", action="append",
                        help="Metacontroller's flags for one run, which runs under OME's CRDs, or the hook's with a "
                             "'hook-crds:' prefix (repeatable)")
    parser.add_argument("--per-kind", type=int, default=0, help="objects of each cached kind to add, to price each kind")
    parser.add_argument("--gogc", type=int, help="GOGC for the Metacontroller binary: a low value (10) makes its heap in "
                                                 "use follow what it holds live, for --per-kind")
    args = parser.parse_args(argv)
    if args.gogc is not None:
        os.environ["GOGC"] = str(args.gogc)
    chosen = args.flags if args.flags is not None else ["", RECOMMENDED_FLAGS, f"{HOOK_CRDS}{RECOMMENDED_FLAGS}"]
    runs = [one_run(flags.removeprefix(HOOK_CRDS), flags.startswith(HOOK_CRDS), args) for flags in chosen]
    sys.stdout.write(report(runs, args) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
