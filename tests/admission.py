"""Evaluate the shipped ValidatingAdmissionPolicies the way the API server does.

Kubernetes 1.30 and newer, from ``k8s.io/apiserver`` (v0.31) ``pkg/admission/plugin/``:

- Matching (``policy/matching/matching.go`` ``Matches``, ``webhook/predicates/rules/rules.go``):
  a policy's ``matchConstraints``, and a binding's ``matchResources`` when it has them,
  apply when no ``excludeResourceRules`` entry and some ``resourceRules`` entry matches
  (no rules: everything). A rule matches on ``apiGroups``, ``apiVersions`` and
  ``operations`` (each exact or ``*``), ``resources`` (``x`` the resource alone, ``x/status``
  that subresource alone, ``x/*`` the resource and all its subresources, ``*`` every
  resource but no subresource, ``*/*`` everything), ``scope`` (``Cluster``, ``Namespaced``, ``*``) and then
  ``resourceNames`` (none: every name).
- Validating (``policy/validating/validator.go`` ``Validate``): ``matchConditions`` first:
  any ``false`` and the policy does not apply; an error with none ``false`` is decided by
  ``failurePolicy``. Then every validation: ``true`` admits, anything else denies with the
  ``messageExpression`` (when it gives a non-empty, one-line string of at most 5 KiB),
  else the ``message``, else ``failed expression: <expression>``, and the ``reason``
  (``Invalid`` when unset). An evaluation error denies under ``failurePolicy: Fail`` (the
  default) and admits under ``Ignore``.
- Dispatching (``policy/validating/dispatcher.go`` ``Dispatch``): every binding naming a
  matching policy applies its ``validationActions`` to each denial: ``Deny`` refuses the
  request, ``Warn`` and ``Audit`` only report. The first refusal is the answer:
  ``admission.NewForbidden`` words it ``<resource>.<group> "<name>" is forbidden:
  ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request:
  <message>``, and ``reasonToCode`` gives its HTTP code (Forbidden 403, Unauthorized 401,
  RequestEntityTooLarge 413, anything else 422).

The CEL runs in ``cel`` (``common-expression-language`` on PyPI) over ``object`` and
``oldObject`` (``null`` where the operation has none), ``request`` (the admission request
as ``cel/filter.go`` hands it over: ``convertObjectToUnstructured`` leaves out every empty
``omitempty`` field, so a cluster-scoped request has no ``namespace``), ``params`` (``null``)
and ``variables``. The API server evaluates a variable lazily, once, when an expression
first reads it (``cel/composition.go``); CEL has no side effects, so evaluating each one
in order up front decides the same. A variable whose evaluation fails is left out of
``variables``, so exactly the expressions that read it fail (with CEL's missing-key error
rather than "composited variable fails to evaluate").

Not modelled, and refused with ``Unmodelled`` when a manifest uses it: ``paramKind`` and
``paramRef``, non-empty ``namespaceSelector`` and ``objectSelector``, ``auditAnnotations``.
Admission's own configuration (group ``admissionregistration.k8s.io``) is never reviewed.
Also not modelled: ``matchPolicy: Equivalent``'s matching through other versions of a
resource (the model CRDs serve one), the ``authorizer`` and ``namespaceObject`` variables,
CEL cost budgets, and the request's ``options`` and ``userInfo.groups``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

import cel

Obj = dict[str, Any]

ADMISSION_GROUP = "admissionregistration.k8s.io"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
MAX_MESSAGE_BYTES = 5 * 1024
"""``celconfig.MaxEvaluatedMessageExpressionSizeBytes``."""
CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class Unmodelled(NotImplementedError):
    """A policy or binding uses a feature this evaluator does not model."""


class EvaluationError(Exception):
    """A CEL expression failed to compile or to evaluate."""


@dataclass(frozen=True)
class Attributes:
    """``admission.Attributes``: one request as the admission chain sees it. ``object`` is
    what would be stored (for a status UPDATE: the stored object with the new status, the
    status strategy having copied spec and metadata back); ``old_object`` what is stored."""

    operation: str
    api_version: str
    resource: str
    kind: str
    name: str
    namespace: str = ""
    subresource: str = ""
    username: str = ""
    object: Obj | None = None
    old_object: Obj | None = None

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


@dataclass(frozen=True)
class Decision:
    """``PolicyDecision``: ``action`` is ``admit`` or ``deny``; ``evaluation`` says what
    decided it (``admit``, ``deny``, or ``error`` when the failure policy did)."""

    action: str
    evaluation: str
    message: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Refusal:
    """The API server's answer to a refused request: its HTTP code, reason and message."""

    code: int
    reason: str
    message: str


def admission_request(attributes: Attributes) -> Obj:
    """``CreateAdmissionRequest`` through ``convertObjectToUnstructured`` (no ``omitempty``
    field left empty)."""
    kind = {"group": attributes.group, "version": attributes.version, "kind": attributes.kind}
    resource = {"group": attributes.group, "version": attributes.version, "resource": attributes.resource}
    request: Obj = {"uid": "", "kind": kind, "resource": resource, "requestKind": dict(kind),
                    "requestResource": dict(resource), "operation": attributes.operation,
                    "userInfo": {"username": attributes.username} if attributes.username else {}, "dryRun": False}
    optional = {"subResource": attributes.subresource, "requestSubResource": attributes.subresource,
                "name": attributes.name, "namespace": attributes.namespace}
    request.update({key: value for key, value in optional.items() if value})
    return request


@lru_cache(maxsize=None)
def _program(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except ValueError as error:
        raise EvaluationError(f"compilation error: {error}") from None


def evaluate(expression: str, activation: Obj | cel.Context) -> Any:
    """One CEL expression over an activation (``object``, ``request``, ``variables``...)."""
    program = _program(expression)
    try:
        return program.execute(activation)
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        detail = f"no such key: {error.args[0]}" if isinstance(error, KeyError) else str(error)
        raise EvaluationError(f"expression '{expression}' resulted in error: {detail}") from None


def _exact_or_wildcard(items: list[str], requested: str) -> bool:
    return "*" in items or requested in items


def rule_matches(rule: Obj, attributes: Attributes) -> bool:
    """``rules.Matcher.Matches`` and then the rule's ``resourceNames``."""
    scope = rule.get("scope") or "*"
    namespaced = bool(attributes.namespace) and attributes.resource != "namespaces"
    if scope != "*" and (scope == "Namespaced") != namespaced:
        return False
    if not (_exact_or_wildcard(rule.get("operations") or [], attributes.operation)
            and _exact_or_wildcard(rule.get("apiGroups") or [], attributes.group)
            and _exact_or_wildcard(rule.get("apiVersions") or [], attributes.version)):
        return False
    for entry in rule.get("resources") or []:
        resource, _, subresource = entry.partition("/")
        if resource in ("*", attributes.resource) and subresource in ("*", attributes.subresource):
            names = rule.get("resourceNames") or []
            return not names or attributes.name in names
    return False


def matches(criteria: Obj | None, attributes: Attributes) -> bool:
    """``matching.Matcher.Matches`` for a policy's ``matchConstraints`` or a binding's
    ``matchResources`` (a binding without them matches whatever its policy matches)."""
    if criteria is None:
        return True
    if criteria.get("namespaceSelector") or criteria.get("objectSelector"):
        raise Unmodelled("namespaceSelector and objectSelector are not modelled")
    if any(rule_matches(rule, attributes) for rule in criteria.get("excludeResourceRules") or []):
        return False
    rules = criteria.get("resourceRules") or []
    return not rules or any(rule_matches(rule, attributes) for rule in rules)


ACTIVATION_NAMES = ("object", "oldObject", "request", "params", "variables")


@lru_cache(maxsize=None)
def _named(expressions: tuple[str, ...]) -> frozenset[str]:
    """The words a policy's expressions use: an expression can read only the activation
    names it spells out."""
    return frozenset(word for expression in expressions for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression))


def _expressions(spec: Obj) -> tuple[str, ...]:
    return tuple(
        item[key]
        for section in ("matchConditions", "variables", "validations")
        for item in spec.get(section) or []
        for key in ("expression", "messageExpression")
        if key in item
    )


def _visible(obj: Obj | None, named: frozenset[str]) -> Obj | None:
    """The object as the policy's expressions can see it. Converting it for CEL is the
    costly part of an evaluation, and ``managedFields`` is most of an object: a policy
    that never names it gets the object without it (it could still see the key by
    iterating ``metadata``; the shipped fence does not)."""
    if obj is None or "managedFields" in named or "managedFields" not in obj.get("metadata", {}):
        return obj
    return {**obj, "metadata": {key: value for key, value in obj["metadata"].items() if key != "managedFields"}}


def _activation(policy: Obj, attributes: Attributes) -> cel.Context:
    """What every expression of the policy sees, its variables evaluated in order, as one
    CEL context the policy's expressions share (CEL converts its values once)."""
    named = _named(_expressions(policy["spec"]))
    values: Obj = {"object": _visible(attributes.object, named), "oldObject": _visible(attributes.old_object, named),
                   "request": admission_request(attributes), "params": None}
    values = {name: value for name, value in values.items() if name in named}
    variables: Obj = {}
    for variable in policy["spec"].get("variables") or []:
        try:
            value = evaluate(variable["expression"], {**values, "variables": variables})
        except EvaluationError:
            continue
        variables = {**variables, variable["name"]: value}
    context = cel.Context()
    for name, value in {**values, "variables": variables}.items():
        context.add_variable(name, value)
    return context


def _message(validation: Obj, activation: cel.Context) -> str:
    """The denial's message: the ``messageExpression``'s string, else ``message``, else the expression."""
    message = ""
    if "messageExpression" in validation:
        try:
            result = evaluate(validation["messageExpression"], activation)
        except EvaluationError:
            result = None
        if isinstance(result, str):
            message = result.strip()
            if len(message.encode()) > MAX_MESSAGE_BYTES or "\n" in message:
                message = ""
    return message or (validation.get("message") or "").strip() or \
        f"failed expression: {validation['expression'].strip()}"


def validate(policy: Obj, attributes: Attributes) -> list[Decision]:
    """``validator.Validate``: one decision per validation, or none when a match condition
    is false (or fails under ``failurePolicy: Ignore``)."""
    spec = policy["spec"]
    if spec.get("paramKind") or spec.get("auditAnnotations"):
        raise Unmodelled("paramKind and auditAnnotations are not modelled")
    on_error = "deny" if (spec.get("failurePolicy") or "Fail") == "Fail" else "admit"
    activation = _activation(policy, attributes)
    errors = []
    for condition in spec.get("matchConditions") or []:
        try:
            result = evaluate(condition["expression"], activation)
        except EvaluationError as error:
            errors.append(str(error))
            continue
        if result is False:
            return []
    if errors:
        return [Decision(on_error, "error", "; ".join(errors))] if on_error == "deny" else []
    decisions = []
    for validation in spec.get("validations") or []:
        try:
            result = evaluate(validation["expression"], activation)
        except EvaluationError as error:
            decisions.append(Decision(on_error, "error", str(error)))
            continue
        if result is True:
            decisions.append(Decision("admit", "admit"))
        else:
            decisions.append(Decision("deny", "deny", _message(validation, activation), validation.get("reason") or ""))
    return decisions


class Admission:
    """The ValidatingAdmissionPolicies and bindings an API server holds, reviewing requests."""

    def __init__(self, manifests: Iterable[Obj]) -> None:
        objects = list(manifests)
        self.policies = [item for item in objects if item.get("kind") == POLICY]
        self.bindings = [item for item in objects if item.get("kind") == BINDING]
        if any(binding["spec"].get("paramRef") for binding in self.bindings):
            raise Unmodelled("paramRef is not modelled")

    def review(self, attributes: Attributes) -> Refusal | None:
        """``dispatcher.Dispatch``: the first denial a ``Deny`` binding enforces, or ``None``.
        Admission's own configuration is never reviewed (``generic/plugin.go``
        ``shouldIgnoreResource``), so a policy cannot lock its own binding in place."""
        if attributes.group == ADMISSION_GROUP:
            return None
        for policy in self.policies:
            if not matches(policy["spec"].get("matchConstraints"), attributes):
                continue
            bindings = [binding for binding in self.bindings
                        if binding["spec"].get("policyName") == policy["metadata"]["name"]
                        and matches(binding["spec"].get("matchResources"), attributes)]
            if not bindings:
                continue
            denials = [decision for decision in validate(policy, attributes) if decision.action == "deny"]
            for binding in bindings:
                if denials and "Deny" in (binding["spec"].get("validationActions") or []):
                    return _refusal(policy, binding, denials[0], attributes)
        return None


def _refusal(policy: Obj, binding: Obj, denial: Decision, attributes: Attributes) -> Refusal:
    """``admission.NewForbidden`` with the reason's code (``reasonToCode``)."""
    reason = denial.reason or "Invalid"
    resource = f"{attributes.resource}.{attributes.group}" if attributes.group else attributes.resource
    message = (f"{resource} \"{attributes.name}\" is forbidden: ValidatingAdmissionPolicy "
               f"'{policy['metadata']['name']}' with binding '{binding['metadata']['name']}' denied request: {denial.message}")
    return Refusal(CODES.get(reason, 422), reason, message)
