"""The chart installs what the kustomizations install: by default the objects of
`kubectl kustomize metacontroller/`, and with a value set, the objects of the docs' overlay
that makes the same choice. Each pair is compared object by object, so a manifest changed
on one side only fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import docs
from tests.chart import Values, render as render_chart
from tests.kustomize import documented_kustomization, render as render_kustomization, write_overlay
from tests.manifests import Obj

pytestmark = pytest.mark.helm

Key = tuple[str, str, str, str]

# Each value of the chart beside the docs' overlay (found by a string it holds) that makes the same choice.
OVERLAYS: dict[str, tuple[Values, str]] = {
    "image": ((("image.repository", "registry.example.com/platform/ome-basemodel-hook"),), "images:"),
    "monitoring": ((("monitoring.enabled", True),), "../../metacontroller/monitoring"),
    "metacontroller-helm": ((("metacontroller.helmRelease", "metacontroller"),), "metacontroller-helm"),
    "own-url": ((("webhook.url", "https://basemodel-hook.example.com"),), "basemodel-hook.example.com/sync"),
    "bearer-token": ((("auth.type", "bearer"),), "HOOK_AUTH_TOKEN_FILE"),
    "mutual-tls": ((("tls.enabled", True), ("tls.mutual", True)), "HOOK_TLS_CLIENT_CA_FILE"),
}
# What the chart renders for a Secret the reader would otherwise grant Metacontroller by hand.
SECRET_READERS = {("Role", "ome-basemodel-hook-metacontroller-reads"), ("RoleBinding", "ome-basemodel-hook-metacontroller-reads")}


def key(obj: Obj) -> Key:
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def comparable(obj: Obj) -> Obj:
    """The object with its containers' environment in name order. The kustomize Deployment
    lists PROMETHEUS_MULTIPROC_DIR first; the chart lists its settings by name. Order means
    nothing to the kubelet unless a value refers to another variable, as ``$(NAME)``,
    which the assertion below rules out."""
    if obj["kind"] != "Deployment":
        return obj
    copy: Any = yaml.safe_load(yaml.safe_dump(obj))
    for container in copy["spec"]["template"]["spec"]["containers"]:
        assert not [item for item in container.get("env", []) if "$(" in item.get("value", "")], "a variable refers to another"
        container["env"] = sorted(container.get("env", []), key=lambda item: item["name"])
    return copy


def by_key(objects: list[Obj]) -> dict[Key, Obj]:
    found = {key(obj): comparable(obj) for obj in objects}
    assert len(found) == len(objects), "two objects of one kind share a name"
    return found


def assert_same_objects(chart: list[Obj], kustomize: list[Obj]) -> None:
    """The same objects, keyed by apiVersion, kind, namespace and name, each equal field for field."""
    ours, theirs = by_key(chart), by_key(kustomize)
    assert sorted(ours) == sorted(theirs), "the chart and the kustomization install different objects"
    for item, obj in theirs.items():
        assert ours[item] == obj, f"{item[1]} {item[3]} differs between the chart and the kustomization"


def documented_overlay(tmp_path: Path, containing: str) -> list[Obj]:
    """What the docs' overlay holding ``containing`` renders, its RBAC files (which the reader writes beside it) left out."""
    kustomization = documented_kustomization(containing)
    kustomization["resources"] = [entry for entry in kustomization["resources"] if isinstance(entry, Path)]
    return render_kustomization(write_overlay(tmp_path / "my-cluster", kustomization))


def test_default_values_render_exactly_the_objects_of_the_kustomize_install(rendered: list[Obj]) -> None:
    assert_same_objects(render_chart(), rendered)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_value_renders_what_the_docs_overlay_making_the_same_choice_renders(overlay: str, tmp_path: Path) -> None:
    values, containing = OVERLAYS[overlay]
    chart = [obj for obj in render_chart(values) if (obj["kind"], obj["metadata"]["name"]) not in SECRET_READERS]
    assert_same_objects(chart, documented_overlay(tmp_path, containing))


def test_the_secret_metacontroller_reads_for_the_token_is_granted_as_the_docs_grant_it() -> None:
    """The docs have the reader write a Role and RoleBinding for the token's Secret; the chart renders them."""
    (role_block,) = [block for block in docs.blocks("yaml") if "kind: Role\n" in block and "metacontroller-reads-hook-auth" in block]
    documented = {obj["kind"]: obj for obj in yaml.safe_load_all(role_block)}
    chart = {obj["kind"]: obj for obj in render_chart(OVERLAYS["bearer-token"][0]) if (obj["kind"], obj["metadata"]["name"]) in SECRET_READERS}
    assert chart["Role"]["rules"] == documented["Role"]["rules"]
    assert chart["RoleBinding"]["subjects"] == documented["RoleBinding"]["subjects"]
    assert chart["RoleBinding"]["roleRef"]["name"] == chart["Role"]["metadata"]["name"]

