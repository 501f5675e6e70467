"""The fleet config file's types (docs/config.md): what a parsed, valid file holds, as frozen dataclasses, the
names a file may refer to without defining them (`KnownNames`), and ConfigError, which lists every problem.
Pure: no database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from apps.carbon.intensity import BASES
from apps.carbon.node_types import NodeMatch, server_type_for_hostname
from apps.fleet.endpoint import CLUSTER_ENDPOINT_KEYS, CLUSTER_SCHEDULER_KEYS
from apps.fleet.work_counters import WorkCounters
from apps.sso.mapping import SsoMappingConfig

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


__all__ = [
    "BASES",
    "CLUSTER_ENDPOINT_KEYS",
    "CLUSTER_SCHEDULER_KEYS",
    "FORMAT_VERSION",
    "HOURS_PER_YEAR",
    "MATCH_KINDS",
    "RULE_KINDS",
    "SCHEDULERS",
    "TIMEOUT_FROM_SETTINGS",
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
    "server_type_for_hostname",
]
