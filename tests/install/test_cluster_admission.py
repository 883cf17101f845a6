"""The simulated API server reviews every write by the policies it holds, as the user who makes it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.metacontroller import ApiError, Simulator, manifests
from tests.metacontroller.identities import KUBECTL, METACONTROLLER, OME_MANAGER

Obj = dict[str, Any]

MODELS = "ome.io/v1beta1"
FENCE_MESSAGE = ("basemodels.ome.io \"llama\" is forbidden: ValidatingAdmissionPolicy 'ome-basemodel-hook-status-fence' "
                 "with binding 'ome-basemodel-hook-status-fence' denied request: status of BaseModel models/llama is "
                 f"written only by {METACONTROLLER} for ome-basemodel-hook (its storage is pvc://); "
                 "see docs/install.md#the-status-fence")


def fenced(uri: str = "pvc://model-storage/llama") -> Simulator:
    """A cluster holding the fence and one BaseModel with the hook's status."""
    sim = Simulator()
    for manifest in manifests("fence.yaml"):
        sim.cluster.create(manifest)
    sim.cluster.create({"apiVersion": MODELS, "kind": "BaseModel", "metadata": {"name": "llama", "namespace": "models"},
                        "spec": {"storage": {"storageUri": uri}}})
    sim.cluster.update_status({**stored(sim), "status": {"state": "Ready"}}, user=METACONTROLLER)
    return sim


def stored(sim: Simulator) -> Obj:
    return sim.cluster.get(MODELS, "BaseModel", "models", "llama")


def with_status(model: Obj, state: str) -> Obj:
    return {**model, "status": {"state": state}}


@pytest.mark.parametrize("user", [OME_MANAGER, KUBECTL])
def test_a_pvc_models_status_write_by_anyone_but_metacontroller_is_refused_with_403(user: str) -> None:
    sim = fenced()
    before = stored(sim)
    with pytest.raises(ApiError) as refused:
        sim.cluster.update_status(with_status(before, "In_Transit"), user=user)
    assert (refused.value.code, str(refused.value)) == (403, f"403: {FENCE_MESSAGE}")
    assert stored(sim) == before


def test_a_refused_write_is_refused_even_when_it_would_change_nothing() -> None:
    """Admission runs before the API server finds the write a no-op."""
    sim = fenced()
    with pytest.raises(ApiError, match="status-fence"):
        sim.cluster.update_status(stored(sim), user=OME_MANAGER)


def test_metacontroller_writes_the_status_and_ome_writes_that_of_its_own_models() -> None:
    sim = fenced()
    assert sim.cluster.update_status(with_status(stored(sim), "Failed"), user=METACONTROLLER)["status"] == {"state": "Failed"}
    hf = fenced("hf://meta-llama/Llama-3.1-8B")
    assert hf.cluster.update_status(with_status(stored(hf), "In_Transit"), user=OME_MANAGER)["status"] == {"state": "In_Transit"}


def test_the_uri_judged_is_the_stored_one_whatever_spec_a_status_write_carries() -> None:
    sim = fenced()
    disguised = with_status(stored(sim), "In_Transit")
    disguised["spec"]["storage"]["storageUri"] = "hf://meta-llama/Llama-3.1-8B"
    with pytest.raises(ApiError, match="status-fence"):
        sim.cluster.update_status(disguised, user=OME_MANAGER)


def test_writes_to_the_model_itself_are_never_refused() -> None:
    """OME's finalizer and spec writes, labels, and deletion all go to the main resource."""
    sim = fenced()
    model = stored(sim)
    model["metadata"]["finalizers"] = ["basemodels.ome.io/finalizer"]
    model["metadata"]["labels"] = {"ome-basemodel-hook.ome.io/storage": "pvc"}
    model["spec"]["modelFormat"] = {"name": ""}
    updated = sim.cluster.update(model, manager="manager", user=OME_MANAGER)
    assert updated["metadata"]["generation"] == 2
    sim.cluster.delete(MODELS, "BaseModel", "models", "llama", user=OME_MANAGER)
    model = stored(sim)
    model["metadata"]["finalizers"] = []
    sim.cluster.update(model, user=OME_MANAGER)
    assert sim.cluster.find(MODELS, "BaseModel", "models", "llama") is None


def test_deleting_the_binding_lets_an_admin_through_until_it_is_applied_again() -> None:
    """The documented way past the fence on purpose; admission never reviews its own configuration."""
    sim = fenced()
    binding = sim.cluster.get("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", None,
                              "ome-basemodel-hook-status-fence")
    sim.cluster.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", None,
                       "ome-basemodel-hook-status-fence")
    sim.cluster.update_status(with_status(stored(sim), "Failed"), user=KUBECTL)
    sim.cluster.create({key: binding[key] for key in ("apiVersion", "kind", "spec")} | {
        "metadata": {"name": binding["metadata"]["name"]}})
    with pytest.raises(ApiError, match="status-fence"):
        sim.cluster.update_status(with_status(stored(sim), "Ready"), user=KUBECTL)
    assert stored(sim)["status"] == {"state": "Failed"}
