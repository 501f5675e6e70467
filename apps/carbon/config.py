"""The fleet config file (docs/config.md): parse and validate a whole YAML document into typed dataclasses.

Pure: no database. Every problem is collected with its path (`sites[0].pue_by_month.13: not a month`),
so one run lists them all, and nothing is returned unless there are none. References to objects that
are not in the file are checked against the names the caller read from the database (`KnownNames`).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from apps.carbon.intensity import BASES
from apps.carbon.node_types import NodeMatch, server_type_for_hostname
from apps.fleet.endpoint import (
    CLUSTER_ENDPOINT_KEYS,
    CLUSTER_SCHEDULER_KEYS,
    MAX_TIMEOUT_S,
    env_name_problem,
    headers_problems,
    label_name_problem,
)
from apps.fleet.work_counters import WorkCounters, work_counters_parse
from apps.sso.mapping import FLEET_ROLES, ROLES, TEAM_ROLES, GroupRule, SsoMappingConfig
from apps.telemetry.shards import RESERVED as RESERVED_SHARDS
from apps.telemetry.shards import node_pattern_problem

HOURS_PER_YEAR = 8760
FORMAT_VERSION = 1

# The choices of apps.fleet.models and apps.carbon.models, repeated here so the module stays pure
# (a test checks they agree).
RULE_KINDS = ("slurm_account", "slurm_user", "k8s_namespace", "user", "k8s_pod_label")
MATCH_KINDS = ("account", "name_prefix", "namespace", "user", "group_key")
SCHEDULERS = ("", "slurm_sacct", "slurm_rest", "kube_state_metrics")  # "": its scheduler is not read
# `prometheus_timeout_s: null` in a file: the cluster's stored timeout is cleared, and its queries wait
# FLEETWATT_PROMETHEUS_TIMEOUT_S again (a timeout itself is over 0, so 0 cannot be one).
TIMEOUT_FROM_SETTINGS = 0.0

_SLUG = re.compile(r"^[-a-zA-Z0-9_]+\Z")
_POD_LABEL_RULE = re.compile(r"^\s*[^=\s][^=]*=\s*\S.*\Z")  # name=value, both given (apps.fleet.selectors)
_CURRENCY = re.compile(r"^[A-Z]{3}\Z")
_SECTIONS = ("sites", "server_types", "gpu_models", "clusters", "teams", "job_groups")


class ConfigError(ValueError):
    """The config is wrong; `problems` lists every problem as `path: what is wrong`."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        n = len(self.problems)
        head = f"{n} problem{'s' if n != 1 else ''} in the fleet config:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


@dataclass(frozen=True)
class SiteConfig:
    name: str
    grid_zone: str
    intensity_basis: str
    pue: float
    pue_by_month: Mapping[int, float]
    provider_includes_overhead: bool
    electricity_price_per_kwh: Decimal
    currency: str
    timezone: str


@dataclass(frozen=True)
class ServerTypeConfig:
    name: str
    node_overhead_factor: float | None  # None: not measured (1.0 is used)
    embodied_kg_per_server: float
    service_life_h: float
    gpus_per_server: int


@dataclass(frozen=True)
class GpuModelConfig:
    name: str
    hourly_rate: Decimal
    currency: str
    tdp_w: float


@dataclass(frozen=True)
class ShardConfig:
    """A node group of a big cluster: nodes whose name matches `nodes` (a fully anchored regex, as PromQL's
    `=~`) are fetched together (apps.telemetry.shards)."""

    name: str
    nodes: str


@dataclass(frozen=True)
class ClusterConfig:
    """A cluster; None means "leave the stored value as it is" (new clusters get the settings' defaults)."""

    name: str
    prometheus_url: str | None = None
    selector: str | None = None
    scrape_interval_s: int | None = None
    dcgm_host_label: str | None = None  # "" reads Hostname or hostname (apps.telemetry.hour.dcgm_host)
    site: str | None = None
    nodes: tuple[NodeMatch, ...] | None = None  # None: the cluster's stored hostname rules are left alone
    scheduler: str | None = None  # one of SCHEDULERS (docs/schedulers.md)
    kube_pods: bool | None = None  # also read kube-state-metrics' pods beside Slurm
    sacct_command: str | None = None
    slurmrest_url: str | None = None
    slurmrest_token_env: str | None = None  # the NAME of the environment variable, never the token
    slurmrest_user: str | None = None
    # How its endpoint is reached; the *_env keys hold the NAME of an environment variable, never a secret.
    prometheus_bearer_token_env: str | None = None
    prometheus_basic_auth_user: str | None = None
    prometheus_basic_auth_password_env: str | None = None
    prometheus_headers: Mapping[str, str] | None = None
    prometheus_ca_file: str | None = None
    prometheus_timeout_s: float | None = None
    shards: tuple[ShardConfig, ...] | None = None  # None: the stored shards are left alone; () : none
    # The serving engines' and jobs' work counters (apps.fleet.work_counters), where the key is given: None then
    # means the defaults. Not given: the stored ones are left alone.
    work_counters_given: bool = False
    work_counters: tuple[WorkCounters, ...] | None = None


@dataclass(frozen=True)
class TeamRuleConfig:
    kind: str
    value: str
    cluster: str | None = None
    priority: int = 100


@dataclass(frozen=True)
class TeamConfig:
    name: str
    display_name: str = ""
    rules: tuple[TeamRuleConfig, ...] = ()


@dataclass(frozen=True)
class JobGroupConfig:
    name: str
    match_kind: str
    match_value: str
    flexible: bool = False


@dataclass(frozen=True)
class FleetConfig:
    sites: tuple[SiteConfig, ...] = ()
    server_types: tuple[ServerTypeConfig, ...] = ()
    gpu_models: tuple[GpuModelConfig, ...] = ()
    clusters: tuple[ClusterConfig, ...] = ()
    teams: tuple[TeamConfig, ...] = ()
    job_groups: tuple[JobGroupConfig, ...] = ()
    sso: SsoMappingConfig | None = None  # None: the file has no `sso` section (the stored one stays)


@dataclass(frozen=True)
class KnownNames:
    """What already exists in the database, for references to objects the file does not define."""

    sites: frozenset[str] = frozenset()
    server_types: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    teams: frozenset[str] = frozenset()
    # A new cluster of this name may leave out prometheus_url: FLEETWATT_PROMETHEUS_URL is used.
    default_cluster: str | None = None


# --- YAML ------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: SafeLoader reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


CONFIG_MAX_BYTES = 2 * 1024 * 1024  # a fleet of 100,000 nodes' hostname rules fits in a few hundred KB
CONFIG_MAX_NODES = 200_000  # YAML nodes once anchors are expanded (a few aliases can stand for billions)


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes the document has once every alias is expanded (aliases share node objects)."""
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = 1  # a cycle counts once instead of recursing forever
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    sizes[id(node)] = size
    return size


def config_load(
    text: str, *, known: KnownNames | None = None, max_bytes: int = CONFIG_MAX_BYTES, max_nodes: int = CONFIG_MAX_NODES
) -> FleetConfig:
    """Parse YAML text and validate it as a whole. Raises ConfigError listing every problem; refuses, before
    building it, a text over `max_bytes` or a document that anchors expand past `max_nodes` nodes."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ConfigError([f"(document): {size:,} bytes; a config is at most {max_bytes:,}"])
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and (nodes := _expanded_size(node, {})) > max_nodes:
            raise ConfigError(
                [f"(document): {nodes:,} YAML nodes once its anchors are expanded; at most {max_nodes:,}"]
            )
        document = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(document)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: not valid YAML: {problem}"]) from None
    finally:
        loader.dispose()
    return config_parse(document, known=known)


# --- Validation ------------------------------------------------------------------------------------


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def __len__(self) -> int:
        return len(self.items)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _kind(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


_MISSING = object()


class _Fields:
    """One mapping of the document: typed reads that record problems (and its unknown keys)."""

    def __init__(self, raw: Mapping[Any, Any], path: str, problems: _Problems, allowed: Collection[str]) -> None:
        self.raw, self.path, self.problems = raw, path, problems
        for key in raw:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), list(allowed), n=1)
                suggestion = f"did you mean {hint[0]!r}? " if hint else ""
                problems.add(_join(path, key), f"unknown key ({suggestion}expected: {', '.join(allowed)})")

    def where(self, key: str) -> str:
        return _join(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.raw

    def _get(self, key: str, required: bool) -> Any:
        if key not in self.raw:
            if required:
                self.problems.add(self.where(key), "required")
            return _MISSING
        return self.raw[key]

    def string(
        self, key: str, *, required: bool = True, max_length: int = 255, slug: bool = False, allow_empty: bool = False
    ) -> str | None:
        value = self._get(key, required)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            hint = ""
            if isinstance(value, bool):
                hint = " (YAML reads unquoted yes/no/on/off/NO as booleans: quote it)"
            elif isinstance(value, int | float):
                hint = " (quote it)"
            self.problems.add(self.where(key), f"expected a string, got {_kind(value)}{hint}")
            return None
        if not value.strip() and not allow_empty:
            self.problems.add(self.where(key), "must not be empty")
            return None
        if len(value) > max_length:
            self.problems.add(self.where(key), f"longer than {max_length} characters")
            return None
        if slug and not _SLUG.match(value):
            self.problems.add(self.where(key), f"{value!r} is not a slug (letters, digits, - and _ only)")
            return None
        return value

    def number(
        self,
        key: str,
        *,
        required: bool = True,
        minimum: float | None = None,
        above: float | None = None,
        value: Any = _MISSING,
        where: str | None = None,
    ) -> float | None:
        if value is _MISSING:
            value = self._get(key, required)
            if value is _MISSING:
                return None
        where = where or self.where(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problems.add(where, f"expected a number, got {_kind(value)}")
            return None
        if not math.isfinite(value):
            self.problems.add(where, "must be a finite number")
            return None
        if minimum is not None and value < minimum:
            self.problems.add(where, f"must be at least {minimum:g}, got {value:g}")
            return None
        if above is not None and value <= above:
            self.problems.add(where, f"must be greater than {above:g}, got {value:g}")
            return None
        return float(value)

    def integer(self, key: str, *, required: bool = True, minimum: int = 0, maximum: int = 2**31 - 1) -> int | None:
        value = self._get(key, required)
        if value is _MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.add(self.where(key), f"expected a whole number, got {_kind(value)}")
            return None
        if not minimum <= value <= maximum:
            self.problems.add(self.where(key), f"must be between {minimum} and {maximum}, got {value}")
            return None
        return value

    def money(self, key: str, *, places: int, max_digits: int) -> Decimal | None:
        """A non-negative amount, kept exact as written (0.18 is Decimal('0.18'), not a binary float)."""
        number = self.number(key, minimum=0)
        if number is None:
            return None
        amount = Decimal(str(self.raw[key]))
        exponent = amount.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -places:
            self.problems.add(self.where(key), f"at most {places} decimal places, got {self.raw[key]}")
            return None
        if amount >= Decimal(10) ** (max_digits - places):
            self.problems.add(self.where(key), f"too large (under {10 ** (max_digits - places)})")
            return None
        return amount

    def boolean(self, key: str, *, default: bool) -> bool | None:
        value = self._get(key, required=False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.problems.add(self.where(key), f"expected true or false, got {_kind(value)}")
            return None
        return value

    def choice(self, key: str, choices: Sequence[str], *, default: str | None = None) -> str | None:
        value = self._get(key, required=default is None)
        if value is _MISSING:
            return default
        if value not in choices:
            self.problems.add(self.where(key), f"expected one of {', '.join(choices)}, got {_kind(value)}")
            return None
        return str(value)

    def currency(self, key: str) -> str | None:
        value = self._get(key, required=False)
        if value is _MISSING:
            return "EUR"
        if not isinstance(value, str) or not _CURRENCY.match(value):
            self.problems.add(
                self.where(key), f"expected an ISO 4217 code (three capital letters, e.g. EUR), got {_kind(value)}"
            )
            return None
        return value

    def items(self, key: str) -> list[tuple[str, Any]]:
        """The elements of an optional list, each with its path."""
        value = self._get(key, required=False)
        if value is _MISSING or value is None:
            return []
        if not isinstance(value, list):
            self.problems.add(self.where(key), f"expected a list, got {_kind(value)}")
            return []
        return [(f"{self.where(key)}[{i}]", element) for i, element in enumerate(value)]


def _mapping(element: Any, path: str, problems: _Problems, allowed: Collection[str]) -> _Fields | None:
    if not isinstance(element, dict):
        problems.add(path, f"expected a mapping, got {_kind(element)}")
        return None
    return _Fields(element, path, problems, allowed)


def _section(document: Mapping[str, Any], name: str, problems: _Problems) -> list[tuple[str, Any]]:
    value = document.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(name, f"expected a list, got {_kind(value)}")
        return []
    return [(f"{name}[{i}]", element) for i, element in enumerate(value)]


def _names_in(elements: list[tuple[str, Any]]) -> set[str]:
    return {e["name"] for _, e in elements if isinstance(e, dict) and isinstance(e.get("name"), str)}


def _unique_names(elements: list[tuple[str, Any]], problems: _Problems) -> None:
    first: dict[str, str] = {}
    for path, element in elements:
        name = element.get("name") if isinstance(element, dict) else None
        if isinstance(name, str):
            if name in first:
                problems.add(_join(path, "name"), f"{name!r} is already defined at {first[name]}")
            else:
                first[name] = path


def _reference(
    f: _Fields, key: str, *, what: str, in_file: set[str], known: Collection[str], required: bool
) -> str | None:
    name = f.string(key, required=required, max_length=100)
    if name is not None and name not in in_file and name not in known:
        choices = sorted(in_file | set(known))
        hint = f" (known: {', '.join(choices)})" if choices else f" (no {what} is defined)"
        f.problems.add(f.where(key), f"unknown {what} {name!r}: not in this file nor in the database{hint}")
        return None
    return name


_SITE_KEYS = (
    "name",
    "grid_zone",
    "intensity_basis",
    "pue",
    "pue_by_month",
    "provider_includes_overhead",
    "electricity_price_per_kwh",
    "currency",
    "timezone",
)


def _site(f: _Fields) -> SiteConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    grid_zone = f.string("grid_zone", max_length=50)
    basis = f.choice("intensity_basis", BASES, default="location")
    inclusive = f.boolean("provider_includes_overhead", default=False)
    pue = f.number("pue", required=False, minimum=1.0)
    by_month = _pue_by_month(f)
    if inclusive:
        why = "must be absent or 1.0 when provider_includes_overhead is true: the provider's figures already "
        why += "include facility overhead, and it would be applied twice"
        if pue is not None and pue != 1.0:
            f.problems.add(f.where("pue"), f"{why} (got {pue:g})")
        for month, value in (by_month or {}).items():
            if value != 1.0:
                f.problems.add(_join(f.where("pue_by_month"), month), f"{why} (got {value:g})")
    elif by_month is not None and not f.has("pue"):
        missing = [m for m in range(1, 13) if m not in by_month]
        if missing:
            f.problems.add(
                f.where("pue"),
                f"required: pue_by_month leaves out months {', '.join(map(str, missing))} (pue is used for them)",
            )
    elif not f.has("pue") and not f.has("pue_by_month"):
        f.problems.add(
            f.where("pue"),
            "required: state the PUE with pue, pue_by_month (all 12 months), or provider_includes_overhead: true",
        )
    price = f.money("electricity_price_per_kwh", places=5, max_digits=10)
    currency = f.currency("currency")
    timezone = f.string("timezone", required=False, max_length=64)
    if timezone is not None:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            f.problems.add(f.where("timezone"), f"{timezone!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)")
    if len(f.problems) > before:
        return None
    assert name and grid_zone and basis and inclusive is not None and price is not None and currency
    return SiteConfig(
        name=name,
        grid_zone=grid_zone,
        intensity_basis=basis,
        pue=1.0 if inclusive or pue is None else pue,
        pue_by_month={} if inclusive else dict(sorted((by_month or {}).items())),
        provider_includes_overhead=inclusive,
        electricity_price_per_kwh=price,
        currency=currency,
        timezone=timezone or "UTC",
    )


def _pue_by_month(f: _Fields) -> dict[int, float] | None:
    if not f.has("pue_by_month"):
        return None
    raw = f.raw["pue_by_month"]
    path = f.where("pue_by_month")
    if not isinstance(raw, dict):
        f.problems.add(path, f"expected a mapping of month (1..12) to PUE, got {_kind(raw)}")
        return {}
    months: dict[int, float] = {}
    for key, value in raw.items():
        month: int | None = None
        if isinstance(key, int) and not isinstance(key, bool):
            month = key
        elif isinstance(key, str) and key.strip().isdigit():
            month = int(key)
        if month is None or not 1 <= month <= 12:
            f.problems.add(_join(path, key), "not a month (1..12)")
            continue
        if month in months:
            f.problems.add(_join(path, key), f"month {month} is given twice")
            continue
        pue = f.number("", minimum=1.0, value=value, where=_join(path, key))
        if pue is not None:
            months[month] = pue
    return months


def _server_type(f: _Fields) -> ServerTypeConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    overhead: float | None = None
    if f.has("node_overhead_factor") and f.raw["node_overhead_factor"] is not None:
        overhead = f.number("node_overhead_factor", minimum=1.0)
    embodied = f.number("embodied_kg_per_server", minimum=0.0)
    life_h: float | None = None
    if f.has("service_life_h") and f.has("service_life_years"):
        f.problems.add(f.where("service_life_h"), "give service_life_h or service_life_years, not both")
    elif f.has("service_life_years"):
        years = f.number("service_life_years", above=0.0)
        life_h = years * HOURS_PER_YEAR if years is not None else None
    elif f.has("service_life_h"):
        life_h = f.number("service_life_h", above=0.0)
    else:
        f.problems.add(f.where("service_life_h"), "required (or service_life_years)")
    gpus = f.integer("gpus_per_server", minimum=1, maximum=32767)
    if len(f.problems) > before:
        return None
    assert name and embodied is not None and life_h is not None and gpus is not None
    return ServerTypeConfig(
        name=name,
        node_overhead_factor=overhead,
        embodied_kg_per_server=embodied,
        service_life_h=life_h,
        gpus_per_server=gpus,
    )


def _gpu_model(f: _Fields) -> GpuModelConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100)
    rate = f.money("hourly_rate", places=4, max_digits=10)
    currency = f.currency("currency")
    tdp = f.number("tdp_w", above=0.0)
    if len(f.problems) > before:
        return None
    assert name and rate is not None and currency and tdp is not None
    return GpuModelConfig(name=name, hourly_rate=rate, currency=currency, tdp_w=tdp)


def _url(f: _Fields, key: str) -> str | None:
    url = f.string(key, required=False, max_length=200)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        f.problems.add(f.where(key), f"{url!r} is not an http(s) URL, e.g. http://prometheus:9090")
        return None
    return url


def _cluster(
    f: _Fields, *, known: KnownNames, sites: set[str], server_types: set[str], problems: _Problems
) -> ClusterConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    url = _url(f, "prometheus_url")
    if (
        name is not None
        and not f.has("prometheus_url")
        and name not in known.clusters
        and name != known.default_cluster
    ):
        f.problems.add(f.where("prometheus_url"), f"required: there is no cluster {name!r} yet")
    selector = f.string("selector", required=False, max_length=500, allow_empty=True)
    if selector is not None and selector.strip().startswith("{"):
        f.problems.add(f.where("selector"), 'label matchers without braces, e.g. cluster="a"')
    scrape = f.integer("scrape_interval_s", required=False, minimum=1, maximum=3600)
    host_label = f.string("dcgm_host_label", required=False, max_length=100, allow_empty=True)
    if host_label and (problem := label_name_problem(host_label)):
        f.problems.add(f.where("dcgm_host_label"), problem)
    scheduler = _scheduler(f)
    kube_pods = f.boolean("kube_pods", default=False) if f.has("kube_pods") else None
    sacct_command = f.string("sacct_command", required=False, max_length=500)
    slurmrest_url = _url(f, "slurmrest_url") if f.has("slurmrest_url") else None
    token_env = f.string("slurmrest_token_env", required=False, max_length=100)
    if token_env is not None and not _ENV_NAME.match(token_env):
        f.problems.add(
            f.where("slurmrest_token_env"), "the NAME of an environment variable (e.g. SLURM_JWT), never the token"
        )
    slurmrest_user = f.string("slurmrest_user", required=False, max_length=100, allow_empty=True)
    endpoint = _endpoint(f)
    site = _reference(f, "site", what="site", in_file=sites, known=known.sites, required=False)
    nodes: list[NodeMatch] = []
    first: dict[str, str] = {}
    for path, element in f.items("nodes"):
        node = _mapping(element, path, problems, ("match", "server_type"))
        if node is None:
            continue
        glob = node.string("match", max_length=255)
        kind = _reference(node, "server_type", what="server type", in_file=server_types, known=known.server_types,
                          required=True)  # fmt: skip
        if glob is not None and glob in first:
            problems.add(node.where("match"), f"{glob!r} is already matched at {first[glob]}: this one never applies")
        elif glob is not None:
            first[glob] = path
        if glob is not None and kind is not None:
            nodes.append(NodeMatch(match=glob, server_type=kind))
    shards = _shards(f, problems)
    work, work_problems = work_counters_parse(f.raw.get("work_counters"), f.where("work_counters"))
    f.problems.items.extend(work_problems)
    if len(f.problems) > before:
        return None
    assert name
    return ClusterConfig(
        name=name,
        shards=shards,
        work_counters_given=f.has("work_counters"),
        work_counters=work,
        prometheus_url=url,
        selector=selector,
        scrape_interval_s=scrape,
        dcgm_host_label=host_label,
        site=site,
        nodes=tuple(nodes) if f.raw.get("nodes") is not None else None,
        scheduler=scheduler,
        kube_pods=kube_pods,
        sacct_command=sacct_command,
        slurmrest_url=slurmrest_url,
        slurmrest_token_env=token_env,
        slurmrest_user=slurmrest_user,
        **endpoint,
    )


def _shards(f: _Fields, problems: _Problems) -> tuple[ShardConfig, ...] | None:
    """The cluster's node groups, if the key is given: each a name and a node-name regex."""
    if not f.has("shards"):
        return None
    out: list[ShardConfig] = []
    for path, element in f.items("shards"):
        shard = _mapping(element, path, problems, ("name", "nodes"))
        if shard is None:
            continue
        name = shard.string("name", max_length=50, slug=True)
        pattern = shard.string("nodes", max_length=500)
        if name is not None and name in RESERVED_SHARDS:
            problems.add(shard.where("name"), f"{name!r} is reserved (the nodes no shard names are 'rest')")
        elif name is not None and name in {s.name for s in out}:
            problems.add(shard.where("name"), f"{name!r} is named twice")
        problem = node_pattern_problem(pattern) if pattern is not None else None
        if problem is not None:
            problems.add(shard.where("nodes"), problem)
            pattern = None
        if name is not None and pattern is not None:
            out.append(ShardConfig(name=name, nodes=pattern))
    return tuple(out)


def _endpoint(f: _Fields) -> dict[str, Any]:
    """How the cluster's endpoint is reached; only the keys given (the others stay as stored). Empty
    strings clear a setting."""
    out: dict[str, Any] = {}
    for key, example in (("prometheus_bearer_token_env", "PROM_TOKEN"), ("prometheus_basic_auth_password_env",
                         "PROM_PASSWORD")):  # fmt: skip
        name = f.string(key, required=False, max_length=100, allow_empty=True)
        if name and (problem := env_name_problem(name, example=example)):
            f.problems.add(f.where(key), problem)
        elif name is not None:
            out[key] = name
    user = f.string("prometheus_basic_auth_user", required=False, max_length=100, allow_empty=True)
    if user is not None:
        out["prometheus_basic_auth_user"] = user
    if f.has("prometheus_headers"):
        headers = f.raw["prometheus_headers"] if f.raw["prometheus_headers"] is not None else {}
        problems = headers_problems(headers)
        for problem in problems:
            f.problems.add(f.where("prometheus_headers"), problem)
        if not problems:
            out["prometheus_headers"] = dict(headers)
    ca_file = f.string("prometheus_ca_file", required=False, max_length=500, allow_empty=True)
    if ca_file is not None:
        out["prometheus_ca_file"] = ca_file
    if f.has("prometheus_timeout_s") and f.raw["prometheus_timeout_s"] is None:
        out["prometheus_timeout_s"] = TIMEOUT_FROM_SETTINGS  # the stored timeout cleared
    elif f.has("prometheus_timeout_s"):
        timeout = f.number("prometheus_timeout_s", above=0.0)
        if timeout is not None and timeout > MAX_TIMEOUT_S:
            f.problems.add(f.where("prometheus_timeout_s"), f"at most {MAX_TIMEOUT_S:g} seconds, got {timeout:g}")
        elif timeout is not None:
            out["prometheus_timeout_s"] = timeout
    if out.get("prometheus_bearer_token_env") and out.get("prometheus_basic_auth_user"):
        f.problems.add(
            f.where("prometheus_basic_auth_user"), "give prometheus_bearer_token_env or basic auth, not both"
        )
    return out


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _scheduler(f: _Fields) -> str | None:
    """Where the cluster's job states are read from; None: left as stored (empty or null: not read)."""
    if not f.has("scheduler"):
        return None
    value = f.raw["scheduler"]
    if value is None or value in SCHEDULERS:
        return value or ""
    names = ", ".join(s for s in SCHEDULERS if s)
    f.problems.add(f.where("scheduler"), f'expected one of {names} or "" (not read), got {_kind(value)}')
    return None


def _team(
    f: _Fields,
    *,
    clusters: set[str],
    known: KnownNames,
    problems: _Problems,
    rule_seen: dict[tuple[str | None, str, str], str],
) -> TeamConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    display = f.string("display_name", required=False, max_length=200, allow_empty=True)
    rules: list[TeamRuleConfig] = []
    for path, element in f.items("rules"):
        rule = _mapping(element, path, problems, ("kind", "value", "cluster", "priority"))
        if rule is None:
            continue
        kind = rule.choice("kind", RULE_KINDS)
        value = rule.string("value", max_length=255)
        if kind == "k8s_pod_label" and value is not None and not _POD_LABEL_RULE.match(value):
            rule.problems.add(rule.where("value"), f"{value!r} is not name=value (a pod label and its value)")
            value = None
        cluster = _reference(rule, "cluster", what="cluster", in_file=clusters, known=known.clusters, required=False)
        priority = rule.integer("priority", required=False)
        if kind is None or value is None or (rule.has("cluster") and cluster is None):
            continue
        key = (cluster, kind, value)
        if key in rule_seen:
            scope = f"on cluster {cluster}" if cluster else "on every cluster"
            problems.add(path, f"{kind} = {value!r} {scope} is already a rule at {rule_seen[key]}")
            continue
        rule_seen[key] = path
        rules.append(
            TeamRuleConfig(kind=kind, value=value, cluster=cluster, priority=100 if priority is None else priority)
        )
    if len(f.problems) > before:
        return None
    assert name
    return TeamConfig(name=name, display_name=display or "", rules=tuple(rules))


def _job_group(f: _Fields) -> JobGroupConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    kind = f.choice("match_kind", MATCH_KINDS)
    value = f.string("match_value", max_length=255)
    flexible = f.boolean("flexible", default=False)
    if len(f.problems) > before:
        return None
    assert name and kind and value and flexible is not None
    return JobGroupConfig(name=name, match_kind=kind, match_value=value, flexible=flexible)


def _sso(value: Any, *, teams: set[str], known: KnownNames, problems: _Problems) -> SsoMappingConfig | None:
    """The `sso` section: `groups_claim` and `map`, a list of `{group, role, team}` (docs/sso.md)."""
    f = _mapping(value, "sso", problems, ("groups_claim", "map"))
    if f is None:
        return None
    before = len(problems)
    claim = f.string("groups_claim", required=False, max_length=255)
    rules: list[GroupRule] = []
    seen: dict[tuple[str, str | None, str | None], str] = {}
    for path, element in f.items("map"):
        rule = _mapping(element, path, problems, ("group", "role", "team"))
        if rule is None:
            continue
        group = rule.string("group", max_length=255)
        role = rule.choice("role", ROLES)
        team = _reference(rule, "team", what="team", in_file=teams, known=known.teams, required=False)
        if role in TEAM_ROLES and not rule.has("team"):
            problems.add(rule.where("team"), f"required: role {role!r} is a membership of one team")
        if role in FLEET_ROLES and rule.has("team"):
            problems.add(rule.where("team"), f"role {role!r} is fleet-wide (every team): give no team")
        if group is None or role is None or (rule.has("team") and team is None):
            continue
        key = (group, team, None if role in TEAM_ROLES else role)
        if key in seen:
            problems.add(path, f"group {group!r} is already mapped to {team or role!r} at {seen[key]}")
            continue
        seen[key] = path
        rules.append(GroupRule(group=group, role=role, team=team))
    if len(problems) > before:
        return None
    return SsoMappingConfig(groups_claim=claim or "groups", rules=tuple(rules))


def _currencies_agree(sites: list[tuple[str, Any]], gpu_models: list[tuple[str, Any]], problems: _Problems) -> None:
    """Cost adds GPU-hours at the model's rate and energy at the site's price, without conversion."""
    first: tuple[str, str] | None = None
    for path, element in [*sites, *gpu_models]:
        if not isinstance(element, dict):
            continue
        currency = element.get("currency", "EUR")
        if not isinstance(currency, str) or not _CURRENCY.match(currency):
            continue  # reported by the element itself
        if first is None:
            first = (currency, path)
        elif currency != first[0]:
            problems.add(
                _join(path, "currency"),
                f"{currency} differs from {first[0]} at {first[1]}: GPU-hour and energy costs are added without "
                "converting currencies, so one config uses one currency",
            )


def config_parse(document: Any, *, known: KnownNames | None = None) -> FleetConfig:
    """Validate a loaded YAML document as a whole. Raises ConfigError listing every problem."""
    known = known or KnownNames()
    problems = _Problems()
    if document is None:
        raise ConfigError(["(document): the file is empty"])
    if not isinstance(document, dict):
        raise ConfigError([f"(document): expected a mapping with {', '.join(_SECTIONS)}, got {_kind(document)}"])
    top = _Fields(document, "", problems, ("version", *_SECTIONS, "sso"))
    if top.has("version") and document["version"] != FORMAT_VERSION:
        problems.add("version", f"this fleetwatt reads version {FORMAT_VERSION}, got {document['version']!r}")

    raw = {name: _section(document, name, problems) for name in _SECTIONS}
    for name in _SECTIONS:
        _unique_names(raw[name], problems)
    site_names = _names_in(raw["sites"])
    type_names = _names_in(raw["server_types"])
    cluster_names = _names_in(raw["clusters"])

    def each(name: str, allowed: Sequence[str], build: Callable[[_Fields], Any]) -> tuple[Any, ...]:
        out = []
        for path, element in raw[name]:
            f = _mapping(element, path, problems, allowed)
            if f is not None and (item := build(f)) is not None:
                out.append(item)
        return tuple(out)

    rule_seen: dict[tuple[str | None, str, str], str] = {}
    config = FleetConfig(
        sites=each("sites", _SITE_KEYS, _site),
        server_types=each(
            "server_types",
            (
                "name",
                "node_overhead_factor",
                "embodied_kg_per_server",
                "service_life_h",
                "service_life_years",
                "gpus_per_server",
            ),
            _server_type,
        ),
        gpu_models=each("gpu_models", ("name", "hourly_rate", "currency", "tdp_w"), _gpu_model),
        clusters=each(
            "clusters",
            (
                "name",
                "prometheus_url",
                "selector",
                "scrape_interval_s",
                "dcgm_host_label",
                "site",
                "nodes",
                *CLUSTER_SCHEDULER_KEYS,
                *CLUSTER_ENDPOINT_KEYS,
                "shards",
                "work_counters",
            ),
            lambda f: _cluster(f, known=known, sites=site_names, server_types=type_names, problems=problems),
        ),
        teams=each(
            "teams",
            ("name", "display_name", "rules"),
            lambda f: _team(f, clusters=cluster_names, known=known, problems=problems, rule_seen=rule_seen),
        ),
        job_groups=each("job_groups", ("name", "match_kind", "match_value", "flexible"), _job_group),
        sso=None
        if document.get("sso") is None
        else _sso(document["sso"], teams=_names_in(raw["teams"]), known=known, problems=problems),
    )
    _currencies_agree(raw["sites"], raw["gpu_models"], problems)
    if problems.items:
        raise ConfigError(sorted(problems.items, key=_document_order))
    return config


def _document_order(problem: str) -> tuple[int, int]:
    """Problems of one object together, in the file's order (the sort is stable within an object)."""
    m = re.match(r"(\w+)\[(\d+)\]", problem)
    if m and m.group(1) in _SECTIONS:
        return (_SECTIONS.index(m.group(1)) + 1, int(m.group(2)))
    return (0, 0)


__all__ = [
    "BASES",
    "CLUSTER_ENDPOINT_KEYS",
    "CLUSTER_SCHEDULER_KEYS",
    "MATCH_KINDS",
    "RULE_KINDS",
    "SCHEDULERS",
    "ClusterConfig",
    "ConfigError",
    "FleetConfig",
    "GpuModelConfig",
    "JobGroupConfig",
    "KnownNames",
    "NodeMatch",
    "ServerTypeConfig",
    "ShardConfig",
    "SiteConfig",
    "TeamConfig",
    "TeamRuleConfig",
    "config_load",
    "config_parse",
    "server_type_for_hostname",
]
