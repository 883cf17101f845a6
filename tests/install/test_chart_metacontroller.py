"""Metacontroller's namespace and ServiceAccount are values of the chart, and the three
places that name Metacontroller follow them: the status fence admits that identity's
status writes (its CEL run as the API server runs it, ``tests/admission.py``) and refuses
the default one, ClusterRoleBinding ome-basemodel-hook-metacontroller binds it, and the
NetworkPolicy admits its namespace. A Metacontroller installed with its Helm chart is one
value, its release's name; a name the API server would refuse is refused by the schema.
"""

from __future__ import annotations

import pytest

from tests.chart import Values, refusal, render
from tests.manifests import HOOK_NAME, METACONTROLLER_ROLE, Obj, one
from tests.metacontroller.identities import METACONTROLLER, service_account
from tests.fence_review import HOOK_STATUS, KINDS, refusal_of, review, write

pytestmark = pytest.mark.helm

# (values, the user Metacontroller's requests authenticate as, the labels of its pods)
INSTALLS: dict[str, tuple[Values, str, dict[str, str]]] = {
    "namespace and ServiceAccount set": (
        (("metacontroller.namespace", "platform-controllers"), ("metacontroller.serviceAccount", "mc")),
        service_account("platform-controllers", "mc"),
        {"app.kubernetes.io/name": "metacontroller"},
    ),
    "Helm release metacontroller": (
        (("metacontroller.helmRelease", "metacontroller"),),
        service_account("metacontroller", "metacontroller-metacontroller-helm"),
        {"app.kubernetes.io/name": "metacontroller-helm", "app.kubernetes.io/instance": "metacontroller"},
    ),
    "Helm release holding the chart's name": (
        (("metacontroller.namespace", "mc"), ("metacontroller.helmRelease", "metacontroller-helm")),
        service_account("mc", "metacontroller-helm"),
        {"app.kubernetes.io/name": "metacontroller-helm", "app.kubernetes.io/instance": "metacontroller-helm"},
    ),
}


def fence(objects: list[Obj]) -> list[Obj]:
    return [obj for obj in objects if obj["kind"].startswith("ValidatingAdmissionPolicy")]


@pytest.mark.parametrize("install", INSTALLS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_fence_admits_the_status_writes_of_the_metacontroller_the_values_name_and_no_other(install: str, kind: str) -> None:
    values, user, _ = INSTALLS[install]
    objects = render(values)
    assert review(write(kind, user, status=HOOK_STATUS), fence(objects)) is None
    assert review(write(kind, METACONTROLLER, status=HOOK_STATUS), fence(objects)) == refusal_of(kind, user)


@pytest.mark.parametrize("install", INSTALLS)
def test_the_rbac_binds_and_the_network_policy_admits_the_metacontroller_the_values_name(install: str) -> None:
    values, user, pod_labels = INSTALLS[install]
    objects = render(values)
    (subject,) = one(objects, "ClusterRoleBinding", METACONTROLLER_ROLE)["subjects"]
    assert service_account(subject["namespace"], subject["name"]) == user
    assert subject["kind"] == "ServiceAccount"
    (peer,) = one(objects, "NetworkPolicy", HOOK_NAME)["spec"]["ingress"][0]["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": subject["namespace"]}
    assert peer["podSelector"]["matchLabels"] == pod_labels


def test_the_secrets_metacontroller_reads_are_granted_to_the_metacontroller_the_values_name() -> None:
    values, user, _ = INSTALLS["Helm release metacontroller"]
    objects = render((*values, ("auth.type", "bearer")))
    (subject,) = one(objects, "RoleBinding", "ome-basemodel-hook-metacontroller-reads")["subjects"]
    assert service_account(subject["namespace"], subject["name"]) == user


def test_a_metacontroller_name_the_api_server_would_refuse_is_refused_with_the_rule_it_breaks() -> None:
    message = refusal((("metacontroller.serviceAccount", "Metacontroller"), ("metacontroller.namespace", "x" * 64),
                       ("metacontroller.helmRelease", "-metacontroller")))
    assert ("at '/metacontroller/serviceAccount': value must be 'empty, or a lowercase RFC 1123 subdomain: at most 253 "
            "lower case alphanumeric characters") in message
    assert "at '/metacontroller/namespace': maxLength: got 64, want 63" in message
    assert "at '/metacontroller/helmRelease': value must be 'empty, or a Helm release name" in message
