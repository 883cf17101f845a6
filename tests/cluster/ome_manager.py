"""OME as its charts install it, with its real controller manager (``builds.OME``).

OME's CRDs come from the module's own ``ome-crd`` chart templates, created as Helm
creates them (field manager ``helm``), so that the hook's CRDs meet them exactly as in
a cluster (the three largest, which the hook never meets, from OME's schemaless variants). The manager needs namespace ``ome``, the ConfigMap ``inferenceservice-config``
(empty is accepted), its ClusterRole from the module's ``config/rbac/role.yaml`` bound to
its ServiceAccount, and all seven CRDs its controllers watch. It runs with leader election
and webhooks off and no metrics or probe listener (a probe request would start its
webhook server, which needs certificates), and with OME's Hugging Face client off: the
build links a stand-in for that library (``ome/xet_unavailable.c``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import yaml

from tests.cluster import builds
from tests.cluster.control_plane import OME_MANAGER, ControlPlane
from tests.cluster.processes import Process

NAMESPACE = "ome"
HF_CLIENT_OFF = {"XET_DISABLE_GLOBAL_CLIENT": "1"}
"""Keeps OME's binaries from creating their Hugging Face client at start (``pkg/xet/hf_compat.go``)."""


@lru_cache(maxsize=1)
def module_directory() -> Path:
    """OME's module as the Go tool unpacked it for the build."""
    return builds.module_directory(builds.OME)


SCHEMALESS = ("inferenceservices", "servingruntimes", "clusterservingruntimes")
"""OME's CRDs the hook never meets, taken from OME's own schemaless variants (``config/crd/minimal/``):
their full schemas weigh 1.7 MB each, and compiling them costs the API server most of a minute."""


def crd_files() -> list[Path]:
    """OME's CRDs as its ``ome-crd`` chart ships them (templates without templating), but for
    ``SCHEMALESS``, whose objects no test makes."""
    module = module_directory()
    return sorted(module / "config" / "crd" / "minimal" / path.name if path.stem.split("_")[1] in SCHEMALESS else path
                  for path in (module / "charts" / "ome-crd" / "templates").glob("*.yaml"))


def crd_file(kind_plural: str) -> Path:
    return module_directory() / "charts" / "ome-crd" / "templates" / f"ome.io_{kind_plural}.yaml"


def install(plane: ControlPlane) -> None:
    """What OME's charts put in a cluster before its manager starts."""
    plane.kubectl("create", "--field-manager", "helm", *[f"--filename={path}" for path in crd_files()])
    plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                  *[f"crd/{yaml.safe_load(path.read_text(encoding='utf-8'))['metadata']['name']}" for path in crd_files()])
    role = yaml.safe_load((module_directory() / "config" / "rbac" / "role.yaml").read_text(encoding="utf-8"))
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ome-controller-manager", "namespace": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config", "namespace": NAMESPACE}},
        role,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "ome-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": "ome-controller-manager", "namespace": NAMESPACE}]},
    ]
    plane.kubectl("apply", "--server-side", "--field-manager", "helm", "--filename=-", stdin=yaml.safe_dump_all(objects))


def start(plane: ControlPlane) -> Process:
    """OME's manager as OME's chart runs it, minus leader election, webhooks and listeners."""
    environment = {**os.environ, **HF_CLIENT_OFF, "KUBECONFIG": str(plane.kubeconfig(OME_MANAGER)),
                   "POD_NAMESPACE": NAMESPACE}
    process = Process("ome-manager", [str(builds.OME.binary("manager")), "--metrics-bind-address=0",
                                      "--health-probe-addr=0", "--leader-elect=false", "--webhook=false"],
                      plane.workdir / "ome-manager.log", environment)
    plane.processes.append(process)
    return process

