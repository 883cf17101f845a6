"""What the install grants Metacontroller: a ClusterRole, bound to Metacontroller's
ServiceAccount, that covers every parent, child and related object its controllers touch,
what the hook's Job roles grant (RBAC lets no one grant more than they hold), and nothing
more: no wildcard, no escalation shortcut, no Secret.
"""

from __future__ import annotations

import pytest

from tests.manifests import METACONTROLLER_ROLE, Obj, group_of, one


def allows(rules: list[Obj], group: str, resource: str, verb: str, resource_name: str | None = None) -> bool:
    """Whether RBAC ``rules`` grant ``verb`` on ``resource`` of API ``group`` (named ``resource_name``)."""
    for rule in rules:
        if rule.get("nonResourceURLs"):
            continue
        if not ({"*", group} & set(rule.get("apiGroups", []))):
            continue
        if not ({"*", resource} & set(rule.get("resources", []))):
            continue
        if not ({"*", verb} & set(rule.get("verbs", []))):
            continue
        names = rule.get("resourceNames")
        if names and resource_name not in names:
            continue
        return True
    return False


def test_metacontroller_clusterrole_is_bound_to_metacontrollers_serviceaccount(rendered):
    binding = one(rendered, "ClusterRoleBinding", METACONTROLLER_ROLE)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": METACONTROLLER_ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}
    ]


@pytest.mark.parametrize("resource", ["basemodels", "clusterbasemodels"])
def test_metacontroller_holds_what_the_job_roles_grant_so_it_may_create_them(
    metacontroller_role, resource
):
    # RBAC escalation prevention: the hook's Roles/ClusterRoles grant these verbs.
    for verb in ("get", "update", "patch"):
        assert allows(metacontroller_role["rules"], "ome.io", resource, verb, "any-model"), verb


def test_metacontroller_clusterrole_covers_parents_children_and_related(
    metacontroller_role, controllers, decorator
):
    rules = metacontroller_role["rules"]
    needed = []
    for cc in controllers.values():
        parent = cc["spec"]["parentResource"]["resource"]
        needed += [("ome.io", parent, v) for v in ("get", "list", "watch", "update", "patch")]
        needed += [("ome.io", f"{parent}/status", v) for v in ("get", "update", "patch")]
        needed += [("ome.io", f"{parent}/finalizers", "update")]
        for child in cc["spec"]["childResources"]:
            group = group_of(child["apiVersion"])
            needed += [
                (group, child["resource"], v)
                for v in ("get", "list", "watch", "create", "update", "patch", "delete")
            ]
    needed += [("", "persistentvolumeclaims", v) for v in ("get", "list", "watch")]
    needed += [("", "namespaces", v) for v in ("list", "watch")]
    needed += [("", "events", v) for v in ("create", "patch")]
    needed += [("metacontroller.k8s.io", r, v) for r in ("compositecontrollers", "decoratorcontrollers")
               for v in ("get", "list", "watch")]
    for parent in decorator["spec"]["resources"]:
        needed += [(group_of(parent["apiVersion"]), parent["resource"], v) for v in ("list", "watch", "update")]
    missing = [n for n in needed if not allows(rules, *n)]
    assert not missing, missing


def test_metacontroller_clusterrole_grants_no_wildcards_or_escalation_shortcuts(metacontroller_role):
    for rule in metacontroller_role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert "secrets" not in rule["resources"], rule
