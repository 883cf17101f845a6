"""Every setting the hook reads from its environment (``hooks/settings.py``) can be set
through the chart: most as a value of their own under ``settings``, named as the variable;
the credentials and the TLS files by ``auth`` and ``tls``, as files from a Secret. A
variable added to the hook without a way in through the chart fails here.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from hooks.settings import GROUPS, Settings
from tests.chart import Values, default_values, render
from tests.manifests import HOOK_NAME, Obj, one

# Set by a feature of the chart rather than a value of their own: the values that turn
# the feature on, and the variable the hook's container then gets (a secret as the
# ``_FILE`` form the hook reads, so that it stays out of the pod spec).
FROM_FEATURES: dict[str, tuple[Values, str]] = {
    "HOOK_AUTH_TOKEN": ((("auth.type", "bearer"),), "HOOK_AUTH_TOKEN_FILE"),
    "HOOK_BASIC_AUTH_USERNAME": ((("auth.type", "basic"),), "HOOK_BASIC_AUTH_USERNAME_FILE"),
    "HOOK_BASIC_AUTH_PASSWORD": ((("auth.type", "basic"),), "HOOK_BASIC_AUTH_PASSWORD_FILE"),
    "HOOK_TLS_CERT_FILE": ((("tls.enabled", True),), "HOOK_TLS_CERT_FILE"),
    "HOOK_TLS_KEY_FILE": ((("tls.enabled", True),), "HOOK_TLS_KEY_FILE"),
    "HOOK_TLS_CLIENT_CA_FILE": ((("tls.enabled", True), ("tls.mutual", True)), "HOOK_TLS_CLIENT_CA_FILE"),
}
# `serve --bind` overrides HOOK_BIND, and the container passes the address its port,
# probes, Service and NetworkPolicy all name.
BIND = "HOOK_BIND"


def hook_defaults() -> dict[str, Any]:
    """Every variable the hook reads, with the default of its field."""
    return {item.metadata["variable"].name: item.default for group in GROUPS for item in fields(group)}


def container(objects: list[Obj]) -> Obj:
    (hook,) = one(objects, "Deployment", HOOK_NAME)["spec"]["template"]["spec"]["containers"]
    return hook


def environment(objects: list[Obj]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container(objects)["env"]}


def as_environment(value: Any) -> str:
    """A value as an operator writes it into the hook's environment."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_every_variable_of_the_hook_is_a_chart_value_or_set_by_a_feature() -> None:
    values = set(default_values()["settings"])
    assert values.isdisjoint(FROM_FEATURES) and BIND not in values
    missing = set(hook_defaults()) - values - set(FROM_FEATURES) - {BIND}
    assert not missing, f"give {sorted(missing)} a value under `settings` in charts/ome-basemodel-hook/values.yaml and a rule in values.schema.json"
    assert values <= set(hook_defaults()), f"the hook reads no {sorted(values - set(hook_defaults()))}"


@pytest.mark.helm
def test_every_setting_value_reaches_the_hook_as_its_variable_and_the_hook_reads_it() -> None:
    """Each value set (to the hook's default where it has one, else to the chart's) renders as
    its variable, and the hook reads the container's environment as it reads the values."""
    chart_defaults = default_values()["settings"]
    examples = {name: default if default not in ("", None) else chart_defaults[name]
                for name, default in hook_defaults().items() if name in chart_defaults}
    rendered = environment(render(tuple((f"settings.{name}", value) for name, value in examples.items())))
    expected = {name: as_environment(value) for name, value in examples.items()}
    assert rendered == expected
    read = Settings.from_env(rendered)
    for group in fields(read):
        for item in fields(getattr(read, group.name)):
            variable = item.metadata["variable"]
            if variable.name in expected:
                assert getattr(getattr(read, group.name), item.name) == variable.parse(variable.name, expected[variable.name])


@pytest.mark.helm
@pytest.mark.parametrize("variable", FROM_FEATURES)
def test_every_secret_and_tls_variable_is_a_file_of_the_secret_its_feature_names(variable: str) -> None:
    values, rendered_as = FROM_FEATURES[variable]
    objects = render(values)
    hook = container(objects)
    path = environment(objects)[rendered_as]
    (mount,) = [mount for mount in hook["volumeMounts"] if path.startswith(mount["mountPath"] + "/")]
    assert mount["readOnly"] is True
    (volume,) = [volume for volume in one(objects, "Deployment", HOOK_NAME)["spec"]["template"]["spec"]["volumes"]
                 if volume["name"] == mount["name"]]
    feature = values[0][0].split(".")[0]
    assert volume["secret"]["secretName"] == default_values()[feature]["secretName"]


@pytest.mark.helm
def test_the_hook_listens_on_the_port_the_chart_names() -> None:
    hook = container(render())
    assert BIND not in environment(render())
    (port,) = hook["ports"]
    assert hook["args"] == ["serve", "--bind", f"0.0.0.0:{port['containerPort']}"]
