"""The ValidatingAdmissionPolicy evaluator decides as the API server does, shown with small policies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.admission import Admission, Attributes, admission_request, rule_matches, validate

Obj = dict[str, Any]

MODEL = {"apiVersion": "ome.io/v1beta1", "kind": "BaseModel", "metadata": {"name": "llama", "namespace": "models"},
         "spec": {"storage": {"storageUri": "pvc://store/llama"}}}


def request(operation: str = "UPDATE", resource: str = "basemodels", subresource: str = "status", namespace: str = "models",
            user: str = "kubernetes-admin", obj: Obj | None = MODEL) -> Attributes:
    return Attributes(operation, "ome.io/v1beta1", resource, "BaseModel", "llama", namespace, subresource, user, obj, obj)


def policy(*validations: Obj, failure: str = "Fail", conditions: list[Obj] | None = None,
           variables: list[Obj] | None = None, constraints: Obj | None = None) -> Obj:
    spec: Obj = {"failurePolicy": failure, "validations": list(validations),
                 "matchConstraints": constraints or {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                                        "operations": ["*"], "resources": ["*/*"]}]}}
    if conditions:
        spec["matchConditions"] = conditions
    if variables:
        spec["variables"] = variables
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"}, "spec": spec}


def binding(*actions: str, match: Obj | None = None) -> Obj:
    spec: Obj = {"policyName": "p", "validationActions": list(actions or ["Deny"])}
    if match is not None:
        spec["matchResources"] = match
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b"}, "spec": spec}


def refusal(attributes: Attributes, *objects: Obj) -> tuple[int, str] | None:
    found = Admission(objects).review(attributes)
    return None if found is None else (found.code, found.message.split("denied request: ", 1)[1])


DENY = {"expression": "false", "message": "no"}


@pytest.mark.parametrize(("resources", "main", "status", "scale"), [
    (["basemodels"], True, False, False),
    (["basemodels/status"], False, True, False),
    (["basemodels/*"], True, True, True),       # rules.go: "*" matches the empty subresource too
    (["*"], True, False, False),
    (["*/status"], False, True, False),
    (["*/*"], True, True, True),
])
def test_a_resource_rule_names_a_resource_its_subresources_or_both(resources: list[str], main: bool, status: bool,
                                                                     scale: bool) -> None:
    rule = {"apiGroups": ["ome.io"], "apiVersions": ["v1beta1"], "operations": ["UPDATE"], "resources": resources}
    assert [rule_matches(rule, request(subresource=sub)) for sub in ("", "status", "scale")] == [main, status, scale]


def test_a_rule_matches_on_group_version_operation_scope_and_name() -> None:
    rule = {"apiGroups": ["ome.io"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["*/*"]}
    assert rule_matches(rule, request())
    assert not rule_matches({**rule, "apiGroups": ["batch"]}, request())
    assert not rule_matches({**rule, "apiVersions": ["v1"]}, request())
    assert not rule_matches(rule, request(operation="CREATE"))
    assert rule_matches({**rule, "scope": "Namespaced"}, request())
    assert not rule_matches({**rule, "scope": "Cluster"}, request())
    assert rule_matches({**rule, "scope": "Cluster"}, request(namespace=""))
    assert rule_matches({**rule, "resourceNames": ["llama"]}, request())
    assert not rule_matches({**rule, "resourceNames": ["mistral"]}, request())


def test_an_excluded_resource_is_not_matched_even_when_a_rule_includes_it() -> None:
    everything = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}
    constraints = {"resourceRules": [everything], "excludeResourceRules": [{**everything, "resources": ["basemodels/status"]}]}
    assert refusal(request(), policy(DENY, constraints=constraints), binding()) is None
    assert refusal(request(subresource=""), policy(DENY, constraints=constraints), binding()) == (422, "no")


def test_a_denial_carries_its_reasons_code_and_the_first_message_that_is_fit_to_show() -> None:
    assert refusal(request(), policy({**DENY, "reason": "Forbidden", "messageExpression": "'by ' + request.userInfo.username"}),
                   binding()) == (403, "by kubernetes-admin")
    assert refusal(request(), policy({**DENY, "reason": "Unauthorized", "messageExpression": "'two\\nlines'"}),
                   binding()) == (401, "no")
    assert refusal(request(), policy({**DENY, "messageExpression": "object.missing"}), binding()) == (422, "no")
    assert refusal(request(), policy({"expression": " 1 == 2 "}), binding()) == (422, "failed expression: 1 == 2")


def test_an_evaluation_error_refuses_under_fail_and_admits_under_ignore() -> None:
    broken = {"expression": "object.spec.missing == 'x'", "reason": "Forbidden"}
    assert refusal(request(), policy(broken), binding()) == (
        422, "expression 'object.spec.missing == 'x'' resulted in error: no such key: missing")
    assert refusal(request(), policy(broken, failure="Ignore"), binding()) is None


def test_a_false_match_condition_skips_the_policy_and_an_error_is_left_to_the_failure_policy() -> None:
    false, error = {"name": "f", "expression": "false"}, {"name": "e", "expression": "object.missing"}
    assert validate(policy(DENY, conditions=[false, error]), request()) == []
    (decision,) = validate(policy(DENY, conditions=[error]), request())
    assert (decision.action, decision.evaluation) == ("deny", "error")
    assert validate(policy(DENY, conditions=[error], failure="Ignore"), request()) == []


def test_a_variable_sees_the_ones_before_it_and_fails_only_the_expressions_that_read_it() -> None:
    variables = [{"name": "user", "expression": "request.userInfo.username"},
                 {"name": "admin", "expression": "variables.user == 'kubernetes-admin'"},
                 {"name": "broken", "expression": "object.missing"}]
    checks = ({"expression": "variables.admin"}, {"expression": "variables.broken == 1"})
    decisions = validate(policy(*checks, variables=variables), request())
    assert [(item.action, item.evaluation) for item in decisions] == [("admit", "admit"), ("deny", "error")]


def test_only_a_deny_binding_refuses_and_a_binding_may_narrow_what_it_applies_to() -> None:
    assert refusal(request(), policy(DENY), binding("Warn", "Audit")) is None
    status_only = {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                                      "resources": ["*/status"]}]}
    assert refusal(request(), policy(DENY), binding(match=status_only)) == (422, "no")
    assert refusal(request(subresource=""), policy(DENY), binding(match=status_only)) is None
    assert refusal(request(), policy(DENY)) is None


def test_admissions_own_configuration_is_never_reviewed() -> None:
    deleting = Attributes("DELETE", "admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings",
                          "ValidatingAdmissionPolicyBinding", "b", old_object=binding())
    assert refusal(deleting, policy(DENY), binding()) is None


def test_the_request_leaves_out_empty_fields_as_the_api_server_hands_it_over() -> None:
    cluster_scoped = admission_request(request(namespace="", subresource="", user=""))
    assert "namespace" not in cluster_scoped and "subResource" not in cluster_scoped
    assert cluster_scoped["userInfo"] == {}
    assert admission_request(request())["namespace"] == "models"
