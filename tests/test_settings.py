"""Configuration comes from the environment and a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from hooks.settings import ENV_VARIABLES, ConfigError, Settings


def test_defaults_match_the_contract() -> None:
    settings = Settings.from_env({})
    assert settings.agent_image == "ghcr.io/moirai-internal/ome-agent:v0.1.5"
    assert settings.agent_config == "/ome-agent.yaml"
    assert settings.active_deadline_seconds == 300
    assert settings.ttl_seconds_after_finished > 0
    assert 1 <= settings.backoff_limit <= 6
    assert settings.retry_base_delay_seconds >= 10
    assert settings.retry_max_delay_seconds <= 3600
    assert settings.max_attempts <= 10
    assert settings.run_as_user != 0 and settings.run_as_group != 0


def test_every_setting_has_a_documented_variable() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    for variable in ENV_VARIABLES.values():
        assert f"`{variable}`" in readme, variable


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
    assert settings.agent_image == "registry.example.com/ome/ome-agent:v0.1.4"
    assert settings.run_as_user == 65532
    assert settings.memory_limit == "1Gi"
    assert settings.max_attempts == 3
    assert settings.mount_path == "/models"


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
    assert Settings.from_env({"HOOK_AUTH_TOKEN_FILE": str(token)}).auth_token == "s3cr3t"


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
    assert (settings.cpu_request, settings.cpu_limit) == ("700m", "0.7")


@pytest.mark.parametrize("path", ["//tmp", "/./tmp/models", "/tmp/../tmp"])
def test_mount_path_is_normalized_before_it_is_judged(path: str) -> None:
    with pytest.raises(ConfigError, match="MODEL_MOUNT_PATH"):
        Settings.from_env({"MODEL_MOUNT_PATH": path})


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("false", False), (" False ", False), ("TRUE", True)])
def test_read_job_pods_reads_true_or_false(raw: str, value: bool) -> None:
    assert Settings.from_env({"READ_JOB_PODS": raw}).read_job_pods is value


def test_read_job_pods_refuses_anything_but_true_or_false() -> None:
    with pytest.raises(ConfigError, match="READ_JOB_PODS='yes' is not true or false"):
        Settings.from_env({"READ_JOB_PODS": "yes"})
