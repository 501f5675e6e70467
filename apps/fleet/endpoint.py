"""A cluster's query endpoint: how fleetwatt reaches and authenticates to it (bearer token, basic auth,
extra headers, CA bundle, timeout), checked, and resolved from the worker's environment (pure).

Secrets never sit in the database or the fleet config: a cluster stores the NAME of the environment
variable that holds each one (as `slurmrest_token_env` does), and a header's value may name one as
`${NAME}`. docs/config.md, "Connecting to the endpoint".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The NAME of an environment variable, in capitals: a token pasted where a name belongs is refused
# (tokens are long mixed-case or contain punctuation; the message never repeats the value).
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*\Z")
# A header value taken from the environment: the whole value is `${NAME}`.
HEADER_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")
# An HTTP header name (RFC 9110 token characters).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# Headers that carry credentials: their value must come from the environment, never written in clear.
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "x-auth-token"})
# Headers the reader sets itself from the other settings.
RESERVED_HEADERS = frozenset({"authorization"})

MAX_TIMEOUT_S = 600.0

# A cluster's keys that say how its Prometheus-compatible endpoint is reached: the names of the Cluster's fields,
# and of the fleet config's keys (docs/config.md). Secrets only by the NAME of an environment variable.
CLUSTER_ENDPOINT_KEYS = (
    "prometheus_bearer_token_env",
    "prometheus_basic_auth_user",
    "prometheus_basic_auth_password_env",
    "prometheus_headers",
    "prometheus_ca_file",
    "prometheus_timeout_s",
)
# A cluster's keys that say where and how its scheduler is read: the names of the Cluster's fields, and of the
# fleet config's keys.
CLUSTER_SCHEDULER_KEYS = (
    "scheduler",
    "kube_pods",
    "sacct_command",
    "slurmrest_url",
    "slurmrest_token_env",
    "slurmrest_user",
)


class EndpointSettingsError(ValueError):
    """The connection settings cannot be used as they are (a variable unset, a header malformed). Its text
    names the cluster; `detail` is the text without it."""

    def __init__(self, cluster: str, detail: str) -> None:
        self.cluster, self.detail = cluster, detail
        super().__init__(f"cluster {cluster}: {detail}")


def env_name_problem(value: str, *, example: str) -> str | None:
    """Why `value` is not the name of an environment variable, without repeating it (it may be a secret)."""
    if ENV_NAME.match(value):
        return None
    return f"the NAME of an environment variable in capitals (e.g. {example}), never the secret itself"


def headers_problems(headers: Any) -> list[str]:
    """What is wrong with extra headers (a mapping of header name to value), one message per header."""
    if not isinstance(headers, Mapping):
        return ["expected a mapping of header name to value, e.g. {X-Scope-OrgID: tenant-a}"]
    problems = []
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.match(name):
            problems.append(f"{name!r} is not an HTTP header name")
        elif name.lower() in RESERVED_HEADERS:
            problems.append(f"{name}: set by prometheus_bearer_token_env or basic auth, not as a header")
        elif not isinstance(value, str) or not value.strip() or "\n" in value or "\r" in value:
            problems.append(f"{name}: expected a one-line string value")
        elif name.lower() in SECRET_HEADERS and not HEADER_ENV_REF.match(value):
            problems.append(f"{name} carries a secret: write its value as ${{NAME}} of an environment variable")
    return problems


@dataclass(frozen=True)
class EndpointSettings:
    """What a cluster stores about its endpoint: names of environment variables, never their values."""

    cluster: str
    url: str
    bearer_token_env: str = ""
    basic_auth_user: str = ""
    basic_auth_password_env: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_file: str = ""
    timeout_s: float | None = None


@dataclass(frozen=True)
class EndpointConnection:
    """The settings resolved: what a reader sends. `repr` hides the secrets (it ends up in logs)."""

    cluster: str
    url: str
    timeout_s: float
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ca_file: str | None = None


def endpoint_resolve(
    settings: EndpointSettings, *, environ: Mapping[str, str], default_timeout_s: float
) -> EndpointConnection:
    """The connection to use now, its secrets read from `environ`. A variable that is named but unset (or
    empty) is an error naming the cluster and the variable: an ingest without its credentials would only
    be refused, or worse, read another tenant."""

    def secret(name: str, what: str) -> str:
        value = environ.get(name, "")
        if not value:
            raise EndpointSettingsError(settings.cluster, f"environment variable {name} ({what}) is not set")
        return value

    problems = headers_problems(settings.headers)
    if problems:
        raise EndpointSettingsError(settings.cluster, f"prometheus_headers: {'; '.join(problems)}")
    headers: dict[str, str] = {}
    for name, value in settings.headers.items():
        ref = HEADER_ENV_REF.match(value)
        headers[name] = secret(ref.group(1), f"header {name}") if ref else value
    if settings.bearer_token_env:
        token = secret(settings.bearer_token_env, "prometheus_bearer_token_env")
        headers["Authorization"] = f"Bearer {token}"
    basic_auth = None
    if settings.basic_auth_user:
        if settings.bearer_token_env:
            raise EndpointSettingsError(settings.cluster, "give a bearer token or basic auth, not both")
        password = (
            secret(settings.basic_auth_password_env, "prometheus_basic_auth_password_env")
            if settings.basic_auth_password_env
            else ""
        )
        basic_auth = (settings.basic_auth_user, password)
    elif settings.basic_auth_password_env:
        raise EndpointSettingsError(
            settings.cluster, "prometheus_basic_auth_password_env without prometheus_basic_auth_user"
        )
    timeout_s = settings.timeout_s if settings.timeout_s is not None else default_timeout_s
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise EndpointSettingsError(
            settings.cluster, f"prometheus_timeout_s must be over 0 and at most {MAX_TIMEOUT_S:g}"
        )
    return EndpointConnection(
        cluster=settings.cluster,
        url=settings.url,
        timeout_s=timeout_s,
        headers=headers,
        basic_auth=basic_auth,
        ca_file=settings.ca_file or None,
    )


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def label_name_problem(name: str) -> str | None:
    """Why `name` cannot be a Prometheus label name (a cluster's dcgm_host_label), or None when it can."""
    if _LABEL_NAME.match(name) and not name.startswith("__"):
        return None
    return f"{name!r} is not a label name (letters, digits and _, e.g. Hostname, hostname, node, instance)"
