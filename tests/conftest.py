"""Fixtures for the manifest tests: the install `kubectl kustomize` renders from
metacontroller/, its objects, and upstream's CRDs from the reference folder.

Each rendering runs once per session, however many modules read it; the tests read the
objects and never change them. The fixtures reading upstream's CRDs skip, saying what
they need, where the reference folder lacks them, or fail under ``CI=true``
(``tests/reference.py``).

Once the tests are collected, the image tier's build starts in the background, and the
chart's tier builds helm where it is missing (saying so: minutes, once per machine), if
any of their tests is to run; every test runs knowing whether it may run helm
(``tests/helm.py``); and the exploration tier's count of perturbation points closes the
report.
"""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

from tests import helm
from tests.kustomize import render
from tests.manifests import (
    HOOK_NAME,
    LABEL_KEEPER,
    MANIFESTS,
    METACONTROLLER_ROLE,
    Obj,
    crd_schema,
    one,
    upstream_crd,
)


@pytest.fixture(scope="session")
def rendered() -> list[Obj]:
    """What `kubectl apply -k metacontroller/` installs."""
    return render(MANIFESTS)


@pytest.fixture(scope="session")
def rendered_crds() -> list[Obj]:
    """What `kubectl apply -k metacontroller/crds` installs."""
    return render(MANIFESTS / "crds")


@pytest.fixture(scope="session")
def our_crds(rendered_crds: list[Obj]) -> dict[str, Obj]:
    """Our CRDs by the kind they define."""
    return {c["spec"]["names"]["kind"]: c for c in rendered_crds}


@pytest.fixture(scope="session")
def upstream_crds() -> dict[str, Obj]:
    """OME's own CRDs by the kind they define."""
    return {
        "BaseModel": upstream_crd("ome.io_basemodels.yaml"),
        "ClusterBaseModel": upstream_crd("ome.io_clusterbasemodels.yaml"),
    }


@pytest.fixture(scope="session")
def compositecontroller_schema() -> Obj:
    """The schema of Metacontroller's CompositeController CRD."""
    crd = upstream_crd("metacontroller.k8s.io_compositecontrollers.yaml")
    assert crd["metadata"]["name"] == "compositecontrollers.metacontroller.k8s.io"
    return crd_schema(crd)


@pytest.fixture(scope="session")
def controllers(rendered: list[Obj]) -> dict[str, Obj]:
    """The CompositeControllers by name."""
    return {o["metadata"]["name"]: o for o in rendered if o["kind"] == "CompositeController"}


@pytest.fixture(scope="session")
def decorator(rendered: list[Obj]) -> Obj:
    """The label keeper's DecoratorController."""
    return one(rendered, "DecoratorController", LABEL_KEEPER)


@pytest.fixture(scope="session")
def deployment(rendered: list[Obj]) -> Obj:
    """The hook's Deployment."""
    return one(rendered, "Deployment", HOOK_NAME)


@pytest.fixture(scope="session")
def pod_spec(deployment: Obj) -> Obj:
    """The spec of the hook's pods."""
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="session")
def container(pod_spec: Obj) -> Obj:
    """The hook's only container."""
    (c,) = pod_spec["containers"]
    return c


@pytest.fixture(scope="session")
def metacontroller_role(rendered: list[Obj]) -> Obj:
    """The ClusterRole the install grants Metacontroller."""
    return one(rendered, "ClusterRole", METACONTROLLER_ROLE)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.get_closest_marker("image") for item in session.items):
        from tests.image_build import start_building

        start_building()
    if any(item.get_closest_marker(helm.MARKER) for item in session.items) and not helm.binary_path().is_file():
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"building helm {helm.HELM_VERSION} from its Go module into {helm.cache_directory()} "
                                "(minutes, once per machine)")
        helm.built()


@pytest.fixture(autouse=True)
def helm_only_in_its_tier(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test may run helm only in a tier that builds it: the chart's (marked ``helm``), or the
    cluster tier and the comparison, whose worlds build it before they start."""
    with helm.running_test(marked=any(request.node.get_closest_marker(marker) is not None
                                      for marker in (helm.MARKER, "cluster", "comparison"))):
        yield


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The exploration tier says how many perturbation points it explored."""
    module = sys.modules.get("tests.simulation.test_exploration")
    if module is not None and module.REPORT.explored:
        terminalreporter.write_line(module.REPORT.lines()[0])
