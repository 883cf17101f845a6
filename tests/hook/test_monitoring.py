"""Tests for metacontroller/monitoring/, the optional kustomize component.

It renders in an overlay with the default install, adds objects without touching the
base's, and each object is checked as a cluster would: built-in kinds with the Kubernetes
schemas, prometheus-operator's kinds with a small closed schema of their published fields
(their CRDs are not on this machine), kube-state-metrics' configuration with a schema of
its configuration's fields. Every PromQL expression must parse, and every metric (and
label) an alert or a panel uses must be one that something really exports under that
name: the hook (read from its own /metrics after one request of every outcome),
kube-state-metrics (derived from our configuration), Prometheus or Metacontroller.
kube-state-metrics makes series for every model, OME's own included, so whatever is
about models reads only those the label keeper marks as the hook's (storage="pvc").
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hooks.http import app as app_module
from hooks.http.app import create_app
from hooks.label_keeper import PVC_STORAGE, STORAGE_LABEL, keep_label
from hooks.settings import ServerSettings, Settings
from tests import docs
from tests.golden import FIXTURE_NOW
from tests.kustomize import documented_kustomization, render, write_overlay
from tests.schemas import CRD_FILES, KUBERNETES_VERSIONS, kubernetes_errors

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "metacontroller"
MONITORING = MANIFESTS / "monitoring"
FIXTURES = REPO / "tests" / "fixtures"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)

HOOK_NS = "ome-basemodel-hook"
MONITORING_GROUP = "monitoring.coreos.com"

# Labels Prometheus puts on every series of a target found by a ServiceMonitor
# (kube-state-metrics is scraped with honorLabels, so its own `namespace` wins).
TARGET_LABELS = {"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

# Series exported by something other than the hook and kube-state-metrics, with their labels.
WELL_KNOWN = {
    # Prometheus, one per scraped target.
    "up": TARGET_LABELS,
    # Metacontroller: client-go's work queue metrics, which it exports through
    # controller-runtime's registry; one queue per controller, named
    # CompositeController-<name> or DecoratorController-<name> (metacontroller_queue_names).
    "workqueue_retries_total": {"name", "controller"} | TARGET_LABELS,
}
# The series kube-state-metrics makes from our configuration: one per model, whoever owns it.
MODEL_SERIES_PREFIX = "kube_ome_"
# The label that says a model is the hook's: the one the label keeper writes and the
# CompositeControllers select by, as a kube-state-metrics path, and the only value it has.
STORAGE_LABEL_PATH = ["metadata", "labels", STORAGE_LABEL]
KNOWN_PATH_VALUES = {tuple(STORAGE_LABEL_PATH): {PVC_STORAGE}}
# Grafana's variables, replaced the way Grafana does before a query is sent.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": HOOK_NS}

# --------------------------------------------------------------------------
# prometheus-operator's kinds: their published fields, as a closed schema
# (monitoring.coreos.com_servicemonitors.yaml / _prometheusrules.yaml, v0.8x).
# --------------------------------------------------------------------------

DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
ANY: dict[str, Any] = {}


def closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def named_fields(names: str, detailed: dict[str, Any]) -> dict[str, Any]:
    """Every published field name, with a schema for those the component uses."""
    return {name: detailed.get(name, ANY) for name in names.split()}


OBJECT_METADATA = {"type": "object", "required": ["name", "namespace"], "properties": {"labels": STRING_MAP, "annotations": STRING_MAP}}
LABEL_SELECTOR = closed({"matchLabels": STRING_MAP, "matchExpressions": {"type": "array"}})

SERVICE_MONITOR_ENDPOINT = closed(
    named_fields(
        "authorization basicAuth bearerTokenFile bearerTokenSecret enableHttp2 filterRunning "
        "followRedirects honorLabels honorTimestamps interval metricRelabelings noProxy oauth2 "
        "params path port proxyConnectHeader proxyFromEnvironment proxyUrl relabelings scheme "
        "scrapeTimeout targetPort tlsConfig trackTimestampsStaleness",
        {
            "port": {"type": "string"},
            "path": {"type": "string"},
            "interval": DURATION,
            "scrapeTimeout": DURATION,
            "scheme": {"enum": ["http", "https"]},
            "honorLabels": {"type": "boolean"},
        },
    )
)
SERVICE_MONITOR = closed(
    {
        "apiVersion": {"const": f"{MONITORING_GROUP}/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": OBJECT_METADATA,
        "spec": closed(
            named_fields(
                "attachMetadata bodySizeLimit convertClassicHistogramsToNHCB endpoints "
                "fallbackScrapeProtocol jobLabel keepDroppedTargets labelLimit labelNameLengthLimit "
                "labelValueLengthLimit namespaceSelector nativeHistogramBucketLimit "
                "nativeHistogramMinBucketFactor podTargetLabels sampleLimit scrapeClass "
                "scrapeClassicHistograms scrapeProtocols selector selectorMechanism targetLabels targetLimit",
                {
                    "endpoints": {"type": "array", "minItems": 1, "items": SERVICE_MONITOR_ENDPOINT},
                    "selector": LABEL_SELECTOR,
                    "namespaceSelector": closed({"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}),
                },
            ),
            required=("endpoints", "selector"),
        ),
    },
    required=("apiVersion", "kind", "metadata", "spec"),
)
PROMETHEUS_RULE = closed(
    {
        "apiVersion": {"const": f"{MONITORING_GROUP}/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": OBJECT_METADATA,
        "spec": closed(
            {
                "groups": {
                    "type": "array",
                    "items": closed(
                        {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "labels": STRING_MAP,
                            "limit": {"type": "integer"},
                            "partial_response_strategy": {"type": "string"},
                            "query_offset": DURATION,
                            "rules": {
                                "type": "array",
                                "items": closed(
                                    {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": DURATION,
                                        "keep_firing_for": DURATION,
                                        "labels": STRING_MAP,
                                        "annotations": STRING_MAP,
                                    },
                                    required=("expr",),
                                ),
                            },
                        },
                        required=("name",),
                    ),
                }
            }
        ),
    },
    required=("apiVersion", "kind", "metadata", "spec"),
)
PROMETHEUS_OPERATOR_SCHEMAS = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}

# kube-state-metrics' CustomResourceStateMetrics (pkg/customresourcestate/config.go).
KSM_PATH = {"type": "array", "items": {"type": "string"}}
KSM_LABELS = {"commonLabels": STRING_MAP, "labelsFromPath": {"type": "object", "additionalProperties": KSM_PATH}}
KSM_META = {"path": KSM_PATH, "labelsFromPath": KSM_LABELS["labelsFromPath"]}
KSM_CONFIG = closed(
    {
        "kind": {"const": "CustomResourceStateMetrics"},
        "spec": closed(
            {
                "resources": {
                    "type": "array",
                    "items": closed(
                        {
                            **KSM_LABELS,
                            "metricNamePrefix": {"type": "string"},
                            "groupVersionKind": closed(
                                {"group": {"type": "string"}, "version": {"type": "string"}, "kind": {"type": "string"}},
                                required=("group", "version", "kind"),
                            ),
                            "resourcePlural": {"type": "string"},
                            "errorLogV": {"type": "integer"},
                            "metrics": {
                                "type": "array",
                                "items": closed(
                                    {
                                        **KSM_LABELS,
                                        "name": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
                                        "help": {"type": "string", "minLength": 1},
                                        "errorLogV": {"type": "integer"},
                                        "each": closed(
                                            {
                                                "type": {"enum": ["Gauge", "StateSet", "Info"]},
                                                "gauge": closed({**KSM_META, "valueFrom": KSM_PATH, "nilIsZero": {"type": "boolean"}, "labelFromKey": {"type": "string"}}),
                                                "stateSet": closed({**KSM_META, "valueFrom": KSM_PATH, "labelName": {"type": "string"}, "list": {"type": "array", "items": {"type": "string"}}}, required=("labelName", "list")),
                                                "info": closed({**KSM_META, "labelFromKey": {"type": "string"}}),
                                            },
                                            required=("type",),
                                        ),
                                    },
                                    required=("name", "help", "each"),
                                ),
                            },
                        },
                        required=("groupVersionKind", "metrics"),
                    ),
                }
            },
            required=("resources",),
        ),
    },
    required=("kind", "spec"),
)
KSM_TYPE_KEYS = {"Gauge": "gauge", "StateSet": "stateSet", "Info": "info"}


def schema_errors(schema: dict[str, Any], document: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


# --------------------------------------------------------------------------
# what the component renders to
# --------------------------------------------------------------------------


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(MANIFESTS)


@pytest.fixture(scope="module")
def with_monitoring(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    # The README's overlay, as a reader would write it.
    kustomization = documented_kustomization("components:")
    assert kustomization["resources"] == [MANIFESTS] and kustomization["components"] == [MONITORING]
    return render(write_overlay(tmp_path_factory.mktemp("overlay") / "with-monitoring", kustomization))


@pytest.fixture(scope="module")
def added(base: list[dict[str, Any]], with_monitoring: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    base_keys = {key(o) for o in base}
    return {key(o): o for o in with_monitoring if key(o) not in base_keys}


def one(objects: dict[tuple[str, str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for k, o in objects.items() if k[0] == kind]
    return found


@pytest.fixture(scope="module")
def rule(added: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    return one(added, "PrometheusRule")


@pytest.fixture(scope="module")
def alerts(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r]


@pytest.fixture(scope="module")
def ksm_config(added: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    configmap = added[("ConfigMap", "monitoring", "ome-basemodel-hook-kube-state-metrics")]
    (text,) = configmap["data"].values()
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def dashboard(added: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    configmap = added[("ConfigMap", "monitoring", "ome-basemodel-hook-dashboard")]
    (text,) = configmap["data"].values()
    return json.loads(text)


def panel_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def substitute_grafana_variables(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


@pytest.fixture(scope="module")
def expressions(alerts: list[dict[str, Any]], dashboard: dict[str, Any]) -> dict[str, str]:
    """Every PromQL query of the component, named by where it is."""
    found = {f"alert {a['alert']}": a["expr"] for a in alerts}
    found.update({f"panel {title!r} #{i}": substitute_grafana_variables(e) for i, (title, e) in enumerate(panel_queries(dashboard))})
    found.update({f"variable {name}": selector for name, (selector, _) in variable_queries(dashboard).items()})
    return found


def variable_queries(dashboard: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Grafana's label_values(selector, label) variables, as (PromQL selector, label)."""
    found = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["definition"])
            assert query, f"variable {variable['name']}: {variable['definition']}"
            found[variable["name"]] = (query.group(1), query.group(2))
    return found


# --------------------------------------------------------------------------
# the series that really exist
# --------------------------------------------------------------------------


def exposition_of(client: Any) -> dict[str, dict[str, set[str]]]:
    """Sample name -> label -> values seen, from one app's /metrics.

    ``_created`` samples are left out: in production the workers share their metrics in
    prometheus-client's multiprocess mode, which does not export them."""
    series: dict[str, dict[str, set[str]]] = {}
    text = client.get("/metrics").get_data(as_text=True)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = series.setdefault(sample.name, {})
            for label, value in sample.labels.items():
                labels.setdefault(label, set()).add(value)
    return series


def merge(*expositions: dict[str, dict[str, set[str]]]) -> dict[str, dict[str, set[str]]]:
    merged: dict[str, dict[str, set[str]]] = {}
    for exposition in expositions:
        for name, labels in exposition.items():
            for label, values in labels.items():
                merged.setdefault(name, {}).setdefault(label, set()).update(values)
    return merged


def _fail(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("injected by test_monitoring")


@pytest.fixture(scope="module")
def hook_series() -> dict[str, dict[str, set[str]]]:
    """The hook's series after one request of every outcome on every hook."""
    token = {"Authorization": "Bearer monitoring-test"}
    served = create_app(Settings(server=ServerSettings(auth_token="monitoring-test")), clock=lambda: NOW).test_client()
    for hook in ("sync", "customize", "finalize"):
        folder = FIXTURES / hook
        request = json.loads(sorted(folder.glob("*.request.json"))[0].read_text(encoding="utf-8"))
        assert served.post(f"/{hook}", json=request, headers=token).status_code == 200
        assert served.post(f"/{hook}", data=b"{", content_type="application/json", headers=token).status_code == 400
        assert served.post(f"/{hook}", json=request).status_code == 401
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(app_module, "sync", _fail)
            patch.setattr(app_module, "customize", _fail)
            assert served.post(f"/{hook}", json=request, headers=token).status_code == 500
    small = create_app(Settings(server=ServerSettings(max_request_bytes=1024)), clock=lambda: NOW).test_client()
    assert small.post("/sync", data=b"{" + b" " * 2048 + b"}", content_type="application/json").status_code == 413
    return merge(exposition_of(served), exposition_of(small))


def golden_conditions() -> dict[str, set[str]]:
    """Condition types and reasons the hook writes, from the golden answers."""
    seen: dict[str, set[str]] = {"type": set(), "reason": set()}
    for answer in FIXTURES.glob("*/*.response.json"):
        status = json.loads(answer.read_text(encoding="utf-8")).get("status") or {}
        for condition in status.get("conditions", []):
            seen["type"].add(condition["type"])
            seen["reason"].add(condition["reason"])
    return seen


def kube_state_metrics_series(config: dict[str, Any]) -> dict[str, dict[str, set[str] | None]]:
    """Series name -> label -> known values (None: any), as kube-state-metrics names them.

    The name is ``<metricNamePrefix>_<name>`` (default prefix ``kube_customresource``),
    labels are the resource's and the metric's labelsFromPath, a StateSet's labelName and
    the customresource_group/_version/_kind labels it always adds. A resource label read
    from the model's storage label has the one value the label keeper writes."""
    conditions = golden_conditions()
    status_enum = set(condition_status_enum())
    series: dict[str, dict[str, set[str] | None]] = {}
    for resource in config["spec"]["resources"]:
        prefix = resource.get("metricNamePrefix", "kube_customresource")
        gvk = resource["groupVersionKind"]
        common: dict[str, set[str] | None] = {
            "customresource_group": {gvk["group"]},
            "customresource_version": {gvk["version"]},
            "customresource_kind": {gvk["kind"]},
            **{label: KNOWN_PATH_VALUES.get(tuple(path)) for label, path in resource.get("labelsFromPath", {}).items()},
        }
        for metric in resource["metrics"]:
            each = metric["each"]
            body = each[KSM_TYPE_KEYS[each["type"]]]
            labels = dict(common)
            for label in [*metric.get("labelsFromPath", {}), *body.get("labelsFromPath", {})]:
                labels[label] = {"type": conditions["type"], "reason": conditions["reason"], "status": status_enum}.get(label)
            if each["type"] == "StateSet":
                labels[body["labelName"]] = set(body["list"])
            series["_".join(part for part in (prefix, metric["name"]) if part)] = labels
    return series


def condition_status_enum() -> list[str]:
    crd = yaml.safe_load(CRD_FILES["BaseModel"].read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    return status["conditions"]["items"]["properties"]["status"]["enum"]


@pytest.fixture(scope="module")
def known_series(hook_series: dict[str, dict[str, set[str]]], ksm_config: dict[str, Any]) -> dict[str, dict[str, set[str] | None]]:
    """Every series the component may use, with the labels (and values, where known) it has."""
    known: dict[str, dict[str, set[str] | None]] = {}
    for name, labels in hook_series.items():
        known[name] = {**{label: None for label in TARGET_LABELS}, **labels}
    for name, ksm_labels in kube_state_metrics_series(ksm_config).items():
        known[name] = {**{label: None for label in TARGET_LABELS}, **ksm_labels}
    for name, labels in WELL_KNOWN.items():
        known[name] = {label: None for label in labels}
    known["workqueue_retries_total"]["name"] = metacontroller_queue_names()
    return known


def metacontroller_queue_names() -> set[str]:
    """Metacontroller names each controller's work queue after its kind and name
    (pkg/controller/composite/controller.go, pkg/controller/decorator/controller.go)."""
    queues = set()
    for manifest in ("compositecontrollers.yaml", "label-keeper.yaml"):
        for document in yaml.safe_load_all((MANIFESTS / manifest).read_text(encoding="utf-8")):
            if document:
                queues.add(f"{document['kind']}-{document['metadata']['name']}")
    return queues


def webhook_timeouts_seconds() -> set[float]:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    timeouts = set()
    for document in yaml.safe_load_all((MANIFESTS / "compositecontrollers.yaml").read_text(encoding="utf-8")):
        for hook in document["spec"]["hooks"].values():
            text = hook["webhook"]["timeout"]
            timeouts.add(sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)))
    return timeouts


def selectors(expr: str) -> list[Any]:
    found: list[Any] = []
    promql_parser.walk(promql_parser.parse(expr), lambda node: found.append(node) if isinstance(node, promql_parser.VectorSelector) else None)
    return found


def grouping_labels(expr: str) -> set[str]:
    """Labels named in by (...), without (...), on (...) and ignoring (...)."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            found.update(node.modifier.labels)
        if isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None and node.modifier.matching is not None:
            found.update(node.modifier.matching.labels)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def aggregation_labels(expr: str) -> set[str] | None:
    """The labels left on an aggregated result (those of its `by`), None if nothing aggregates."""
    found: list[set[str]] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.AggregateExpr):
            modifier = node.modifier
            assert modifier is None or str(modifier.type).endswith("By"), f"`without` in {expr}"
            found.append(set(modifier.labels) if modifier is not None else set())

    promql_parser.walk(promql_parser.parse(expr), visit)
    return set().union(*found) if found else None


# --------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------


def test_component_is_a_kustomize_component_outside_the_default_install():
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    assert kustomization["kind"] == "Component"
    base = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))
    assert not any("monitoring" in str(entry) for entry in base.get("resources", []) + base.get("components", []))


def test_default_install_needs_no_prometheus_operator(base):
    assert not [key(o) for o in base if o["apiVersion"].startswith(f"{MONITORING_GROUP}/")]


def test_component_adds_exactly_the_monitoring_objects(added):
    assert sorted(added) == sorted(
        [
            ("ServiceMonitor", HOOK_NS, "ome-basemodel-hook"),
            ("PrometheusRule", HOOK_NS, "ome-basemodel-hook"),
            ("NetworkPolicy", HOOK_NS, "ome-basemodel-hook-prometheus"),
            ("ClusterRole", "", "ome-basemodel-hook-kube-state-metrics"),
            ("ClusterRoleBinding", "", "ome-basemodel-hook-kube-state-metrics"),
            ("ConfigMap", "monitoring", "ome-basemodel-hook-kube-state-metrics"),
            ("ConfigMap", "monitoring", "ome-basemodel-hook-dashboard"),
        ]
    )


def test_component_leaves_every_base_object_as_it_was(base, with_monitoring):
    rendered = {key(o): o for o in with_monitoring}
    for obj in base:
        assert rendered[key(obj)] == obj, f"the component changed {key(obj)}"


def test_every_added_object_says_it_belongs_to_the_hooks_monitoring(added):
    for obj in added.values():
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "ome-basemodel-hook", key(obj)
        assert labels["app.kubernetes.io/component"] == "monitoring", key(obj)


@pytest.mark.parametrize("k8s_version", KUBERNETES_VERSIONS)
def test_added_builtin_objects_validate_strictly_against_kubernetes_schemas(added, k8s_version):
    builtin = [o for o in added.values() if not o["apiVersion"].startswith(f"{MONITORING_GROUP}/")]
    assert {o["kind"] for o in builtin} == {"NetworkPolicy", "ClusterRole", "ClusterRoleBinding", "ConfigMap"}
    failures = [f"{key(obj)}: {error}" for obj in builtin for error in kubernetes_errors(obj, k8s_version)]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", sorted(PROMETHEUS_OPERATOR_SCHEMAS))
def test_prometheus_operator_objects_use_only_published_fields(added, kind):
    assert schema_errors(PROMETHEUS_OPERATOR_SCHEMAS[kind], one(added, kind)) == []


@pytest.mark.parametrize(
    ("kind", "path", "typo"),
    [("ServiceMonitor", ("spec", "endpoints", 0), "intervall"), ("PrometheusRule", ("spec", "groups", 0, "rules", 0), "annotation")],
)
def test_prometheus_operator_schemas_reject_a_typo(added, kind, path, typo):
    obj = json.loads(json.dumps(one(added, kind)))
    node = obj
    for step in path:
        node = node[step]
    node[typo] = "x"
    assert any(typo in e for e in schema_errors(PROMETHEUS_OPERATOR_SCHEMAS[kind], obj))


# --------------------------------------------------------------------------
# scraping the hook
# --------------------------------------------------------------------------


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_servicemonitor_scrapes_the_hooks_metrics_port(added, base):
    monitor = one(added, "ServiceMonitor")["spec"]
    services = [o for o in base if o["kind"] == "Service" and o["metadata"]["namespace"] in monitor["namespaceSelector"]["matchNames"]]
    (service,) = [s for s in services if matches(monitor["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
    (endpoint,) = monitor["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def scraped_container_port(base: list[dict[str, Any]], monitor: dict[str, Any]) -> int:
    (service,) = [o for o in base if o["kind"] == "Service"]
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    (deployment,) = [o for o in base if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (target,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    return target["containerPort"]


def test_prometheus_is_admitted_to_the_port_it_scrapes_and_metacontroller_still_is(added, base):
    policy = added[("NetworkPolicy", HOOK_NS, "ome-basemodel-hook-prometheus")]["spec"]
    (deployment,) = [o for o in base if o["kind"] == "Deployment"]
    assert matches(policy["podSelector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])
    (rule,) = policy["ingress"]
    assert rule["from"], "an empty `from` admits everyone"
    for peer in rule["from"]:
        assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
        assert "kubernetes.io/metadata.name" in peer["namespaceSelector"]["matchLabels"]
    port = scraped_container_port(base, one(added, "ServiceMonitor"))
    assert rule["ports"] == [{"port": port, "protocol": "TCP"}]


def test_hook_down_alert_watches_the_job_the_servicemonitor_creates(added, alerts):
    # Without spec.jobLabel, prometheus-operator names the job after the Service.
    assert "jobLabel" not in one(added, "ServiceMonitor")["spec"]
    (down,) = [a for a in alerts if a["alert"] == "BasemodelHookDown"]
    (up,) = selectors(down["expr"])
    assert {(m.name, m.value) for m in up.matchers.matchers} == {("job", "ome-basemodel-hook"), ("namespace", HOOK_NS)}


# --------------------------------------------------------------------------
# kube-state-metrics
# --------------------------------------------------------------------------


def test_kube_state_metrics_config_uses_only_its_configuration_fields(ksm_config):
    assert schema_errors(KSM_CONFIG, ksm_config) == []


def test_kube_state_metrics_config_covers_both_kinds_of_model(ksm_config):
    kinds = {(r["groupVersionKind"]["group"], r["groupVersionKind"]["version"], r["groupVersionKind"]["kind"]) for r in ksm_config["spec"]["resources"]}
    assert kinds == {("ome.io", "v1beta1", "BaseModel"), ("ome.io", "v1beta1", "ClusterBaseModel")}


def schema_at(schema: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    """The CRD schema node a kube-state-metrics path reaches (arrays are walked into)."""
    node = schema
    for step in path:
        if node.get("type") == "array":
            node = node["items"]
        node = node.get("properties", {}).get(step)
        if node is None:
            return None
    return node


@pytest.mark.parametrize("kind", ["BaseModel", "ClusterBaseModel"])
def test_kube_state_metrics_paths_exist_in_the_crd_and_states_match_its_enum(ksm_config, kind):
    crd = yaml.safe_load(CRD_FILES[kind].read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    (resource,) = [r for r in ksm_config["spec"]["resources"] if r["groupVersionKind"]["kind"] == kind]
    assert resource["groupVersionKind"]["version"] == version["name"]
    for path in resource.get("labelsFromPath", {}).values():
        assert schema_at(schema, path) is not None or path[0] == "metadata", path
    for metric in resource["metrics"]:
        body = metric["each"][KSM_TYPE_KEYS[metric["each"]["type"]]]
        parent = schema_at(schema, body["path"])
        assert parent is not None, body["path"]
        for path in [*body.get("labelsFromPath", {}).values(), body.get("valueFrom", [])]:
            assert path == [] or schema_at(parent, path) is not None, (metric["name"], path)
        if metric["each"]["type"] == "StateSet":
            assert body["list"] == parent["enum"]
    if kind == "BaseModel":
        assert resource["labelsFromPath"]["namespace"] == ["metadata", "namespace"]


def ksm_resolve(obj: Any, path: list[str]) -> Any:
    """What kube-state-metrics reads at ``path`` (pkg/customresourcestate, compilePath): a
    plain segment is a map key, whole, dots and slashes included; None if it is missing."""
    for part in path:
        assert not (part.startswith("[") and part.endswith("]")) and "=" not in part, f"kube-state-metrics reads {part!r} as a lookup, not a key"
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def test_kube_state_metrics_storage_label_is_the_one_the_keeper_sets_and_the_controllers_select(ksm_config):
    selected = set()
    for document in yaml.safe_load_all((MANIFESTS / "compositecontrollers.yaml").read_text(encoding="utf-8")):
        selected |= set(document["spec"]["parentResource"]["labelSelector"]["matchLabels"].items())
    assert selected == {(STORAGE_LABEL, PVC_STORAGE)}
    for resource in ksm_config["spec"]["resources"]:
        assert resource["labelsFromPath"]["storage"] == STORAGE_LABEL_PATH, resource["groupVersionKind"]["kind"]


@pytest.mark.parametrize("request_file", sorted((FIXTURES / "label").glob("*.request.json")), ids=lambda p: p.name.split(".")[0])
def test_kube_state_metrics_storage_label_reads_what_the_keeper_answered(ksm_config, request_file):
    """The model as Metacontroller leaves it after the keeper's answer (labels merged, a
    null removing one) carries storage="pvc" exactly when it is a pvc:// model, and no
    storage label otherwise (kube-state-metrics skips a label whose path is missing)."""
    request = json.loads(request_file.read_text(encoding="utf-8"))
    model = request["object"]
    answer = keep_label(request, Settings(), FIXTURE_NOW).response
    labels = {**model["metadata"].get("labels", {}), **answer["labels"]}
    model["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    (resource,) = [r for r in ksm_config["spec"]["resources"] if r["groupVersionKind"]["kind"] == model["kind"]]
    assert ksm_resolve(model, resource["labelsFromPath"]["storage"]) == answer["labels"][STORAGE_LABEL]


def test_kube_state_metrics_may_list_and_watch_the_models_and_crds(added):
    role = added[("ClusterRole", "", "ome-basemodel-hook-kube-state-metrics")]
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}
    needed = {(g, r, v) for g, r in [("ome.io", "basemodels"), ("ome.io", "clusterbasemodels"), ("apiextensions.k8s.io", "customresourcedefinitions")] for v in ("list", "watch")}
    assert granted == needed
    binding = added[("ClusterRoleBinding", "", "ome-basemodel-hook-kube-state-metrics")]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]}
    assert [s["kind"] for s in binding["subjects"]] == ["ServiceAccount"]


# --------------------------------------------------------------------------
# PromQL: it parses and uses what exists
# --------------------------------------------------------------------------


def test_every_promql_expression_parses(expressions):
    failures = []
    for where, expr in expressions.items():
        try:
            promql_parser.parse(expr)
        except ValueError as error:
            failures.append(f"{where}: {error}")
    assert not failures, "\n".join(failures)


def test_promql_checks_reject_an_unknown_metric_and_label(known_series):
    assert "basemodel_hook_requests" not in known_series, "a counter is only exported with _total"
    assert "basemodel_hook_request_duration_seconds" not in known_series, "a histogram is exported as _bucket/_sum/_count"
    assert "outcome" in known_series["basemodel_hook_requests_total"]
    assert "status" not in known_series["basemodel_hook_requests_total"]


def test_every_metric_used_is_exported_under_that_name(expressions, known_series):
    unknown = [f"{where}: {s.name}" for where, expr in expressions.items() for s in selectors(expr) if s.name not in known_series]
    assert not unknown, "\n".join(unknown)


def test_every_label_matched_exists_with_such_a_value(expressions, known_series):
    failures = []
    for where, expr in expressions.items():
        for selector in selectors(expr):
            labels = known_series.get(selector.name, {})
            for matcher in selector.matchers.matchers:
                if matcher.name not in labels:
                    failures.append(f"{where}: {selector.name} has no label {matcher.name}")
                    continue
                values = labels[matcher.name]
                op = str(matcher.op)
                if values is None or op.endswith(("NotEqual", "NotRe")):
                    continue
                wanted = matcher.value.split("|") if op.endswith("Re") else [matcher.value]
                failures += [f"{where}: {selector.name}{{{matcher.name}={w!r}}} never exported" for w in wanted if w not in values]
    assert not failures, "\n".join(failures)


def test_every_label_grouped_on_is_carried_by_a_series_of_the_expression(expressions, known_series):
    failures = []
    for where, expr in expressions.items():
        carried = {label for s in selectors(expr) for label in known_series.get(s.name, {})}
        failures += [f"{where}: no series has {label}" for label in grouping_labels(expr) - carried]
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------
# alerts a person can act on
# --------------------------------------------------------------------------


def test_every_alert_says_what_happened_what_it_means_and_what_to_do(alerts):
    names = [a["alert"] for a in alerts]
    assert len(names) == len(set(names))
    for alert in alerts:
        annotations = alert["annotations"]
        for field in ("summary", "description", "runbook"):
            assert len(annotations.get(field, "")) >= 20, f"{alert['alert']} has no {field}"
        assert alert["labels"]["severity"] in {"critical", "warning"}, alert["alert"]
        assert "for" in alert, f"{alert['alert']} would fire on a single evaluation"


def test_alert_templates_use_only_labels_the_expression_carries(alerts, known_series):
    failures = []
    for alert in alerts:
        carried = aggregation_labels(alert["expr"])
        if carried is None:
            carried = {label for s in selectors(alert["expr"]) for label in known_series.get(s.name, {})}
        used = {label for text in alert["annotations"].values() for label in re.findall(r"\$labels\.(\w+)", text)}
        failures += [f"{alert['alert']}: $labels.{label}" for label in used - carried]
    assert not failures, "\n".join(failures)


def test_alerts_cover_the_hooks_errors_latency_reachability_and_the_models(alerts):
    used = {a["alert"]: {s.name for s in selectors(a["expr"])} for a in alerts}
    matchers = {a["alert"]: {(m.name, m.value) for s in selectors(a["expr"]) for m in s.matchers.matchers} for a in alerts}
    assert any("basemodel_hook_errors_total" in names for names in used.values()), "no 5xx alert"
    for outcome in ("bad_request", "unauthorized", "too_large"):
        assert any(("outcome", outcome) in m for m in matchers.values()), f"no alert on {outcome}"
    assert any("basemodel_hook_request_duration_seconds_bucket" in names for names in used.values()), "no latency alert"
    assert any("workqueue_retries_total" in names for names in used.values()), "no Metacontroller alert"
    assert any("up" in names for names in used.values()), "no hook-down alert"
    for state in ("Failed", "In_Transit"):
        for kind in ("basemodel", "clusterbasemodel"):
            assert any(("state", state) in matchers[a] and f"kube_ome_{kind}_state" in used[a] for a in used), (state, kind)


def model_selectors_not_limited_to_pvc(expr: str) -> list[str]:
    """The kube_ome_* selectors of ``expr`` that do not match storage="pvc" exactly."""
    return [
        s.name
        for s in selectors(expr)
        if s.name.startswith(MODEL_SERIES_PREFIX)
        and not any(m.name == "storage" and str(m.op).endswith(".Equal") and m.value == PVC_STORAGE for m in s.matchers.matchers)
    ]


def test_model_scope_check_rejects_a_selector_that_reads_every_model():
    assert model_selectors_not_limited_to_pvc('kube_ome_basemodel_state{state="Failed"} == 1') == ["kube_ome_basemodel_state"]
    assert model_selectors_not_limited_to_pvc('kube_ome_clusterbasemodel_state{storage=~"pvc|"}') == ["kube_ome_clusterbasemodel_state"]
    assert model_selectors_not_limited_to_pvc('kube_ome_basemodel_state{storage!="pvc"}') == ["kube_ome_basemodel_state"]
    assert model_selectors_not_limited_to_pvc('kube_ome_basemodel_state{storage="pvc"} or up') == []


def test_model_alerts_and_panels_concern_only_pvc_models(expressions, alerts, dashboard):
    """An hf:// or oci:// model is OME's: it may download In_Transit for hours, and its
    failures are not the hook's to page for. Every query reading a kube_ome_* series
    selects storage="pvc", and the alerts and panels that do say they are about PVC models."""
    unscoped = [f"{where}: {name}" for where, expr in expressions.items() for name in model_selectors_not_limited_to_pvc(expr)]
    assert not unscoped, "\n".join(unscoped)
    model_alerts = [a for a in alerts if any(s.name.startswith(MODEL_SERIES_PREFIX) for s in selectors(a["expr"]))]
    assert {a["alert"] for a in model_alerts} == {"OMEPVCModelFailed", "OMEPVCModelInTransitTooLong"}
    for alert in model_alerts:
        assert "pvc://" in alert["annotations"]["summary"], alert["alert"]
    model_panels = [
        panel
        for panel in dashboard["panels"]
        if any(s.name.startswith(MODEL_SERIES_PREFIX) for target in panel["targets"] for s in selectors(substitute_grafana_variables(target["expr"])))
    ]
    assert model_panels, "no panel shows the models"
    for panel in model_panels:
        assert panel["title"].startswith("PVC models"), panel["title"]


def test_failed_model_alert_carries_the_ready_reason(alerts):
    (failed,) = [a for a in alerts if a["alert"] == "OMEPVCModelFailed"]
    assert {"kube_ome_basemodel_condition", "kube_ome_clusterbasemodel_condition"} <= {s.name for s in selectors(failed["expr"])}
    assert "$labels.reason" in failed["annotations"]["summary"]


def test_latency_alert_fires_before_the_webhook_timeout_on_a_real_bucket(alerts, hook_series):
    (timeout,) = webhook_timeouts_seconds()
    buckets = {float(le) for le in hook_series["basemodel_hook_request_duration_seconds_bucket"]["le"] if le != "+Inf"}
    (slow,) = [a for a in alerts if "histogram_quantile" in a["expr"]]
    expr = promql_parser.parse(slow["expr"])
    assert str(expr.op) == ">" and expr.lhs.func.name == "histogram_quantile"
    assert expr.lhs.args[0].val == 0.99
    threshold = expr.rhs.val
    assert timeout / 2 <= threshold < timeout
    assert threshold in buckets, "between buckets the quantile is a guess"
    assert max(buckets) >= timeout, "a p99 near the timeout must be measurable"
    assert f"{threshold:g} s" in slow["annotations"]["summary"] and f"{timeout:g} s" in slow["annotations"]["summary"]


def test_metacontroller_alerts_watch_every_queue_of_ours_and_no_other(alerts, known_series):
    watched: set[str] = set()
    for alert in alerts:
        for selector in selectors(alert["expr"]):
            if selector.name == "workqueue_retries_total":
                (matcher,) = selector.matchers.matchers
                queues = set(matcher.value.split("|"))
                assert queues <= known_series["workqueue_retries_total"]["name"], alert["alert"]
                watched |= queues
    assert watched == known_series["workqueue_retries_total"]["name"]


def test_docs_explain_every_alert_and_how_to_install_the_component(alerts):
    page = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "metacontroller/monitoring" in page and "components:" in page
    section = page[page.index("## Alerts"):]
    section = section[: section.index("\n## ", 1)]
    missing = [a["alert"] for a in alerts if f"`{a['alert']}`" not in section]
    assert not missing, f"docs/operations.md's Alerts section does not explain {missing}"


def test_docs_promql_parses_and_reads_kube_state_metrics_series_by_their_labels(known_series):
    """The expressions the install page gives an SRE to adjust OME's alerts."""
    expressions = docs.blocks("promql")
    assert expressions
    for expr in expressions:
        for selector in selectors(expr):
            if selector.name.startswith("kube_ome_"):
                labels = {matcher.name for matcher in selector.matchers.matchers}
                assert labels <= known_series[selector.name].keys(), (selector.name, labels)


# --------------------------------------------------------------------------
# the dashboard
# --------------------------------------------------------------------------


def test_dashboard_shows_requests_latency_errors_decisions_and_models_by_state(dashboard):
    assert dashboard["uid"] and dashboard["title"]
    used = {s.name for _, expr in panel_queries(dashboard) for s in selectors(substitute_grafana_variables(expr))}
    assert {
        "basemodel_hook_requests_total",
        "basemodel_hook_request_duration_seconds_bucket",
        "basemodel_hook_errors_total",
        "basemodel_hook_decisions_total",
        "kube_ome_basemodel_state",
        "kube_ome_clusterbasemodel_state",
    } <= used
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_shows_the_retries_of_every_queue_of_ours_and_no_other(dashboard, known_series):
    shown: set[str] = set()
    for _, expr in panel_queries(dashboard):
        for selector in selectors(substitute_grafana_variables(expr)):
            if selector.name == "workqueue_retries_total":
                (matcher,) = selector.matchers.matchers
                shown |= set(matcher.value.split("|"))
    assert shown == known_series["workqueue_retries_total"]["name"]


def test_dashboard_variables_offer_values_of_a_label_their_series_has(dashboard, known_series):
    for name, (selector, label) in variable_queries(dashboard).items():
        (series,) = selectors(selector)
        assert label in known_series[series.name], name


def test_dashboard_queries_the_data_source_it_lets_the_reader_choose(dashboard):
    (source,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == f"${{{source['name']}}}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]


def test_dashboard_configmap_is_labelled_for_grafanas_sidecar(added):
    configmap = added[("ConfigMap", "monitoring", "ome-basemodel-hook-dashboard")]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert list(configmap["data"]) == ["ome-basemodel-hook.json"]
