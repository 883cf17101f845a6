"""The hook's configuration, read once from the environment when the server starts.

The core never reads the environment: it receives a ``Settings`` value, so a test builds
the exact configuration it needs and a bad value stops the server before it answers
anything (a half-configured hook would build Jobs that can never run).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, fields
from typing import Callable, Mapping

from hooks import image_reference
from hooks.image_reference import ImageReferenceError, parse_image_reference
from hooks.quantity import QuantityError, parse_quantity

# What ome-agent's configuration loader (Viper) can read.
_AGENT_CONFIG_EXTENSIONS = (
    ".yaml", ".yml", ".json", ".toml", ".hcl", ".tfvars", ".ini", ".env", ".dotenv", ".properties", ".props", ".prop",
)
# The Job's scratch volume: an emptyDir, empty whenever the agent starts.
_JOB_TMP = "/tmp"


class ConfigError(ValueError):
    """A configuration value is unusable; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    """Everything an operator may tune, with the defaults documented in the README."""

    agent_image: str = "ghcr.io/moirai-internal/ome-agent:v0.1.5"
    agent_config: str = "/ome-agent.yaml"
    mount_path: str = "/mnt/models"
    run_as_user: int = 1000
    run_as_group: int = 1000
    active_deadline_seconds: int = 300
    ttl_seconds_after_finished: int = 3600
    backoff_limit: int = 2
    cpu_request: str = "100m"
    cpu_limit: str = "500m"
    memory_request: str = "256Mi"
    memory_limit: str = "512Mi"
    retry_base_delay_seconds: int = 10
    retry_max_delay_seconds: int = 600
    max_attempts: int = 5
    read_job_pods: bool = True
    finalize_resync_seconds: int = 30
    max_request_bytes: int = 32 * 1024 * 1024
    auth_token: str = ""
    basic_auth_username: str = ""
    basic_auth_password: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Settings":
        """Build settings from ``environ``; raise ConfigError naming the first bad variable."""
        values: dict[str, object] = {}
        for field in fields(cls):
            variable = ENV_VARIABLES[field.name]
            secret = _read_secret(environ, variable) if field.name in _SECRETS else None
            raw = secret if secret is not None else environ.get(variable)
            if raw is None or raw == "":
                continue
            values[field.name] = _PARSERS.get(field.name, _text)(variable, raw)
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    def check(self) -> None:
        """Reject combinations no single variable shows wrong."""
        if self.run_as_user == 0 or self.run_as_group == 0:
            raise ConfigError(
                f"{ENV_VARIABLES['run_as_user']}/{ENV_VARIABLES['run_as_group']}: the Job must not "
                "run as root (Pod Security 'restricted'); use a non-zero id"
            )
        if self.retry_max_delay_seconds < self.retry_base_delay_seconds:
            raise ConfigError(
                f"{ENV_VARIABLES['retry_max_delay_seconds']} ({self.retry_max_delay_seconds}) is "
                f"below {ENV_VARIABLES['retry_base_delay_seconds']} ({self.retry_base_delay_seconds})"
            )
        if bool(self.basic_auth_username) != bool(self.basic_auth_password):
            raise ConfigError(
                f"{ENV_VARIABLES['basic_auth_username']} and {ENV_VARIABLES['basic_auth_password']} "
                "must be set together"
            )
        if self.auth_token and self.basic_auth_username:
            raise ConfigError(
                f"{ENV_VARIABLES['auth_token']} and {ENV_VARIABLES['basic_auth_username']} are "
                "exclusive, as in Metacontroller's webhook settings"
            )
        for request, limit in (("cpu_request", "cpu_limit"), ("memory_request", "memory_limit")):
            if parse_quantity(getattr(self, request)) > parse_quantity(getattr(self, limit)):
                raise ConfigError(
                    f"{ENV_VARIABLES[request]} ({getattr(self, request)}) is above "
                    f"{ENV_VARIABLES[limit]} ({getattr(self, limit)}); the API server would refuse every Job"
                )
        if self.mount_path == "/" or _within(self.mount_path, _JOB_TMP):
            raise ConfigError(
                f"{ENV_VARIABLES['mount_path']}={self.mount_path} clashes with the Job's root or its /tmp volume"
            )
        if not self.agent_config.endswith(_AGENT_CONFIG_EXTENSIONS):
            raise ConfigError(
                f"{ENV_VARIABLES['agent_config']}={self.agent_config}: ome-agent reads a configuration "
                f"file by its extension, one of {', '.join(_AGENT_CONFIG_EXTENSIONS)}"
            )
        if _within(self.agent_config, _JOB_TMP):
            raise ConfigError(
                f"{ENV_VARIABLES['agent_config']}={self.agent_config} is under /tmp, the Job's scratch "
                "volume, which is empty when ome-agent starts: the file can never be there"
            )
        if _within(self.agent_config, self.mount_path):
            raise ConfigError(
                f"{ENV_VARIABLES['agent_config']}={self.agent_config} is under "
                f"{ENV_VARIABLES['mount_path']}={self.mount_path}, where each model's PVC is mounted: "
                "ome-agent would read its configuration from the model's files"
            )


ENV_VARIABLES: dict[str, str] = {
    "agent_image": "OME_AGENT_IMAGE",
    "agent_config": "OME_AGENT_CONFIG",
    "mount_path": "MODEL_MOUNT_PATH",
    "run_as_user": "JOB_RUN_AS_USER",
    "run_as_group": "JOB_RUN_AS_GROUP",
    "active_deadline_seconds": "JOB_ACTIVE_DEADLINE_SECONDS",
    "ttl_seconds_after_finished": "JOB_TTL_SECONDS_AFTER_FINISHED",
    "backoff_limit": "JOB_BACKOFF_LIMIT",
    "cpu_request": "JOB_CPU_REQUEST",
    "cpu_limit": "JOB_CPU_LIMIT",
    "memory_request": "JOB_MEMORY_REQUEST",
    "memory_limit": "JOB_MEMORY_LIMIT",
    "retry_base_delay_seconds": "RETRY_BASE_DELAY_SECONDS",
    "retry_max_delay_seconds": "RETRY_MAX_DELAY_SECONDS",
    "max_attempts": "RETRY_MAX_ATTEMPTS",
    "read_job_pods": "READ_JOB_PODS",
    "finalize_resync_seconds": "FINALIZE_RESYNC_SECONDS",
    "max_request_bytes": "HOOK_MAX_REQUEST_BYTES",
    "auth_token": "HOOK_AUTH_TOKEN",
    "basic_auth_username": "HOOK_BASIC_AUTH_USERNAME",
    "basic_auth_password": "HOOK_BASIC_AUTH_PASSWORD",
}

_SECRETS = {"auth_token", "basic_auth_username", "basic_auth_password"}


def _read_secret(environ: Mapping[str, str], variable: str) -> str | None:
    """Secrets may come from a mounted file (``<VAR>_FILE``) so they stay out of the pod spec."""
    path = environ.get(f"{variable}_FILE")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as error:
        raise ConfigError(f"{variable}_FILE: cannot read {path}: {error.strerror}") from None


def _text(variable: str, raw: str) -> str:
    return raw.strip()


def _integer(low: int, high: int) -> Callable[[str, str], int]:
    def parse(variable: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{variable}={raw!r} is not a whole number") from None
        if not low <= value <= high:
            raise ConfigError(f"{variable}={value} is outside {low}..{high}")
        return value

    return parse


def _boolean(variable: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{variable}={raw!r} is not true or false")
    return value == "true"


def _within(path: str, directory: str) -> bool:
    """Whether the normalized ``path`` is ``directory`` or lies under it."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _image(variable: str, raw: str) -> str:
    """As the kubelet reads a container's image: one it refuses fails every Job with InvalidImageName."""
    value = raw.strip()
    try:
        parse_image_reference(value)
    except ImageReferenceError as error:
        raise ConfigError(
            f"{variable}={raw!r} is not an image reference: {error}; "
            f"expected {image_reference.EXPECTED_FORM}, such as {Settings.agent_image}"
        ) from None
    return value


def _positive_quantity(variable: str, raw: str) -> str:
    """As the API server reads a Job's resources, and above zero: no cpu or memory at all
    is no limit an operator means, and a negative one is refused."""
    value = raw.strip()
    try:
        amount = parse_quantity(value)
    except QuantityError as error:
        raise ConfigError(f"{variable}={raw!r} is not a Kubernetes quantity: {error}") from None
    if amount <= 0:
        raise ConfigError(f"{variable}={raw!r} must be above zero, such as 500m or 512Mi")
    return value


def _header_token(variable: str, raw: str) -> str:
    """The bearer token arrives in an HTTP header, which carries printable ASCII only as
    sent: a token with any other character could never match. The message leaves the
    token out, as every log does."""
    value = raw.strip()
    if not (value.isascii() and value.isprintable()):
        raise ConfigError(f"{variable} holds a character other than printable ASCII, which no Authorization header can match")
    return value


def _basic_auth_username(variable: str, raw: str) -> str:
    """A Basic credential is ``user:password``: the first ':' ends the user name (RFC 7617),
    so a name holding one could never match."""
    value = raw.strip()
    if ":" in value:
        raise ConfigError(f"{variable} holds a ':', which would end the user name in a Basic credential (RFC 7617)")
    return value


def _absolute_path(variable: str, raw: str) -> str:
    """Normalized, so that checks on the path (not under /tmp) cannot be sidestepped."""
    value = raw.strip()
    if not value.startswith("/") or ":" in value or ".." in value.split("/"):
        raise ConfigError(f"{variable}={raw!r} must be an absolute path without ':' or '..'")
    return "/" + posixpath.normpath(value).lstrip("/")


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "agent_image": _image,
    "agent_config": _absolute_path,
    "mount_path": _absolute_path,
    "run_as_user": _integer(1, 2**31 - 1),
    "run_as_group": _integer(1, 2**31 - 1),
    "active_deadline_seconds": _integer(30, 86400),
    "ttl_seconds_after_finished": _integer(60, 30 * 86400),
    "backoff_limit": _integer(1, 6),
    "cpu_request": _positive_quantity,
    "cpu_limit": _positive_quantity,
    "memory_request": _positive_quantity,
    "memory_limit": _positive_quantity,
    "retry_base_delay_seconds": _integer(10, 3600),
    "retry_max_delay_seconds": _integer(10, 86400),
    "max_attempts": _integer(1, 100),
    "read_job_pods": _boolean,
    "finalize_resync_seconds": _integer(1, 3600),
    "max_request_bytes": _integer(1024, 1024**3),
    "auth_token": _header_token,
    "basic_auth_username": _basic_auth_username,
}
