"""The hook installed with Helm, as docs/install.md's "Helm" section says, instead of
``kubectl apply -k``, with the hook's CRDs the page applies after it: the happy path passes
as it does for the kustomize install."""

from __future__ import annotations

import pytest

from tests.cluster.test_lifecycle import KINDS, happy_path
from tests.cluster.tier import Tier

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("kind", KINDS)
def test_installed_with_helm_a_model_goes_to_ready_as_with_the_kustomize_install(helm_tier: Tier, kind: str) -> None:
    assert any("STATUS: deployed" in result.stdout for result in helm_tier.install_output)
    happy_path(helm_tier, kind, "happy path to Ready, installed with Helm", ome_crds=False)
