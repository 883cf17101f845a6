"""The hook's configuration, read once from the environment when a command starts.

Settings come in groups, one per concern: the metadata Job, its retries, what the hook
asks of Metacontroller, and the HTTP server with its authentication. Each field carries
its environment variable, the parser that reads it and what it means (``setting``), so
the configuration reference (``docs/configuration.md``) is printed from here.

The core never reads the environment: it receives a ``Settings`` value, so a test builds
the exact configuration it needs and a bad value stops the command before it answers
anything (a half-configured hook would build Jobs that can never run).
"""

from __future__ import annotations

import multiprocessing
import posixpath
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterator, Mapping

from hooks import image_reference
from hooks.image_reference import ImageReferenceError, parse_image_reference
from hooks.quantity import QuantityError, parse_quantity

# What ome-agent's configuration loader (Viper) can read.
AGENT_CONFIG_EXTENSIONS = (
    ".yaml", ".yml", ".json", ".toml", ".hcl", ".tfvars", ".ini", ".env", ".dotenv", ".properties", ".props", ".prop",
)
# The Job's scratch volume: an emptyDir, empty whenever the agent starts.
JOB_TMP = "/tmp"
DEFAULT_AGENT_IMAGE = "ghcr.io/moirai-internal/ome-agent:v0.1.5"

Parser = Callable[[str, str], Any]


class ConfigError(ValueError):
    """A configuration value is unusable; the message names the variable."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, how it is read, what it means; whether it may
    come from a file instead (``<NAME>_FILE``, for secrets), and how its default reads
    where the default is worked out at start."""

    name: str
    parse: Parser
    doc: str
    secret: bool = False
    shown_default: str | None = None

    @property
    def description(self) -> str:
        """What the variable means, with the range its parser enforces where it has one, so
        that a limit is written in one place, the parser, and the docs cannot drift from it."""
        if isinstance(self.parse, WholeNumber):
            return f"{self.doc} ({self.parse.range})"
        return self.doc


def setting(default: Any, variable: Variable) -> Any:
    """A settings field read from ``variable``."""
    return field(default=default, metadata={"variable": variable})


def variable_of(group: type, name: str) -> str:
    """The environment variable of a group's field, for messages."""
    return next(item.metadata["variable"].name for item in fields(group) if item.name == name)


# --- parsers: each reads one variable as strictly as the thing that consumes it -----------

def _text(variable: str, raw: str) -> str:
    return raw.strip()


@dataclass(frozen=True)
class WholeNumber:
    """Reads a whole number within ``low`` to ``high``; the range it enforces is the one
    docs/configuration.md and ``--help`` show (``range``)."""

    low: int
    high: int

    @property
    def range(self) -> str:
        return f"{self.low} to {self.high}"

    def __call__(self, variable: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{variable}={raw!r} is not a whole number") from None
        if not self.low <= value <= self.high:
            raise ConfigError(f"{variable}={value} is outside {self.range}")
        return value


def _boolean(variable: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{variable}={raw!r} is not true or false")
    return value == "true"


def _image(variable: str, raw: str) -> str:
    """As the kubelet reads a container's image: one it refuses fails every Job with InvalidImageName."""
    value = raw.strip()
    try:
        parse_image_reference(value)
    except ImageReferenceError as error:
        raise ConfigError(
            f"{variable}={raw!r} is not an image reference: {error}; "
            f"expected {image_reference.EXPECTED_FORM}, such as {DEFAULT_AGENT_IMAGE}"
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


def _absolute_path(variable: str, raw: str) -> str:
    """Normalized, so that checks on the path (not under /tmp) cannot be sidestepped."""
    value = raw.strip()
    if not value.startswith("/") or ":" in value or ".." in value.split("/"):
        raise ConfigError(f"{variable}={raw!r} must be an absolute path without ':' or '..'")
    return "/" + posixpath.normpath(value).lstrip("/")


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


MAX_PORT = 65535


def parse_bind(source: str, raw: str) -> str:
    """``host:port`` as gunicorn reads it (an IPv6 host in brackets)."""
    bind = raw.strip()
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or int(port) > MAX_PORT:
        raise ConfigError(f"{source}={raw!r} must be host:port with a port of 0 to {MAX_PORT}, such as 127.0.0.1:8080")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ConfigError(f"{source}={raw!r}: gunicorn reads an IPv6 address only in brackets, such as [::1]:8080")
    return bind


parse_workers = WholeNumber(1, 64)


def default_workers() -> int:
    """Sync workers: the hook is CPU-bound and quick, so about two per core, at most nine."""
    return min(2 * multiprocessing.cpu_count() + 1, 9)


def _within(path: str, directory: str) -> bool:
    """Whether the normalized ``path`` is ``directory`` or lies under it."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# --- the groups ------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobSettings:
    """The metadata Job: what it runs, as whom, for how long and with what. The Jobs the
    hook builds depend on this group alone, and are remembered by it."""

    agent_image: str = setting(
        DEFAULT_AGENT_IMAGE,
        Variable(
            "OME_AGENT_IMAGE",
            _image,
            "the agent image, read as the kubelet reads it (its entrypoint is the agent binary; `model-metadata` needs v0.1.3 or newer)",
        ),
    )
    agent_config: str = setting(
        "/ome-agent.yaml",
        Variable(
            "OME_AGENT_CONFIG",
            _absolute_path,
            "`--config` for the agent: the image ships this file; an extension the agent's loader reads, such as "
            "`.yaml` or `.json`; not under `/tmp` nor the mount path",
        ),
    )
    mount_path: str = setting(
        "/mnt/models",
        Variable(
            "MODEL_MOUNT_PATH",
            _absolute_path,
            "where the Job mounts the model's directory (not `/` nor under `/tmp`)",
        ),
    )
    run_as_user: int = setting(
        1000,
        Variable(
            "JOB_RUN_AS_USER",
            WholeNumber(1, 2**31 - 1),
            "the Job's numeric uid, never root's 0 (Pod Security \"restricted\"); it must be able to read the model's files",
        ),
    )
    run_as_group: int = setting(
        1000,
        Variable(
            "JOB_RUN_AS_GROUP",
            WholeNumber(1, 2**31 - 1),
            "the Job's numeric gid, never root's 0",
        ),
    )
    active_deadline_seconds: int = setting(
        300,
        Variable(
            "JOB_ACTIVE_DEADLINE_SECONDS",
            WholeNumber(30, 86400),
            "the Job's deadline, seconds",
        ),
    )
    ttl_seconds_after_finished: int = setting(
        3600,
        Variable(
            "JOB_TTL_SECONDS_AFTER_FINISHED",
            WholeNumber(60, 30 * 86400),
            "how long a finished Job (and its pod's log) is kept, seconds",
        ),
    )
    backoff_limit: int = setting(
        2,
        Variable(
            "JOB_BACKOFF_LIMIT",
            WholeNumber(1, 6),
            "pod retries inside one Job, at least one because the agent's single update can meet a conflict",
        ),
    )
    cpu_request: str = setting(
        "100m",
        Variable(
            "JOB_CPU_REQUEST",
            _positive_quantity,
            "the Job's cpu request: a Kubernetes quantity above zero, at most the limit",
        ),
    )
    cpu_limit: str = setting(
        "500m",
        Variable(
            "JOB_CPU_LIMIT",
            _positive_quantity,
            "the Job's cpu limit: a Kubernetes quantity above zero",
        ),
    )
    memory_request: str = setting(
        "256Mi",
        Variable(
            "JOB_MEMORY_REQUEST",
            _positive_quantity,
            "the Job's memory request: a Kubernetes quantity above zero, at most the limit",
        ),
    )
    memory_limit: str = setting(
        "512Mi",
        Variable(
            "JOB_MEMORY_LIMIT",
            _positive_quantity,
            "the Job's memory limit: a Kubernetes quantity above zero",
        ),
    )

    def check(self) -> None:
        """Reject combinations no single variable shows wrong."""
        for request, limit in (("cpu_request", "cpu_limit"), ("memory_request", "memory_limit")):
            if parse_quantity(getattr(self, request)) > parse_quantity(getattr(self, limit)):
                raise ConfigError(
                    f"{variable_of(JobSettings, request)} ({getattr(self, request)}) is above "
                    f"{variable_of(JobSettings, limit)} ({getattr(self, limit)}); the API server would refuse every Job"
                )
        self._check_paths()

    def _check_paths(self) -> None:
        mount, config = variable_of(JobSettings, "mount_path"), variable_of(JobSettings, "agent_config")
        if self.mount_path == "/" or _within(self.mount_path, JOB_TMP):
            raise ConfigError(f"{mount}={self.mount_path} clashes with the Job's root or its /tmp volume")
        if not self.agent_config.endswith(AGENT_CONFIG_EXTENSIONS):
            raise ConfigError(
                f"{config}={self.agent_config}: ome-agent reads a configuration "
                f"file by its extension, one of {', '.join(AGENT_CONFIG_EXTENSIONS)}"
            )
        if _within(self.agent_config, JOB_TMP):
            raise ConfigError(
                f"{config}={self.agent_config} is under /tmp, the Job's scratch "
                "volume, which is empty when ome-agent starts: the file can never be there"
            )
        if _within(self.agent_config, self.mount_path):
            raise ConfigError(
                f"{config}={self.agent_config} is under {mount}={self.mount_path}, where each model's PVC is mounted: "
                "ome-agent would read its configuration from the model's files"
            )


@dataclass(frozen=True)
class RetrySettings:
    """A failed extraction is retried with a new Job after a delay that doubles, up to a
    number of attempts."""

    base_delay_seconds: int = setting(
        10,
        Variable(
            "RETRY_BASE_DELAY_SECONDS",
            WholeNumber(10, 3600),
            "delay after the first failed attempt, seconds, doubling after each",
        ),
    )
    max_delay_seconds: int = setting(
        600,
        Variable(
            "RETRY_MAX_DELAY_SECONDS",
            WholeNumber(10, 86400),
            "the longest delay, seconds, not below `RETRY_BASE_DELAY_SECONDS`",
        ),
    )
    max_attempts: int = setting(
        5,
        Variable(
            "RETRY_MAX_ATTEMPTS",
            WholeNumber(1, 100),
            "attempts before giving up; a new storage URI starts over",
        ),
    )

    def check(self) -> None:
        if self.max_delay_seconds < self.base_delay_seconds:
            raise ConfigError(
                f"{variable_of(RetrySettings, 'max_delay_seconds')} ({self.max_delay_seconds}) is "
                f"below {variable_of(RetrySettings, 'base_delay_seconds')} ({self.base_delay_seconds})"
            )


@dataclass(frozen=True)
class SyncSettings:
    """What the hook asks of Metacontroller beside the children: the related objects it
    reads, when to come back to a deletion that waits, and to a label not yet written."""

    read_job_pods: bool = setting(
        False,
        Variable(
            "READ_JOB_PODS",
            _boolean,
            "ask Metacontroller for the metadata Jobs' pods, so a failure quotes the agent's last error and a stuck "
            "pod says why; Metacontroller then caches every pod of the cluster, about 1 GiB per 10,000 pods "
            "([costs](operations.md#what-it-costs-the-cluster)); without them a failure says where its log is",
        ),
    )
    finalize_resync_seconds: int = setting(
        30,
        Variable(
            "FINALIZE_RESYNC_SECONDS",
            WholeNumber(1, 3600),
            "how soon a deletion that waits for children is looked at again, seconds",
        ),
    )
    label_resync_seconds: int = setting(
        10,
        Variable(
            "LABEL_RESYNC_SECONDS",
            WholeNumber(1, 300),
            "how soon the label keeper looks again at a model whose label or annotations it asked to change, seconds: "
            "Metacontroller drops the write when another writer updated the model first, and nothing else would call "
            "the keeper again",
        ),
    )


@dataclass(frozen=True)
class ServerSettings:
    """The HTTP server (`serve`) and who may call it."""

    bind: str = setting(
        "127.0.0.1:8080",
        Variable(
            "HOOK_BIND",
            parse_bind,
            f"the address `serve` listens on, `host:port` with a port of 0 to {MAX_PORT} (`[::1]:8080` for IPv6); "
            "`--bind` overrides; the image uses `0.0.0.0:8080`",
        ),
    )
    workers: int | None = setting(
        None,
        Variable(
            "HOOK_WORKERS",
            parse_workers,
            "gunicorn worker processes; `--workers` overrides",
            shown_default="two per CPU plus one, at most 9",
        ),
    )
    max_request_bytes: int = setting(
        32 * 1024 * 1024,
        Variable(
            "HOOK_MAX_REQUEST_BYTES",
            WholeNumber(1024, 1024**3),
            "request size limit, bytes: a larger body, chunked too, gets a 413",
        ),
    )
    auth_token: str = setting(
        "",
        Variable(
            "HOOK_AUTH_TOKEN",
            _header_token,
            "require `Authorization: Bearer <token>` (Metacontroller's `webhook.authorization`); printable ASCII",
            secret=True,
        ),
    )
    basic_auth_username: str = setting(
        "",
        Variable(
            "HOOK_BASIC_AUTH_USERNAME",
            _basic_auth_username,
            "require Basic authentication with this user (no `:`) instead (Metacontroller's `webhook.basicAuth`)",
            secret=True,
        ),
    )
    basic_auth_password: str = setting(
        "",
        Variable(
            "HOOK_BASIC_AUTH_PASSWORD",
            _text,
            "the Basic authentication password",
            secret=True,
        ),
    )
    tls_cert_file: str = setting(
        "",
        Variable(
            "HOOK_TLS_CERT_FILE",
            _text,
            "serve HTTPS with this certificate (PEM); with `HOOK_TLS_KEY_FILE`",
        ),
    )
    tls_key_file: str = setting(
        "",
        Variable(
            "HOOK_TLS_KEY_FILE",
            _text,
            "the certificate's key (PEM)",
        ),
    )
    tls_client_ca_file: str = setting(
        "",
        Variable(
            "HOOK_TLS_CLIENT_CA_FILE",
            _text,
            "with the two above: require a client certificate signed by this CA (PEM), as Metacontroller's `webhook.clientTLS` presents",
        ),
    )
    metrics_directory: str = setting(
        "",
        Variable(
            "PROMETHEUS_MULTIPROC_DIR",
            _text,
            "where the workers share their metrics: a new or empty directory, or one an earlier `serve` "
            "used (it holds a `.basemodel-hook-metrics` mark; its stale `*.db` files are removed at start, "
            "nothing else); a non-empty directory without the mark is refused",
            shown_default="a new temporary directory, removed when `serve` stops",
        ),
    )

    def check(self) -> None:
        """Reject combinations no single variable shows wrong."""
        name = {item.name: variable_of(ServerSettings, item.name) for item in fields(ServerSettings)}
        if bool(self.basic_auth_username) != bool(self.basic_auth_password):
            raise ConfigError(f"{name['basic_auth_username']} and {name['basic_auth_password']} must be set together")
        if self.auth_token and self.basic_auth_username:
            raise ConfigError(
                f"{name['auth_token']} and {name['basic_auth_username']} are exclusive, as in Metacontroller's webhook settings"
            )
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError(f"{name['tls_cert_file']} and {name['tls_key_file']} must be set together")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ConfigError(
                f"{name['tls_client_ca_file']} needs {name['tls_cert_file']} and {name['tls_key_file']}: "
                "client certificates are asked for only over HTTPS"
            )


GROUPS = (JobSettings, RetrySettings, SyncSettings, ServerSettings)


@dataclass(frozen=True)
class Settings:
    """Everything an operator may tune, by concern."""

    job: JobSettings = field(default_factory=JobSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    server: ServerSettings = field(default_factory=ServerSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from ``environ``; raise ConfigError naming the first bad variable."""
        groups = {group: _read_group(group, environ) for group in GROUPS}
        settings = cls(*groups.values())
        # The groups whose variables combine; SyncSettings' stand alone.
        for group in (settings.job, settings.retry, settings.server):
            group.check()
        return settings


def documented() -> Iterator[tuple[type, Variable, str]]:
    """Every variable, group by group, with its default as a person reads it."""
    for group in GROUPS:
        for item in fields(group):
            variable: Variable = item.metadata["variable"]
            yield group, variable, variable.shown_default or _shown(item.default)


def _shown(default: Any) -> str:
    if default == "":
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


def _read_group(group: type, environ: Mapping[str, str]) -> Any:
    values: dict[str, Any] = {}
    for item in fields(group):
        variable: Variable = item.metadata["variable"]
        secret = _read_secret(environ, variable.name) if variable.secret else None
        raw = secret if secret is not None else environ.get(variable.name)
        if raw:
            values[item.name] = variable.parse(variable.name, raw)
    return group(**values)


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
