"""OME as its charts install it, with its real controller manager: v0.1.5 (``builds.OME``) by
default, or v1.2.2 with its own PVC backend (``builds.OME_PVC_BACKEND``).

OME's CRDs come from the module's own ``ome-crd`` chart templates, created as Helm
creates them (field manager ``helm``), so that the hook's CRDs meet them exactly as in
a cluster (the three largest, which the hook never meets, from OME's schemaless variants). The manager needs namespace ``ome``, the ConfigMap ``inferenceservice-config``
(empty is accepted), its ClusterRole from the module's ``config/rbac/role.yaml`` bound to
its ServiceAccount, and all the CRDs its controllers watch. It runs with leader election
and webhooks off and no metrics or probe listener (a probe request would start its
webhook server, which needs certificates), and with OME's Hugging Face client off: the
build links a stand-in for that library (``ome/xet_unavailable.c``).

A release with its own PVC backend also needs what its ``ome-resources`` chart gives that
backend, rendered from the chart itself (``helm template``): the ``omeAgent`` block of
``inferenceservice-config`` (the metadata Job's image, ServiceAccount, resources, backoff
and TTL, read once at the manager's start) and the Job's ServiceAccount, ClusterRole and
ClusterRoleBinding (``ome-model-metadata``). Without webhooks, its BaseModel admission
webhook (which refuses a BaseModel URI naming a namespace) does not run here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import builds
from tests.cluster.control_plane import OME_MANAGER, ControlPlane
from tests.cluster.processes import Process
from tests.helm import helm

NAMESPACE = "ome"
HF_CLIENT_OFF = {"XET_DISABLE_GLOBAL_CLIENT": "1"}
"""Keeps OME's binaries from creating their Hugging Face client at start (``pkg/xet/hf_compat.go``)."""
RELEASE = "ome"
"""The Helm release name OME's docs install ``ome-resources`` under."""
METADATA_JOB_COMPONENT = "ome-model-metadata-job"
"""The label value OME's chart gives the metadata Job's ServiceAccount and RBAC."""
AGENT_CONFIG = "omeAgent"
"""The key of ``inferenceservice-config`` that configures OME's metadata Job."""
_MODULES: dict[str, Path] = {}


def module_directory(build: builds.Build = builds.OME) -> Path:
    """OME's module as the Go tool unpacked it for ``build``, asked once per run."""
    if build.name not in _MODULES:
        _MODULES[build.name] = builds.module_directory(build)
    return _MODULES[build.name]


def has_pvc_backend(build: builds.Build) -> bool:
    """Whether the release's manager serves ``pvc://`` models itself."""
    return (module_directory(build) / "pkg" / "controller" / "v1beta1" / "basemodel" / "backends" / "pvc").is_dir()


SCHEMALESS = ("inferenceservices", "servingruntimes", "clusterservingruntimes")
"""OME's CRDs the hook never meets, taken from OME's own schemaless variants (``config/crd/minimal/``):
their full schemas weigh 1.7 MB each, and compiling them costs the API server most of a minute."""


def crd_files(build: builds.Build = builds.OME) -> list[Path]:
    """OME's CRDs as its ``ome-crd`` chart ships them (templates without templating), but for
    ``SCHEMALESS``, whose objects no test makes."""
    module = module_directory(build)
    return sorted(module / "config" / "crd" / "minimal" / path.name if path.stem.split("_")[1] in SCHEMALESS else path
                  for path in (module / "charts" / "ome-crd" / "templates").glob("*.yaml"))


def crd_file(kind_plural: str, build: builds.Build = builds.OME) -> Path:
    return module_directory(build) / "charts" / "ome-crd" / "templates" / f"ome.io_{kind_plural}.yaml"


def chart_objects(build: builds.Build) -> list[dict[str, Any]]:
    """What the release's ``ome-resources`` chart, rendered with its default values, gives the
    metadata Job: ``inferenceservice-config`` as the chart writes it and the objects labelled
    for the Job (none for a release without its own PVC backend)."""
    rendered = subprocess.run([str(helm()), "template", RELEASE, str(module_directory(build) / "charts" / "ome-resources"),
                               "--namespace", NAMESPACE], check=True, capture_output=True, text=True, timeout=120).stdout
    objects = [item for item in yaml.safe_load_all(rendered) if isinstance(item, dict)]
    return [item for item in objects
            if (item["kind"], item["metadata"]["name"]) == ("ConfigMap", "inferenceservice-config")
            or (item["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == METADATA_JOB_COMPONENT]


def agent_config(build: builds.Build) -> dict[str, Any]:
    """The ``omeAgent`` block the release's chart sets, as its manager reads it."""
    [config_map] = [item for item in chart_objects(build) if item["kind"] == "ConfigMap"]
    return json.loads(config_map["data"][AGENT_CONFIG])


def install(plane: ControlPlane, build: builds.Build = builds.OME) -> None:
    """What OME's charts put in a cluster before its manager starts."""
    plane.kubectl("create", "--field-manager", "helm", *[f"--filename={path}" for path in crd_files(build)])
    plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                  *[f"crd/{yaml.safe_load(path.read_text(encoding='utf-8'))['metadata']['name']}" for path in crd_files(build)])
    plane.kubectl("apply", "--server-side", "--field-manager", "helm", "--filename=-",
                  stdin=yaml.safe_dump_all(_resources(build)))


def _resources(build: builds.Build) -> list[dict[str, Any]]:
    """The manager's namespace, identity, RBAC and configuration; for a release with its own
    PVC backend, the chart's configuration and the metadata Job's identity too."""
    role = yaml.safe_load((module_directory(build) / "config" / "rbac" / "role.yaml").read_text(encoding="utf-8"))
    configuration = chart_objects(build) if has_pvc_backend(build) else [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config", "namespace": NAMESPACE}}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ome-controller-manager", "namespace": NAMESPACE}},
        *configuration,
        role,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "ome-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": "ome-controller-manager", "namespace": NAMESPACE}]},
    ]


def start(plane: ControlPlane, build: builds.Build = builds.OME, environment: dict[str, str] | None = None) -> Process:
    """OME's manager as OME's chart runs it, minus leader election, webhooks and listeners;
    ``environment`` adds to what it runs with."""
    process = Process("ome-manager", [str(build.binary("manager")), "--metrics-bind-address=0",
                                      "--health-probe-addr=0", "--leader-elect=false", "--webhook=false"],
                      plane.workdir / "ome-manager.log",
                      {**os.environ, **HF_CLIENT_OFF, "KUBECONFIG": str(plane.kubeconfig(OME_MANAGER)),
                       "POD_NAMESPACE": NAMESPACE, **(environment or {})})
    plane.processes.append(process)
    return process


def upgrade(plane: ControlPlane, running: Process, build: builds.Build) -> Process:
    """OME upgraded to ``build`` in the order its charts go: ``ome-crd`` (the CRDs, applied
    again by Helm), then ``ome-resources`` (configuration and RBAC before the Deployment,
    whose new manager replaces the old one)."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "helm",
                  *[f"--filename={path}" for path in crd_files(build)])
    plane.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", "helm", "--filename=-",
                  stdin=yaml.safe_dump_all(_resources(build)))
    running.stop()
    plane.processes.remove(running)
    return start(plane, build)
