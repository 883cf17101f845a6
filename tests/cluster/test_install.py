"""The install, exactly as docs/install.md says, on a real API server beside OME's real manager."""

from __future__ import annotations

import re

import pytest

from tests.cluster import existing
from tests.cluster.kubelet import Run
from tests.cluster.model_files import PARAMETER_SIZE
from tests.cluster.tier import Tier, sample_commands, state
from tests.kustomize import render
from tests.manifests import MANIFESTS

pytestmark = pytest.mark.cluster

READY_SECONDS = 120.0
SAMPLE = "llama-3.1-8b-instruct"
SAMPLE_NAMESPACE = "models"
LABEL = "ome-basemodel-hook.ome.io/storage"
APPLIED = re.compile(r"^(\S+) (created|configured|unchanged|serverside-applied)$", re.M)


def test_every_object_of_the_install_is_accepted_without_a_warning(tier: Tier) -> None:
    hook, overlay = tier.install_output
    assert len(APPLIED.findall(hook.stdout)) == len(render(MANIFESTS))
    assert len(APPLIED.findall(overlay.stdout)) == len(render(MANIFESTS))
    for result in tier.install_output:
        assert "Warning" not in result.stderr, result.stderr


def test_the_fence_type_checks_against_the_real_crds_without_a_warning(tier: Tier) -> None:
    """The API server type-checks the policy's CEL against the models' CRDs and reports any
    problem on the policy's status, not as a refusal."""
    def checked() -> dict[str, object]:
        policy = tier.admin.request("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
                                           "ome-basemodel-hook-status-fence")
        return policy.get("status") or {}
    tier.wait(lambda: checked().get("observedGeneration") == 1, 30, "the fence's type check")
    assert checked().get("typeChecking", {}) == {}, checked()


@pytest.fixture(scope="module")
def existing_ready(tier: Tier) -> Tier:
    """The pvc:// models that predate the hook, taken over and Ready."""
    for kind, (name, namespace, _) in existing.PVC_MODELS.items():
        tier.wait(lambda kind=kind, name=name, namespace=namespace: state(tier.model(kind, name, namespace)) == ("Ready", "Ready"),
                  READY_SECONDS, f"the existing pvc:// {kind} Ready")
    return tier


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_a_pvc_model_that_predates_the_hook_is_taken_over_and_reaches_ready_with_the_metadata_the_real_agent_wrote(
    existing_ready: Tier, kind: str
) -> None:
    name, namespace, _ = existing.PVC_MODELS[kind]
    model = existing_ready.model(kind, name, namespace)
    assert model is not None
    assert {key: model["spec"].get(key) for key in ("modelType", "modelArchitecture", "modelParameterSize")} == \
        {"modelType": "llama", "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": PARAMETER_SIZE}
    assert "ome-agent" in {entry["manager"] for entry in model["metadata"]["managedFields"]}
    assert model["metadata"]["labels"][LABEL] == "pvc"
    assert existing.OME_FINALIZERS[kind] in model["metadata"]["finalizers"]


def test_the_agent_ran_as_the_jobs_non_root_user_with_the_pods_own_arguments(existing_ready: Tier) -> None:
    runs: list[Run] = [run for run in existing_ready.kubelet.runs if run.namespace == existing.NAMESPACE]
    assert runs and all(run.exit_code == 0 and run.user != 0 for run in runs), runs
    assert {run.arguments[0] for run in runs} == {"model-metadata"}
    assert any("--cluster-scoped" in run.arguments for run in runs)
    assert any("--basemodel-namespace" in run.arguments for run in runs)


def test_metacontroller_is_refused_nothing_the_hook_asks_for(existing_ready: Tier) -> None:
    """The RBAC the install gives Metacontroller suffices: no child, and no Role granting
    access to a model, meets the API server's escalation check."""
    refused = [error for error in existing_ready.metacontroller.errors if "forbidden" in error.lower()]
    assert refused == []


@pytest.fixture(scope="module")
def samples(tier: Tier) -> Tier:
    """The docs' samples applied with the docs' commands, on the PVC they assume."""
    tier.storage(SAMPLE_NAMESPACE, "model-storage", f"models/{SAMPLE}")
    for command in sample_commands():
        tier.install_output.append(tier.kubectl_as_user(command))
    return tier


@pytest.mark.parametrize(("kind", "namespace"), [("BaseModel", SAMPLE_NAMESPACE), ("ClusterBaseModel", None)])
def test_the_docs_samples_applied_with_the_docs_commands_reach_ready(samples: Tier, kind: str, namespace: str | None) -> None:
    samples.wait(lambda: state(samples.model(kind, SAMPLE, namespace)) == ("Ready", "Ready"), READY_SECONDS,
                 f"the sample {kind} Ready")
    assert samples.model(kind, SAMPLE, namespace)["spec"]["modelParameterSize"] == PARAMETER_SIZE


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_an_hf_model_that_predates_the_hook_stays_omes_alone(existing_ready: Tier, kind: str) -> None:
    name, namespace, _ = existing.HF_MODELS[kind]
    model = existing_ready.model(kind, name, namespace)
    assert model is not None
    assert LABEL not in (model["metadata"].get("labels") or {})
    assert model["metadata"]["finalizers"] == [existing.OME_FINALIZERS[kind]]
    assert model["status"] == {"state": "In_Transit"}

