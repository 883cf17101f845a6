"""The overlays the docs tell a reader to write over metacontroller/: their own image, a
bearer token, mutual TLS, their own URL, a Metacontroller installed with Helm. Each is read from the docs (README.md and
docs/*.md, through ``tests/docs.py``), written where a reader would and rendered with
`kubectl kustomize`, so that what the docs say is what a cluster gets.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests import docs
from tests.kustomize import documented_kustomization, render, write_overlay
from tests.manifests import HOOK_IMAGE, HOOK_NAME, LABEL_KEEPER, METACONTROLLER_ROLE, Obj, one
from tests.metacontroller.identities import METACONTROLLER, service_account
from tests.fence_review import HOOK_STATUS, refusal_of, review, write

# Both CompositeControllers' sync, customize and finalize hooks, and the label keeper's sync and customize.
HOOKS_CALLED = 8


def documented_overlay_webhooks(tmp_path: Path, containing: str) -> dict[str, Obj]:
    """Every webhook of every controller, by ``controller/hook``, after the docs' overlay
    holding ``containing`` (its own RBAC files, which the reader writes beside it, left out)."""
    kustomization = documented_kustomization(containing)
    kustomization["resources"] = [entry for entry in kustomization["resources"] if isinstance(entry, Path)]
    objects = render(write_overlay(tmp_path / "my-cluster", kustomization))
    return {
        f"{obj['metadata']['name']}/{hook}": spec["webhook"]
        for obj in objects
        if obj["kind"] in ("CompositeController", "DecoratorController")
        for hook, spec in obj["spec"]["hooks"].items()
    }


def test_documented_image_overlay_points_the_deployment_at_the_image_the_docs_build(tmp_path):
    kustomization = documented_kustomization("images:")
    (entry,) = kustomization["images"]
    assert entry["name"] == HOOK_IMAGE.split(":")[0]
    objects = render(write_overlay(tmp_path / "my-cluster", kustomization))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{entry['newName']}:{entry['newTag']}"
    built = re.findall(r"^docker build -t (\S+) \.$", docs.text(), re.M)
    assert built == [container["image"]], "the docs build the image the overlay names"


def test_documented_authentication_overlay_covers_every_hook_the_controllers_call(tmp_path):
    """The label keeper calls the hook too: without the token it gets a 401."""
    webhooks = documented_overlay_webhooks(tmp_path, "HOOK_AUTH_TOKEN_FILE")
    assert len(webhooks) == HOOKS_CALLED
    assert {name for name, webhook in webhooks.items() if "authorization" not in webhook} == set()


def test_documented_mutual_tls_overlay_covers_every_hook_the_controllers_call(tmp_path):
    webhooks = documented_overlay_webhooks(tmp_path, "HOOK_TLS_CLIENT_CA_FILE")
    assert len(webhooks) == HOOKS_CALLED
    for name, webhook in webhooks.items():
        assert webhook["service"]["protocol"] == "https", name
        assert "caBundle" in webhook and "clientTLS" in webhook, name


def test_documented_own_url_overlay_moves_every_hook_the_controllers_call(tmp_path):
    webhooks = documented_overlay_webhooks(tmp_path, "basemodel-hook.example.com/sync")
    assert len(webhooks) == HOOKS_CALLED
    for name, webhook in webhooks.items():
        assert "service" not in webhook and "path" not in webhook, name
        assert webhook["url"].startswith("https://basemodel-hook.example.com/"), name
    assert webhooks[f"{LABEL_KEEPER}/sync"]["url"].endswith("/label")


def test_documented_helm_overlay_names_metacontrollers_helm_identity_in_all_three_places(tmp_path):
    """The fence's owner, the ClusterRoleBinding's subject and the NetworkPolicy's peer name
    the same Metacontroller: the fence admits its status writes and refuses the kustomize
    install's ServiceAccount, which no longer exists there."""
    objects = render(write_overlay(tmp_path / "my-cluster", documented_kustomization("metacontroller-helm")))
    binding = one(objects, "ClusterRoleBinding", METACONTROLLER_ROLE)
    (subject,) = binding["subjects"]
    helm = service_account(subject["namespace"], subject["name"])
    assert subject["name"].endswith("-metacontroller-helm") and helm != METACONTROLLER
    fence = [obj for obj in objects if obj["kind"].startswith("ValidatingAdmissionPolicy")]
    assert review(write("BaseModel", helm, status=HOOK_STATUS), fence) is None
    assert review(write("BaseModel", METACONTROLLER, status=HOOK_STATUS), fence) == refusal_of("BaseModel", helm)
    (peer,) = one(objects, "NetworkPolicy", HOOK_NAME)["spec"]["ingress"][0]["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": subject["namespace"]}
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "metacontroller-helm"
