"""Configuration comes from the environment and a bad value names its variable."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from hooks.settings import (
    GROUPS,
    MAX_PORT,
    ConfigError,
    JobSettings,
    RetrySettings,
    ServerSettings,
    Settings,
    Variable,
    WholeNumber,
    documented,
    parse_bind,
)


def test_defaults_are_the_documented_values() -> None:
    """docs/configuration.md prints its defaults from the settings; these are the values it
    must print, each within the contract's bounds (a deadline of 300 s, a positive TTL, a
    backoff limit of 1 to 6, a first delay of at least 10 s, at most an hour and 10 attempts,
    a Job that never runs as root)."""
    settings = Settings.from_env({})
    assert settings.job == JobSettings(
        agent_image="ghcr.io/moirai-internal/ome-agent:v0.1.5",
        agent_config="/ome-agent.yaml",
        mount_path="/mnt/models",
        run_as_user=1000,
        run_as_group=1000,
        active_deadline_seconds=300,
        ttl_seconds_after_finished=3600,
        backoff_limit=2,
        cpu_request="100m",
        cpu_limit="500m",
        memory_request="256Mi",
        memory_limit="512Mi",
    )
    assert settings.retry == RetrySettings(base_delay_seconds=10, max_delay_seconds=600, max_attempts=5)
    assert (settings.sync.read_job_pods, settings.sync.finalize_resync_seconds) == (False, 30)
    assert settings.server == ServerSettings(
        bind="127.0.0.1:8080",
        workers=None,
        max_request_bytes=33554432,
        auth_token="",
        basic_auth_username="",
        basic_auth_password="",
        tls_cert_file="",
        tls_key_file="",
        tls_client_ca_file="",
        metrics_directory="",
    )


def test_every_field_of_every_group_names_its_variable_once_with_a_parser_and_a_meaning() -> None:
    names = [variable.name for _, variable, _ in documented()]
    assert len(names) == len(set(names)) == sum(len(fields(group)) for group in GROUPS)
    assert all(variable.doc and callable(variable.parse) for _, variable, _ in documented())


def test_environment_overrides_defaults() -> None:
    settings = Settings.from_env(
        {
            "OME_AGENT_IMAGE": "registry.example.com/ome/ome-agent:v0.1.4",
            "JOB_RUN_AS_USER": "65532",
            "JOB_MEMORY_LIMIT": "1Gi",
            "RETRY_MAX_ATTEMPTS": "3",
            "MODEL_MOUNT_PATH": "/models/",
        }
    )
    assert settings.job.agent_image == "registry.example.com/ome/ome-agent:v0.1.4"
    assert settings.job.run_as_user == 65532
    assert settings.job.memory_limit == "1Gi"
    assert settings.retry.max_attempts == 3
    assert settings.job.mount_path == "/models"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("JOB_BACKOFF_LIMIT", "0"),
        ("JOB_BACKOFF_LIMIT", "7"),
        ("JOB_ACTIVE_DEADLINE_SECONDS", "five minutes"),
        ("JOB_TTL_SECONDS_AFTER_FINISHED", "0"),
        ("JOB_RUN_AS_USER", "0"),
        ("JOB_CPU_LIMIT", "half a core"),
        ("MODEL_MOUNT_PATH", "relative/path"),
        ("OME_AGENT_CONFIG", "/etc/../ome-agent.yaml"),
        ("OME_AGENT_IMAGE", "not an image"),
        ("RETRY_BASE_DELAY_SECONDS", "5"),
        ("HOOK_MAX_REQUEST_BYTES", "-1"),
    ],
)
def test_bad_value_stops_start_with_the_variable_named(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


def test_retry_cap_below_base_is_refused() -> None:
    with pytest.raises(ConfigError, match="RETRY_MAX_DELAY_SECONDS"):
        Settings.from_env({"RETRY_BASE_DELAY_SECONDS": "60", "RETRY_MAX_DELAY_SECONDS": "30"})


def test_basic_auth_needs_both_halves_and_excludes_a_token() -> None:
    with pytest.raises(ConfigError, match="HOOK_BASIC_AUTH_PASSWORD"):
        Settings.from_env({"HOOK_BASIC_AUTH_USERNAME": "metacontroller"})
    with pytest.raises(ConfigError, match="exclusive"):
        Settings.from_env({"HOOK_AUTH_TOKEN": "t", "HOOK_BASIC_AUTH_USERNAME": "u", "HOOK_BASIC_AUTH_PASSWORD": "p"})


def test_secret_is_read_from_a_mounted_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t\n", encoding="utf-8")
    assert Settings.from_env({"HOOK_AUTH_TOKEN_FILE": str(token)}).server.auth_token == "s3cr3t"


def test_unreadable_secret_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="HOOK_AUTH_TOKEN_FILE"):
        Settings.from_env({"HOOK_AUTH_TOKEN_FILE": str(tmp_path / "missing")})


@pytest.mark.parametrize(
    ("environment", "variable"),
    [
        ({"JOB_CPU_REQUEST": "2", "JOB_CPU_LIMIT": "500m"}, "JOB_CPU_REQUEST"),
        ({"JOB_MEMORY_REQUEST": "1Gi", "JOB_MEMORY_LIMIT": "512Mi"}, "JOB_MEMORY_REQUEST"),
        ({"MODEL_MOUNT_PATH": "/tmp"}, "MODEL_MOUNT_PATH"),
        ({"MODEL_MOUNT_PATH": "/"}, "MODEL_MOUNT_PATH"),
        ({"OME_AGENT_CONFIG": "/ome-agent"}, "OME_AGENT_CONFIG"),
        ({"JOB_TTL_SECONDS_AFTER_FINISHED": "5"}, "JOB_TTL_SECONDS_AFTER_FINISHED"),
    ],
)
def test_configuration_that_would_break_every_job_is_refused(environment: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env(environment)


def test_request_equal_to_limit_in_other_units_is_accepted() -> None:
    settings = Settings.from_env({"JOB_CPU_REQUEST": "700m", "JOB_CPU_LIMIT": "0.7", "JOB_MEMORY_REQUEST": "1024Mi", "JOB_MEMORY_LIMIT": "1Gi"})
    assert (settings.job.cpu_request, settings.job.cpu_limit) == ("700m", "0.7")


@pytest.mark.parametrize("path", ["//tmp", "/./tmp/models", "/tmp/../tmp"])
def test_mount_path_is_normalized_before_it_is_judged(path: str) -> None:
    with pytest.raises(ConfigError, match="MODEL_MOUNT_PATH"):
        Settings.from_env({"MODEL_MOUNT_PATH": path})


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("false", False), (" False ", False), ("TRUE", True)])
def test_read_job_pods_reads_true_or_false(raw: str, value: bool) -> None:
    assert Settings.from_env({"READ_JOB_PODS": raw}).sync.read_job_pods is value


def test_read_job_pods_refuses_anything_but_true_or_false() -> None:
    with pytest.raises(ConfigError, match="READ_JOB_PODS='yes' is not true or false"):
        Settings.from_env({"READ_JOB_PODS": "yes"})


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/moirai-internal/ome-agent:v0.1.5",
        "registry.example.com:5000/ome/ome-agent:v0.1.5",
        "ome-agent",
        "localhost/ome-agent:dev_1",
        "ghcr.io/moirai-internal/ome-agent@sha256:" + "ab" * 32,
        "ghcr.io/moirai-internal/ome-agent:v0.1.5@sha256:" + "ab" * 32,
    ],
)
def test_image_reference_the_kubelet_accepts_is_accepted(image: str) -> None:
    assert Settings.from_env({"OME_AGENT_IMAGE": image}).job.agent_image == image


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("foo!!", "path component 'foo!!' must be lowercase letters and digits, joined by one '.', one or two '_', or dashes"),
        ("ghcr.io/Foo/Bar:v1", "repository path must be lowercase"),
        ("ghcr.io/x/y:tag:tag", "it has more than one ':tag'"),
        ("https://ghcr.io/x/y", "drop the scheme 'https://'"),
        ("ghcr.io/x/y@sha256:abc", "digest 'sha256:abc' must be sha256: and 64 lowercase hexadecimal digits (or sha384: 96, sha512: 128)"),
    ],
)
def test_image_reference_the_kubelet_refuses_is_refused_naming_the_rule_and_the_form(image: str, reason: str) -> None:
    with pytest.raises(ConfigError) as refusal:
        Settings.from_env({"OME_AGENT_IMAGE": image})
    assert str(refusal.value) == (
        f"OME_AGENT_IMAGE={image!r} is not an image reference: {reason}; "
        "expected [registry[:port]/]path[:tag][@sha256:digest], such as ghcr.io/moirai-internal/ome-agent:v0.1.5"
    )


@pytest.mark.parametrize("value", ["1", "250m", "0.5", ".5", "5.", "+2", "1e3", "1E-1", "100k", "1M", "512Mi", "1.5Gi", "1n"])
def test_quantity_the_api_server_accepts_is_accepted_as_written(value: str) -> None:
    assert Settings.from_env({"JOB_CPU_REQUEST": value, "JOB_CPU_LIMIT": "1E", "JOB_MEMORY_LIMIT": value, "JOB_MEMORY_REQUEST": "1n"}).job.cpu_request == value


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("half a core", "is not a Kubernetes quantity: expected a decimal number with an optional suffix"),
        ("500 m", "is not a Kubernetes quantity"),
        ("1K", "is not a Kubernetes quantity"),
        ("1mi", "is not a Kubernetes quantity"),
        ("1e", "is not a Kubernetes quantity"),
        ("1e1.5", "is not a Kubernetes quantity"),
        ("0x10", "is not a Kubernetes quantity"),
        (".", "is not a Kubernetes quantity"),
        ("1e3m", "is not a Kubernetes quantity"),
        ("1e2147483648", "is not a Kubernetes quantity: its exponent is outside -2147483648..2147483647"),
        ("0", "must be above zero"),
        ("0.0Gi", "must be above zero"),
        ("-500m", "must be above zero"),
    ],
)
def test_cpu_or_memory_that_is_no_quantity_or_not_above_zero_is_refused(value: str, complaint: str) -> None:
    for variable in ("JOB_CPU_REQUEST", "JOB_CPU_LIMIT", "JOB_MEMORY_REQUEST", "JOB_MEMORY_LIMIT"):
        with pytest.raises(ConfigError) as refusal:
            Settings.from_env({variable: value})
        assert str(refusal.value).startswith(f"{variable}={value!r} {complaint}")


@pytest.mark.parametrize(
    ("request_value", "limit_value"),
    [("1", "1000m"), ("1Gi", "1073741824"), ("1e3", "1k"), ("0.5n", "1n"), ("1.1n", "2n")],
)
def test_request_equal_to_its_limit_as_the_api_server_rounds_them_is_accepted(request_value: str, limit_value: str) -> None:
    Settings.from_env({"JOB_CPU_REQUEST": request_value, "JOB_CPU_LIMIT": limit_value})


@pytest.mark.parametrize(("request_value", "limit_value"), [("1001m", "1"), ("1Gi", "1G"), ("1e3", "999"), ("1.1n", "1n")])
def test_request_above_its_limit_by_any_amount_is_refused(request_value: str, limit_value: str) -> None:
    with pytest.raises(ConfigError, match="JOB_CPU_REQUEST .* is above JOB_CPU_LIMIT"):
        Settings.from_env({"JOB_CPU_REQUEST": request_value, "JOB_CPU_LIMIT": limit_value})


@pytest.mark.parametrize(
    ("environment", "complaint"),
    [
        ({"OME_AGENT_CONFIG": "/tmp/ome-agent.yaml"}, "is under /tmp, the Job's scratch volume"),
        ({"OME_AGENT_CONFIG": "/tmp//ome-agent.yaml"}, "is under /tmp, the Job's scratch volume"),
        ({"OME_AGENT_CONFIG": "/mnt/models/ome-agent.yaml"}, "is under MODEL_MOUNT_PATH=/mnt/models"),
        ({"OME_AGENT_CONFIG": "/models/x/agent.json", "MODEL_MOUNT_PATH": "/models/"}, "is under MODEL_MOUNT_PATH=/models"),
    ],
)
def test_agent_config_where_the_job_cannot_hold_it_is_refused(environment: dict[str, str], complaint: str) -> None:
    with pytest.raises(ConfigError, match="^OME_AGENT_CONFIG=") as refusal:
        Settings.from_env(environment)
    assert complaint in str(refusal.value)


@pytest.mark.parametrize("path", ["/etc/ome/ome-agent.yaml", "/mnt/models.yaml", "/tmpfiles/agent.yml"])
def test_agent_config_in_the_agent_image_is_accepted(path: str) -> None:
    assert Settings.from_env({"OME_AGENT_CONFIG": path}).job.agent_config == path


@pytest.mark.parametrize("token", ["tök3n", "a\x00b", "line\nbreak", "tab\tinside"])
def test_token_no_authorization_header_can_carry_is_refused_without_showing_it(token: str) -> None:
    with pytest.raises(ConfigError, match="^HOOK_AUTH_TOKEN holds a character other than printable ASCII") as refusal:
        Settings.from_env({"HOOK_AUTH_TOKEN": token})
    assert token not in str(refusal.value)


def test_basic_auth_user_name_with_a_colon_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError, match="^HOOK_BASIC_AUTH_USERNAME holds a ':'") as refusal:
        Settings.from_env({"HOOK_BASIC_AUTH_USERNAME": "meta:controller", "HOOK_BASIC_AUTH_PASSWORD": "p:w"})
    assert "meta:controller" not in str(refusal.value)


def test_each_default_passes_the_check_its_variable_gets() -> None:
    defaults = Settings()
    environment = {
        item.metadata["variable"].name: str(getattr(group, item.name)).lower() if isinstance(getattr(group, item.name), bool)
        else str(getattr(group, item.name))
        for group in (defaults.job, defaults.retry, defaults.sync, defaults.server)
        for item in fields(group)
        if getattr(group, item.name) not in ("", None)
    }
    assert Settings.from_env(environment) == defaults


CONFIGURATION_PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def documented_row(variable: str) -> str:
    """The row of docs/configuration.md that documents ``variable``, as a reader finds it."""
    (row,) = [line for line in CONFIGURATION_PAGE.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{variable}`")]
    return row


WHOLE_NUMBERS = [variable for _, variable, _ in documented() if isinstance(variable.parse, WholeNumber)]


@pytest.mark.parametrize("variable", WHOLE_NUMBERS, ids=lambda variable: variable.name)
def test_every_whole_number_range_the_page_shows_is_the_one_enforced(variable: Variable) -> None:
    """The page's ``(low to high)``, read as a reader reads it, is exactly what the variable accepts."""
    found = re.search(r"\((\d+) to (\d+)\) \|$", documented_row(variable.name))
    assert found, f"docs/configuration.md shows no range for {variable.name}"
    low, high = int(found.group(1)), int(found.group(2))
    assert [variable.parse(variable.name, str(value)) for value in (low, high)] == [low, high]
    for outside in (low - 1, high + 1):
        with pytest.raises(ConfigError, match=rf"^{variable.name}={outside} is outside {low} to {high}$"):
            variable.parse(variable.name, str(outside))


def test_the_ranges_that_are_not_whole_number_variables_are_on_the_page_too() -> None:
    """The port of an address and the quantities' floor."""
    assert f"a port of 0 to {MAX_PORT}" in documented_row("HOOK_BIND")
    assert parse_bind("--bind", f"127.0.0.1:{MAX_PORT}")
    with pytest.raises(ConfigError, match=f"a port of 0 to {MAX_PORT}"):
        parse_bind("--bind", f"127.0.0.1:{MAX_PORT + 1}")
    for quantity in ("JOB_CPU_REQUEST", "JOB_CPU_LIMIT", "JOB_MEMORY_REQUEST", "JOB_MEMORY_LIMIT"):
        assert "a Kubernetes quantity above zero" in documented_row(quantity)
        with pytest.raises(ConfigError, match=f"{quantity}='0' must be above zero"):
            Settings.from_env({quantity: "0"})


@pytest.mark.parametrize("variable", ["JOB_RUN_AS_USER", "JOB_RUN_AS_GROUP"])
def test_root_is_refused_by_the_range_alone(variable: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{variable}=0 is outside 1 to {2**31 - 1}$"):
        Settings.from_env({variable: "0"})
