"""The whole cluster tier's world: the control plane, OME, the hook, the kubelet, Metacontroller,
and what a user does in it (``kubectl`` as the cluster admin).

``start`` brings up everything OME's users already run (the control plane, OME's CRDs and
manager, Metacontroller's own install) plus the hook's replicas with the proxy as their
Service, and the kubelet; ``install`` then installs the hook exactly as docs/install.md
says, running the commands of its "Apply" section and, since the hook runs here as local
processes rather than behind its Service, the page's own "Your own URL" overlay pointed at
the proxy. Metacontroller starts after the install, as the simulator running in real time
or, with ``METACONTROLLER_BIN``, the binary it names; a fault story may kill it and start
it again (``kill_metacontroller``, ``restart_metacontroller``), as its StatefulSet would.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Protocol

import yaml

from tests import reference
from tests.cluster import builds, ome_manager
from tests.cluster.control_plane import ADMIN, METACONTROLLER, ControlPlane
from tests.cluster.hook_proxy import HookProxy
from tests.cluster.hook_server import HookDeployment
from tests.cluster.kubelet import Kubelet
from tests.cluster.processes import Process
from tests.cluster.metacontroller_binary import OWN_RBAC, MetacontrollerBinary, binary
from tests.cluster.model_files import write_model
from tests.cluster.real_time import RealTimeMetacontroller, http_hook
from hooks.pvc.annotations import PREFIX as WHY_PREFIX
from tests.helm import helm
from tests.metacontroller.selection import Obj

REPO = Path(__file__).resolve().parents[2]
INSTALL_DOC = REPO / "docs" / "install.md"
DOCS_URL = "https://basemodel-hook.example.com"
MODELS = "ome.io/v1beta1"
SAMPLES_PARAGRAPH = "To try a model"
CHART = "ome-basemodel-hook"
PLURALS = {"BaseModel": "basemodels", "ClusterBaseModel": "clusterbasemodels"}
VOLUME_NAME_LIMIT = 253
"""A PersistentVolume's name is a DNS-1123 subdomain; a folder's name (255 bytes) holds it too."""
WAIT_POLL_SECONDS = 0.25
"""How often a world without Metacontroller looks at the cluster while it waits."""


class Metacontroller(Protocol):
    errors: list[str]

    @property
    def running(self) -> bool: ...

    def kill(self) -> None: ...

    def stop(self) -> None: ...

    def wait_until(self, condition: Callable[[], bool], seconds: float, what: str) -> None: ...

    def run_for(self, seconds: float) -> None: ...


def section(page: Path, heading: str) -> str:
    """A section of a page, from its heading to the next heading of the same level."""
    text = page.read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    end = text.find(f"\n{level} ", start + len(heading) + 2)
    return text[start:end if end >= 0 else len(text)]


def apply_commands(text: str) -> list[list[str]]:
    """The ``kubectl apply`` commands of the shell blocks in ``text``, split as a shell would."""
    return [shlex.split(line) for block in re.findall(r"```sh\n(.*?)```", text, re.S)
            for line in block.splitlines() if line.startswith("kubectl apply")]


def install_commands(page: Path = INSTALL_DOC) -> list[list[str]]:
    """docs/install.md's "Apply" (``page``, a release's own): the hook's layers."""
    return apply_commands(section(page, "## Apply").split(SAMPLES_PARAGRAPH, 1)[0])


def helm_commands() -> list[list[str]]:
    """docs/install.md's "Helm": the CRDs from the pulled chart, then ``helm install``."""
    return [shlex.split(line) for block in re.findall(r"```sh\n(.*?)```", section(INSTALL_DOC, "## Helm"), re.S)
            for line in block.splitlines() if line.startswith(("kubectl apply", "helm install"))]


def local_chart(command: list[str]) -> list[str]:
    """``command`` with the pulled chart's folder (``./ome-basemodel-hook``, and paths in it)
    replaced by the checkout's ``charts/ome-basemodel-hook``; the release's name stays."""
    pulled = [f"./{CHART}", f"{CHART}/"]
    return [str(REPO / "charts" / CHART) + "/" + part.removeprefix("./").removeprefix(CHART).lstrip("/")
            if part.startswith(tuple(pulled)) else part for part in command]


def sample_commands() -> list[list[str]]:
    """docs/install.md's "Apply", after the install: the samples."""
    return apply_commands(section(INSTALL_DOC, "## Apply").split(SAMPLES_PARAGRAPH, 1)[1])


class Tier:
    def __init__(self, ome_build: builds.Build = builds.OME) -> None:
        self.ome_build = ome_build
        """The OME release the world runs (v0.1.5 unless a story compares with OME's own PVC backend)."""
        self.workdir = Path(tempfile.mkdtemp(prefix="ome-basemodel-hook-cluster-"))
        self.workdir.chmod(0o755)
        self.plane = ControlPlane(self.workdir)
        self.admin = None  # set by start
        self.ome: Process | None = None
        self.hooks: HookDeployment | None = None
        self.proxy: HookProxy | None = None
        self.kubelet: Kubelet | None = None
        self.metacontroller: Metacontroller | None = None
        self.timings: dict[str, float] = {}
        """Seconds each stage of bringing the world up took (``start``, ``install``, ``metacontroller``)."""
        self.install_output: list[subprocess.CompletedProcess[str]] = []

    # --- the world before the hook -------------------------------------------------------------

    def start(self, with_hook: bool = True) -> None:
        """Up to the point where a user would install the hook (``with_hook=False``: OME alone,
        without Metacontroller's install or the hook's server). The agent image's filesystem is
        a folder any user can read: its config file, and the release's agent as its entrypoint."""
        started = time.monotonic()
        self.plane.start()
        self.timings["control plane"] = self.plane.started_seconds
        self.admin = self.plane.client(ADMIN)
        ome_manager.install(self.plane, self.ome_build)
        self.ome = ome_manager.start(self.plane, self.ome_build)
        if with_hook:
            self._install_metacontroller()
            self.hooks = HookDeployment(self.workdir)
            self.proxy = HookProxy(self.hooks.serving)
        image_root = self.workdir / "image"
        image_root.mkdir(mode=0o755)
        (image_root / "ome-agent.yaml").write_text("{}\n", encoding="utf-8")
        agent = image_root / "ome-agent"
        shutil.copy2(self.ome_build.binary("ome-agent"), agent)
        self.kubelet = Kubelet(self.plane, image_root, agent)
        self.kubelet.start()
        for path in (self.workdir, self.workdir / "certificates", self.workdir / "kubeconfigs"):
            path.chmod(0o755)
        self.timings["start"] = time.monotonic() - started

    def upgrade_ome(self, build: builds.Build) -> None:
        """OME upgraded to ``build`` as its charts would (``ome_manager.upgrade``); the image its
        chart names for the metadata Job runs that release's agent."""
        assert self.ome is not None and self.kubelet is not None
        image = ome_manager.agent_config(build)["image"]
        agent = self.workdir / "image" / f"ome-agent-{build.version}"
        shutil.copy2(build.binary("ome-agent"), agent)
        self.kubelet.agents[image] = agent
        self.ome = ome_manager.upgrade(self.plane, self.ome, build)
        self.ome_build = build

    def _install_metacontroller(self) -> None:
        """Metacontroller's own install, as far as the hook meets it: its CRDs, its namespace
        and ServiceAccount (the fence's owner), and the RBAC it grants itself for its own objects."""
        self.plane.kubectl("apply", "--server-side", *[f"--filename={reference.crd(name)}" for name in reference.METACONTROLLER_CRDS])
        objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "metacontroller"}},
                   {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "metacontroller", "namespace": "metacontroller"}},
                   *OWN_RBAC]
        self.plane.kubectl("apply", "--server-side", "--filename=-", stdin=yaml.safe_dump_all(objects))

    # --- the install, as the docs say ---------------------------------------------------------

    def install(self, checkout: Path = REPO) -> None:
        """docs/install.md's "Apply" commands, then its "Your own URL" overlay naming the proxy in
        front of the hook; from ``checkout``, a release's source tree, with its own page."""
        started = time.monotonic()
        for command in install_commands(checkout / "docs" / "install.md"):
            self.install_output.append(self.kubectl_as_user(command, checkout))
        self.apply_own_url(checkout)
        self.timings["install"] = time.monotonic() - started

    def apply_own_url(self, checkout: Path = REPO) -> None:
        """``checkout``'s docs/install.md "Your own URL" overlay, naming the proxy in front of the
        hook, written over ``checkout``'s ``metacontroller/`` and applied: the user's one overlay,
        pointed at the release they install or upgrade to."""
        assert self.proxy is not None
        page = checkout / "docs" / "install.md"
        overlay = self.workdir / "overlays" / "local-hook"
        overlay.mkdir(parents=True, exist_ok=True)
        own_url = re.search(r"\*\*Your own URL\.\*\*.*?```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        assert own_url is not None, f"{page} has no 'Your own URL' overlay"
        text = own_url.group(1).replace(DOCS_URL, self.proxy.url)
        text = text.replace("../../metacontroller", os.path.relpath(checkout / "metacontroller", overlay))
        (overlay / "kustomization.yaml").write_text(text, encoding="utf-8")
        self.install_output.append(self.kubectl_as_user(["kubectl", "apply", "-k", str(overlay)]))

    def serve_hook(self, release: Path | None = None, settings: dict[str, str] | None = None) -> None:
        """The hook's replicas behind the proxy replaced by new ones (``HookDeployment``'s
        ``release`` and ``settings``), as an upgrade replaces the hook's pods: Metacontroller
        keeps its URL."""
        assert self.hooks is not None and self.proxy is not None
        self.hooks.stop()
        self.hooks = HookDeployment(self.workdir, release, settings)
        self.proxy.endpoints = self.hooks.serving

    def install_with_helm(self) -> None:
        """docs/install.md's "Helm" commands, the chart taken from the checkout rather than
        pulled (the folder ``helm pull --untar`` makes holds the same files), and the hook's
        URL as the page's ``webhook.url`` value names it: the proxy in front of the hook."""
        assert self.proxy is not None
        started = time.monotonic()
        for command in map(local_chart, helm_commands()):
            if command[0] == "kubectl":
                self.install_output.append(self.kubectl_as_user(command))
            else:
                self.install_output.append(self.helm_as_user([*command, "--set", f"webhook.url={self.proxy.url}"]))
        self.timings["install"] = time.monotonic() - started

    def helm_as_user(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        """A docs ``helm`` command as the cluster admin types it, from the checkout."""
        assert command[0] == "helm"
        result = subprocess.run([str(helm()), "--kubeconfig", str(self.plane.kubeconfig(ADMIN)), *command[1:]],
                                cwd=REPO, capture_output=True, text=True, timeout=180)
        if result.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed: {result.stderr}")
        return result

    def kubectl_as_user(self, command: list[str], checkout: Path = REPO) -> subprocess.CompletedProcess[str]:
        """A docs command as the cluster admin types it, from the checkout (or a release's source tree)."""
        assert command[0] == "kubectl"
        result = subprocess.run([str(builds.KUBERNETES.binary("kubectl")), "--kubeconfig", str(self.plane.kubeconfig(ADMIN)),
                                 *command[1:]], cwd=checkout, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed: {result.stderr}")
        return result

    def start_metacontroller(self, arguments: tuple[str, ...] = ()) -> None:
        """The binary ``METACONTROLLER_BIN`` names (with ``arguments`` after the tier's own
        flags, which they override), or the simulated one."""
        assert self.proxy is not None
        started = time.monotonic()
        path = binary()
        if path is not None:
            real = MetacontrollerBinary(self.plane, path, arguments)
            real.start()
            self.metacontroller = real
        else:
            self._start_simulated()
        self.timings["metacontroller"] = time.monotonic() - started

    def _start_simulated(self) -> None:
        assert self.proxy is not None
        simulated = RealTimeMetacontroller(self.plane.client(METACONTROLLER))
        simulated.start(http_hook(self.proxy.url))
        self.metacontroller = simulated

    def kill_metacontroller(self) -> None:
        """SIGKILL to the binary, or the simulated one's death: safe from any thread."""
        assert self.metacontroller is not None
        self.metacontroller.kill()

    def restart_metacontroller(self) -> None:
        """Metacontroller started again after ``kill_metacontroller``, from nothing: the binary's
        process again, or a new simulated one, each listing everything afresh."""
        assert self.metacontroller is not None and not self.metacontroller.running
        if isinstance(self.metacontroller, MetacontrollerBinary):
            self.metacontroller.start()
            return
        self.metacontroller.stop()
        self._start_simulated()

    # --- stopping ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Everything this tier started, each by its own handle, in reverse order."""
        if self.metacontroller is not None:
            self.metacontroller.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.proxy is not None:
            self.proxy.stop()
        if self.hooks is not None:
            self.hooks.stop()
        self.plane.stop()

    # --- what a user does -------------------------------------------------------------------------

    def apply(self, *objects: Obj) -> None:
        self.plane.kubectl("apply", "--filename=-", stdin=yaml.safe_dump_all(list(objects)))

    def delete(self, kind: str, name: str, namespace: str | None = None, wait: bool = False) -> None:
        self.plane.kubectl("delete", kind, name, *(["--namespace", namespace] if namespace else []), f"--wait={str(wait).lower()}")

    def storage(self, namespace: str, claim: str, sub_path: str, config: str | None = None, bound: bool = True,
                volume_mode: str = "Filesystem", access_modes: tuple[str, ...] = ("ReadOnlyMany",)) -> Path:
        """A PersistentVolume on a host directory holding a model under ``sub_path``, and the claim
        ``claim`` in ``namespace`` on it, which the real volume binder binds; with ``bound=False``
        the claim names a volume that does not exist yet, so it stays Pending until ``add_volume``.
        Claim and volume have ``volume_mode`` and ``access_modes`` (the binder binds a claim only
        to a volume of its mode that offers its access modes)."""
        directory = self.workdir / "volumes" / volume_name(namespace, claim)
        write_model(directory / sub_path, config)
        for path in [directory, *(directory / sub_path).parents]:
            if path.is_relative_to(self.workdir):
                path.chmod(0o755)
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                   {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
                    "spec": {"accessModes": list(access_modes), "storageClassName": "", "volumeName": volume_name(namespace, claim),
                             "volumeMode": volume_mode, "resources": {"requests": {"storage": "1Gi"}}}})
        if bound:
            self.add_volume(namespace, claim, volume_mode, access_modes)
        return directory

    def add_volume(self, namespace: str, claim: str, volume_mode: str = "Filesystem",
                   access_modes: tuple[str, ...] = ("ReadOnlyMany",)) -> None:
        directory = self.workdir / "volumes" / volume_name(namespace, claim)
        self.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume_name(namespace, claim)},
                    "spec": {"capacity": {"storage": "1Gi"}, "accessModes": list(access_modes), "storageClassName": "",
                             "volumeMode": volume_mode,
                             "persistentVolumeReclaimPolicy": "Retain",
                             "claimRef": {"namespace": namespace, "name": claim},
                             "hostPath": {"path": str(directory), "type": "Directory"}}})

    def lose_volume(self, namespace: str, claim: str) -> None:
        """The volume under a bound claim goes for good (its protection finalizer removed by hand), so
        the volume binder marks the claim Lost."""
        name = volume_name(namespace, claim)
        self.plane.kubectl("delete", "persistentvolume", name, "--wait=false")
        self.plane.kubectl("patch", "persistentvolume", name, "--type=merge", "--patch", '{"metadata":{"finalizers":null}}')

    def model(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        assert self.admin is not None
        return self.admin.find(MODELS, PLURALS[kind], namespace, name)

    def wait(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        """Until ``condition`` holds, Metacontroller running meanwhile (when the world has one);
        fails after ``seconds`` with what was awaited."""
        assert self.kubelet is not None
        self.plane.check_running()

        def done() -> bool:
            if self.kubelet.errors:
                raise RuntimeError(f"the kubelet failed: {self.kubelet.errors}")
            if self.proxy is not None:
                self.proxy.check()
            return condition()
        if self.metacontroller is not None:
            self.metacontroller.wait_until(done, seconds, what)
            return
        deadline = time.monotonic() + seconds
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {seconds:.0f} s")
            time.sleep(WAIT_POLL_SECONDS)

    def run_for(self, seconds: float) -> None:
        """Let ``seconds`` pass, Metacontroller running meanwhile (when the world has one)."""
        if self.metacontroller is None:
            time.sleep(seconds)
        else:
            self.metacontroller.run_for(seconds)

    def objects(self, api_version: str, resource: str, namespace: str | None = None) -> list[Obj]:
        assert self.admin is not None
        return self.admin.list(api_version, resource, namespace)[0]


def volume_name(namespace: str, claim: str) -> str:
    """The claim's volume, also the name of its folder: ``<namespace>-<claim>``, or for a claim
    named near its 253-character limit a prefix of that and a hash, within the limit of both."""
    name = f"{namespace}-{claim}"
    if len(name) <= VOLUME_NAME_LIMIT:
        return name
    return f"{name[:VOLUME_NAME_LIMIT - 17].rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def state(model: Obj | None) -> tuple[str, str]:
    """A model's ``status.state`` and the Ready reason its why annotation gives, else its Ready
    condition's (a model OME's own PVC backend serves carries no why; empty when neither is
    there): what a user reads of it whatever CRDs the cluster runs."""
    status = (model or {}).get("status") or {}
    ready = next((item for item in status.get("conditions") or [] if item.get("type") == "Ready"), {})
    return status.get("state", ""), why(model, "reason") or ready.get("reason", "")


def why(model: Obj | None, key: str) -> str:
    """One of the label keeper's ``ome-basemodel-hook.ome.io/`` annotations on the model ("" when absent)."""
    annotations = ((model or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(f"{WHY_PREFIX}{key}", ""))

