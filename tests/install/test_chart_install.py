"""The chart as Helm and the API server take it: ``helm lint --strict`` finds nothing, every
built-in object it renders (every feature on) is valid by Kubernetes' strict schemas, its
version is the product's one version, and it installs no CRD and no sample while carrying
the CRD layer of metacontroller/crds for ``kubectl apply --server-side``.
"""

from __future__ import annotations

import pytest
import yaml

from hooks import __version__
from tests.chart import CHART, Values, helm_run, render, set_arguments
from tests.manifests import Obj, crd_schema, group_of, load_yaml, upstream_crd
from tests.schemas import KUBERNETES_VERSIONS, errors_of, kubernetes_errors, served

# Every feature on at once: each template's every branch renders.
EVERYTHING: Values = (
    ("monitoring.enabled", True),
    ("monitoring.labels.release", "kube-prometheus-stack"),
    ("auth.type", "basic"),
    ("tls.enabled", True),
    ("tls.mutual", True),
    ("metacontroller.helmRelease", "metacontroller"),
    ("image.digest", "sha256:" + "0123456789abcdef" * 4),
)
# Groups whose kinds Kubernetes' own schemas do not describe (tests/hook/test_monitoring.py checks prometheus-operator's).
CUSTOM_GROUPS = {"metacontroller.k8s.io", "monitoring.coreos.com"}


def lint(values: Values = ()) -> tuple[int, str]:
    result = helm_run("lint", "--strict", str(CHART), *set_arguments(values))
    return result.returncode, result.stdout


@pytest.mark.helm
@pytest.mark.parametrize("values", [(), EVERYTHING], ids=["defaults", "every feature"])
def test_helm_lint_strict_finds_nothing(values: Values) -> None:
    status, report = lint(values)
    assert status == 0, report
    assert "[WARNING]" not in report and "[ERROR]" not in report, report
    assert report.rstrip().endswith("1 chart(s) linted, 0 chart(s) failed")


@pytest.mark.helm
@pytest.mark.parametrize("k8s_version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", [(), EVERYTHING], ids=["defaults", "every feature"])
def test_builtin_objects_the_chart_renders_validate_strictly_against_kubernetes_schemas(values: Values, k8s_version: str) -> None:
    builtin = [obj for obj in render(values) if group_of(obj["apiVersion"]) not in CUSTOM_GROUPS and served(obj, k8s_version)]
    assert {obj["kind"] for obj in builtin} >= {"Deployment", "NetworkPolicy", "ClusterRole", "Namespace"}
    failures = [f"{obj['kind']} {obj['metadata']['name']}: {error}" for obj in builtin for error in kubernetes_errors(obj, k8s_version)]
    assert not failures, "\n".join(failures)


@pytest.mark.helm
@pytest.mark.parametrize("values", [EVERYTHING, (("webhook.url", "https://hook.example.com/base"), ("auth.type", "bearer"))],
                         ids=["every feature", "own URL"])
def test_the_controllers_validate_against_metacontrollers_crds_whatever_the_values(values: Values) -> None:
    """Metacontroller's CRDs prune a field they do not know: an authorization, a basicAuth, a
    caBundle or a clientTLS it dropped would leave the hook's calls without it."""
    schemas = {
        "CompositeController": crd_schema(upstream_crd("metacontroller.k8s.io_compositecontrollers.yaml")),
        "DecoratorController": crd_schema(upstream_crd("metacontroller.k8s.io_decoratorcontrollers.yaml")),
    }
    controllers = [obj for obj in render(values) if obj["kind"] in schemas]
    assert len(controllers) == 3
    for controller in controllers:
        assert errors_of(schemas[controller["kind"]], controller) == [], controller["metadata"]["name"]


def test_chart_version_and_app_version_are_the_products_one_version() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    assert (chart["version"], chart["appVersion"]) == (__version__, __version__)


def hook_deployment(values: Values = ()) -> Obj:
    (deployment,) = [obj for obj in render(values) if obj["kind"] == "Deployment"]
    return deployment


@pytest.mark.helm
def test_the_chart_pulls_the_image_of_its_app_version_unless_told_a_tag_or_a_digest() -> None:
    def image(values: Values) -> tuple[str, str]:
        (container,) = hook_deployment(values)["spec"]["template"]["spec"]["containers"]
        return container["image"], container["imagePullPolicy"]

    digest = "sha256:" + "ab" * 32
    repository = "ghcr.io/ome-basemodel-hook/ome-basemodel-hook"
    assert image(()) == (f"{repository}:{__version__}", "IfNotPresent")
    assert image((("image.tag", "0.2.0-rc1"), ("image.pullPolicy", "Always"))) == (f"{repository}:0.2.0-rc1", "Always")
    assert image((("image.digest", digest),)) == (f"{repository}:{__version__}@{digest}", "IfNotPresent")


@pytest.mark.helm
def test_replicas_and_the_containers_resources_are_values() -> None:
    deployment = hook_deployment((("replicas", 3), ("resources.limits.memory", "1Gi"), ("resources.limits.cpu", 2)))
    assert deployment["spec"]["replicas"] == 3
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "192Mi"}, "limits": {"cpu": 2, "memory": "1Gi"}}


@pytest.mark.helm
def test_the_chart_installs_no_models_crd_and_no_sample_whatever_its_values() -> None:
    """Helm would own a CRD it installs: `helm uninstall` would delete it, and every model with
    it. The one CRD it installs is its records', which go with the hook; as a template, so
    that an upgrade changes it (Helm's crds/ folder installs a CRD only where none exists)."""
    assert not (CHART / "crds").exists(), "Helm's crds/ folder installs a CRD only where none exists"
    rendered = [obj for values in ((), EVERYTHING) for obj in render(values)]
    assert not {obj["kind"] for obj in rendered} & {"BaseModel", "ClusterBaseModel"}
    assert {obj["metadata"]["name"] for obj in rendered if obj["kind"] == "CustomResourceDefinition"} == {
        "extractionrecords.ome-basemodel-hook.ome.io"}


def test_the_chart_carries_the_crd_layer_of_the_kustomize_install(rendered_crds: list[Obj]) -> None:
    """files/crds/ is what `kubectl apply --server-side --force-conflicts -f` takes from a pulled chart."""
    carried = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted((CHART / "files" / "crds").glob("*.yaml"))]
    by_name = {crd["metadata"]["name"]: crd for crd in rendered_crds}
    assert {crd["metadata"]["name"]: crd for crd in carried} == by_name


@pytest.mark.helm
def test_monitoring_is_off_by_default_and_renders_only_with_its_value() -> None:
    def monitoring(values: Values) -> set[str]:
        return {obj["kind"] for obj in render(values) if obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "monitoring"}

    assert monitoring(()) == set()
    assert monitoring((("monitoring.enabled", True),)) == {"ServiceMonitor", "PrometheusRule", "NetworkPolicy", "ClusterRole", "ClusterRoleBinding", "ConfigMap"}


@pytest.mark.helm
@pytest.mark.parametrize(("read_job_pods", "pods"), [((), False), ((("settings.READ_JOB_PODS", True),), True),
                                                     ((("settings.READ_JOB_PODS", False),), False)])
def test_metacontroller_may_read_pods_only_where_the_hook_asks_for_them(read_job_pods: Values, pods: bool) -> None:
    """Reading pods makes Metacontroller cache every pod of the cluster: its ClusterRole allows
    it exactly when READ_JOB_PODS=true asks for the Jobs' pods."""
    [role] = [obj for obj in render(read_job_pods)
              if obj["kind"] == "ClusterRole" and obj["metadata"]["name"] == "ome-basemodel-hook-metacontroller"]
    readable = {resource for rule in role["rules"] if "list" in rule["verbs"] and "" in rule["apiGroups"]
                for resource in rule["resources"]}
    assert ("pods" in readable) is pods and "persistentvolumeclaims" in readable
