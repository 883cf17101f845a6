"""Who writes: the username the API server authenticates for each writer in the simulated cluster.

Admission sees a request's writer only as ``request.userInfo.username``; the fence
(``metacontroller/fence.yaml``) admits a pvc:// model's status write from ``METACONTROLLER``
alone. A ServiceAccount authenticates as ``system:serviceaccount:<namespace>:<name>``
(``k8s.io/apiserver/pkg/authentication/serviceaccount``); kube-controller-manager, started
with ``--use-service-account-credentials`` as kubeadm does, runs each controller as its own
ServiceAccount in ``kube-system``; a kubelet as ``system:node:<node>``.
"""

from __future__ import annotations


def service_account(namespace: str, name: str) -> str:
    """``serviceaccount.MakeUsername``."""
    return f"system:serviceaccount:{namespace}:{name}"


def kube_controller(name: str) -> str:
    """One of kube-controller-manager's controllers (``controller_policy.go`` names their ServiceAccounts)."""
    return service_account("kube-system", name)


def kubelet(node: str) -> str:
    return f"system:node:{node}"


KUBECTL = "kubernetes-admin"
"""A cluster admin with kubectl: the user of kubeadm's ``admin.conf``; every write that names no writer."""
METACONTROLLER = service_account("metacontroller", "metacontroller")
"""Metacontroller's kustomize install (``manifests/production``): namespace and ServiceAccount ``metacontroller``."""
OME_MANAGER = service_account("ome", "ome-controller-manager")
"""OME's controller manager (chart ``ome-resources``, release namespace ``ome``)."""
OME_MODEL_AGENT = service_account("ome", "ome-model-agent")
"""OME's model agent DaemonSet, which writes the per-node model-status ConfigMaps."""
JOB_CONTROLLER = kube_controller("job-controller")
TTL_CONTROLLER = kube_controller("ttl-after-finished-controller")
PV_BINDER = kube_controller("persistent-volume-binder")
PVC_PROTECTION = kube_controller("pvc-protection-controller")
GARBAGE_COLLECTOR = kube_controller("generic-garbage-collector")
