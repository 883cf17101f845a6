"""The metadata Job and its access objects, as CONTRACT §6 specifies them."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from hooks.pvc.metadata_job import (
    Attempt,
    build_access,
    build_job,
    job_name,
    label_value,
    model_jobs,
    model_labels,
    record_name,
)
from hooks.pvc.storage_uri import PVCLocation
from hooks.request import Model
from hooks.settings import JobSettings
from tests.schemas import KUBERNETES_VERSIONS, kubernetes_errors

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LONG_NAME = "org.example." + "very-long-model-name-" * 11 + "v1"
URI = "pvc://store/llama"


def model(name: str = "llama-3.1-8b", namespace: str | None = "models") -> Model:
    kind = "BaseModel" if namespace else "ClusterBaseModel"
    return Model(kind, name, namespace, 1, {"storage": {"storageUri": URI}}, {}, URI)


LOCATION = PVCLocation("models", "store", "llama/8b")


@pytest.mark.parametrize("name", ["llama-3.1-8b", LONG_NAME, "a"])
@pytest.mark.parametrize("namespace", ["models", None])
def test_job_name_is_a_short_dns_label(name: str, namespace: str | None) -> None:
    for attempt in (1, 2, 10):
        assert DNS_LABEL.match(job_name(model(name, namespace), URI, attempt))
        assert len(job_name(model(name, namespace), URI, attempt)) <= 63


def test_job_name_changes_with_uri_attempt_and_kind() -> None:
    names = {
        job_name(model(), URI, 1),
        job_name(model(), URI, 2),
        job_name(model(), "pvc://store/llama/", 1),
        job_name(model(namespace="other"), URI, 1),
        job_name(model(namespace=None), URI, 1),
    }
    assert len(names) == 5
    assert job_name(model(), URI, 1) == job_name(model(), URI, 1)


def service_account(built: Model, namespace: str = "models") -> dict[str, Any]:
    [account] = [item for item in build_access(built, namespace) if item["kind"] == "ServiceAccount"]
    return account


def test_service_account_and_record_differ_for_basemodel_and_clusterbasemodel_of_the_same_name() -> None:
    assert service_account(model())["metadata"]["name"] != service_account(model(namespace=None))["metadata"]["name"]
    assert record_name(model()) != record_name(model(namespace=None))


@pytest.mark.parametrize("namespace", ["models", None])
def test_every_label_value_fits_63_characters(namespace: str | None) -> None:
    for value in model_labels(model(LONG_NAME, namespace)).values():
        assert len(value) <= 63 and LABEL_VALUE.match(value), value
    assert label_value(LONG_NAME) != label_value(LONG_NAME[:-1] + "3")


def test_basemodel_job_runs_the_agent_against_the_read_only_pvc_with_the_documented_defaults() -> None:
    job = build_job(model(), Attempt(LOCATION, URI, 1), JobSettings(), job_name(model(), URI, 1))
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert job["metadata"]["namespace"] == "models"
    assert container["image"] == "ghcr.io/moirai-internal/ome-agent:v0.1.5"
    assert container["args"] == [
        "model-metadata", "--config", "/ome-agent.yaml", "--model-path", "/mnt/models",
        "--basemodel-name", "llama-3.1-8b", "--basemodel-namespace", "models",
    ]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "model"]
    assert mount == {"name": "model", "mountPath": "/mnt/models", "subPath": "llama/8b", "readOnly": True}
    [volume] = [v for v in pod["volumes"] if v["name"] == "model"]
    assert volume["persistentVolumeClaim"] == {"claimName": "store", "readOnly": True}
    assert (job["spec"]["activeDeadlineSeconds"], job["spec"]["ttlSecondsAfterFinished"], job["spec"]["backoffLimit"]) == (300, 3600, 2)
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == service_account(model())["metadata"]["name"]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}


def test_clusterbasemodel_job_runs_in_the_pvc_namespace_cluster_scoped() -> None:
    job = build_job(model(namespace=None), Attempt(PVCLocation("shared", "store", "llama"), URI, 1), JobSettings(), job_name(model(namespace=None), URI, 1))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert job["metadata"]["namespace"] == "shared"
    assert args[-1] == "--cluster-scoped" and "--basemodel-namespace" not in args


def test_pod_meets_pod_security_restricted_with_numeric_non_root_ids() -> None:
    pod = build_job(model(), Attempt(LOCATION, URI, 1), JobSettings(run_as_user=4242, run_as_group=4343), job_name(model(), URI, 1))["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (4242, 4343)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
    assert all(set(volume) - {"name"} <= allowed_volumes for volume in pod["volumes"])
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True
    assert not {"controller-uid", "job-name", "batch.kubernetes.io/job-name"} & set(job_template_labels())


def job_template_labels() -> dict[str, str]:
    return build_job(model(), Attempt(LOCATION, URI, 1), JobSettings(), job_name(model(), URI, 1))["spec"]["template"]["metadata"]["labels"]


def test_basemodel_access_is_a_role_on_this_one_model() -> None:
    account, role, binding = build_access(model(), "models")
    assert account["kind"] == "ServiceAccount" and role["kind"] == "Role" and binding["kind"] == "RoleBinding"
    assert role["rules"] == [{"apiGroups": ["ome.io"], "resources": ["basemodels"], "resourceNames": ["llama-3.1-8b"], "verbs": ["get", "update", "patch"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "models"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_clusterbasemodel_binding_name_follows_its_subject_namespace() -> None:
    _, role_a, binding_a = build_access(model(namespace=None), "team-a")
    _, role_b, binding_b = build_access(model(namespace=None), "team-b")
    assert role_a["kind"] == "ClusterRole" and binding_a["kind"] == "ClusterRoleBinding"
    assert role_a["rules"][0]["resources"] == ["clusterbasemodels"]
    assert role_a["metadata"]["name"] == role_b["metadata"]["name"]
    assert binding_a["metadata"]["name"] != binding_b["metadata"]["name"]
    assert binding_a["subjects"][0]["namespace"] == "team-a"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("namespace", ["models", None])
def test_children_for_a_long_model_name_validate_strictly(version: str, namespace: str | None) -> None:
    target = model(LONG_NAME, namespace)
    children = [build_job(target, Attempt(LOCATION, URI, 3), JobSettings(), job_name(target, URI, 3)), *build_access(target, "models")]
    for child in children:
        assert kubernetes_errors(child, version) == []
        assert len(child["metadata"]["name"]) <= 63


@pytest.mark.parametrize("namespace", ["models", None])
def test_a_jobs_name_is_its_service_accounts_followed_by_the_attempts_hash(namespace: str | None) -> None:
    """``kubectl get jobs,serviceaccounts,roles,rolebindings`` pairs each Job with its grant;
    a ClusterBaseModel's ClusterRole and ClusterRoleBinding carry the same hash."""
    target = model(namespace=namespace)
    account, role, binding = build_access(target, "models")
    job = job_name(target, URI, 2)
    assert re.fullmatch(rf"{re.escape(account['metadata']['name'])}-[0-9a-f]{{6}}", job)
    shared = account["metadata"]["name"].rsplit("-", 1)[1]
    assert shared in role["metadata"]["name"] and shared in binding["metadata"]["name"]


def test_a_job_named_as_release_0_1_0_named_it_is_still_recognised_as_its_attempt() -> None:
    """A Job that runs across an upgrade of the hook is still the model's: returned, never deleted."""
    digest = hashlib.sha256("\x00".join(["BaseModel", "models", "llama-3.1-8b", URI, "2"]).encode()).hexdigest()
    job = {"metadata": {"name": f"llama-3-1-8b-metadata-{digest[:10]}", "namespace": "models"}}
    assert model_jobs(model(), [job], "models", [1, 2, 3]) == {2: job}
    assert model_jobs(model(), [job], "models", [1, 3]) == {}
