"""The fleet config's sections, each element validated into its type: sites, server types, GPU models, clusters
(with their nodes, shards, endpoint and scheduler), teams and their rules, job groups, and the `sso` section.
Pure."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apps.carbon.intensity import BASES
from apps.carbon.node_types import NodeMatch
from apps.fleet.endpoint import MAX_TIMEOUT_S, env_name_problem, headers_problems, label_name_problem
from apps.fleet.work_counters import work_counters_parse
from apps.sso.mapping import FLEET_ROLES, ROLES, TEAM_ROLES, GroupRule, SsoMappingConfig
from apps.telemetry.shards import RESERVED as RESERVED_SHARDS
from apps.telemetry.shards import node_pattern_problem

from .fields import CURRENCY, Fields, Problems, mapping_read, path_join, reference_read, value_kind
from .types import (
    HOURS_PER_YEAR,
    MATCH_KINDS,
    RULE_KINDS,
    SCHEDULERS,
    TIMEOUT_FROM_SETTINGS,
    ClusterConfig,
    GpuModelConfig,
    JobGroupConfig,
    KnownNames,
    ServerTypeConfig,
    ShardConfig,
    SiteConfig,
    TeamConfig,
    TeamRuleConfig,
)

_POD_LABEL_RULE = re.compile(r"^\s*[^=\s][^=]*=\s*\S.*\Z")  # name=value, both given (apps.fleet.selectors)


SITE_KEYS = (
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


def site_parse(f: Fields) -> SiteConfig | None:
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
                f.problems.add(path_join(f.where("pue_by_month"), month), f"{why} (got {value:g})")
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


def _pue_by_month(f: Fields) -> dict[int, float] | None:
    if not f.has("pue_by_month"):
        return None
    raw = f.raw["pue_by_month"]
    path = f.where("pue_by_month")
    if not isinstance(raw, dict):
        f.problems.add(path, f"expected a mapping of month (1..12) to PUE, got {value_kind(raw)}")
        return {}
    months: dict[int, float] = {}
    for key, value in raw.items():
        month: int | None = None
        if isinstance(key, int) and not isinstance(key, bool):
            month = key
        elif isinstance(key, str) and key.strip().isdigit():
            month = int(key)
        if month is None or not 1 <= month <= 12:
            f.problems.add(path_join(path, key), "not a month (1..12)")
            continue
        if month in months:
            f.problems.add(path_join(path, key), f"month {month} is given twice")
            continue
        pue = f.number("", minimum=1.0, value=value, where=path_join(path, key))
        if pue is not None:
            months[month] = pue
    return months


def server_type_parse(f: Fields) -> ServerTypeConfig | None:
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


def gpu_model_parse(f: Fields) -> GpuModelConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100)
    rate = f.money("hourly_rate", places=4, max_digits=10)
    currency = f.currency("currency")
    tdp = f.number("tdp_w", above=0.0)
    if len(f.problems) > before:
        return None
    assert name and rate is not None and currency and tdp is not None
    return GpuModelConfig(name=name, hourly_rate=rate, currency=currency, tdp_w=tdp)


def _url(f: Fields, key: str) -> str | None:
    url = f.string(key, required=False, max_length=200)
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        f.problems.add(f.where(key), f"{url!r} is not an http(s) URL, e.g. http://prometheus:9090")
        return None
    return url


def cluster_parse(
    f: Fields, *, known: KnownNames, sites: set[str], server_types: set[str], problems: Problems
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
    site = reference_read(f, "site", what="site", in_file=sites, known=known.sites, required=False)
    nodes: list[NodeMatch] = []
    first: dict[str, str] = {}
    for path, element in f.items("nodes"):
        node = mapping_read(element, path, problems, ("match", "server_type"))
        if node is None:
            continue
        glob = node.string("match", max_length=255)
        kind = reference_read(
            node, "server_type", what="server type", in_file=server_types, known=known.server_types, required=True
        )
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


def _shards(f: Fields, problems: Problems) -> tuple[ShardConfig, ...] | None:
    """The cluster's node groups, if the key is given: each a name and a node-name regex."""
    if not f.has("shards"):
        return None
    out: list[ShardConfig] = []
    for path, element in f.items("shards"):
        shard = mapping_read(element, path, problems, ("name", "nodes"))
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


def _endpoint(f: Fields) -> dict[str, Any]:
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


def _scheduler(f: Fields) -> str | None:
    """Where the cluster's job states are read from; None: left as stored (empty or null: not read)."""
    if not f.has("scheduler"):
        return None
    value = f.raw["scheduler"]
    if value is None or value in SCHEDULERS:
        return value or ""
    names = ", ".join(s for s in SCHEDULERS if s)
    f.problems.add(f.where("scheduler"), f'expected one of {names} or "" (not read), got {value_kind(value)}')
    return None


def team_parse(
    f: Fields,
    *,
    clusters: set[str],
    known: KnownNames,
    problems: Problems,
    rule_seen: dict[tuple[str | None, str, str], str],
) -> TeamConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    display = f.string("display_name", required=False, max_length=200, allow_empty=True)
    rules: list[TeamRuleConfig] = []
    for path, element in f.items("rules"):
        rule = mapping_read(element, path, problems, ("kind", "value", "cluster", "priority"))
        if rule is None:
            continue
        kind = rule.choice("kind", RULE_KINDS)
        value = rule.string("value", max_length=255)
        if kind == "k8s_pod_label" and value is not None and not _POD_LABEL_RULE.match(value):
            rule.problems.add(rule.where("value"), f"{value!r} is not name=value (a pod label and its value)")
            value = None
        cluster = reference_read(
            rule, "cluster", what="cluster", in_file=clusters, known=known.clusters, required=False
        )
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


def job_group_parse(f: Fields) -> JobGroupConfig | None:
    before = len(f.problems)
    name = f.string("name", max_length=100, slug=True)
    kind = f.choice("match_kind", MATCH_KINDS)
    value = f.string("match_value", max_length=255)
    flexible = f.boolean("flexible", default=False)
    if len(f.problems) > before:
        return None
    assert name and kind and value and flexible is not None
    return JobGroupConfig(name=name, match_kind=kind, match_value=value, flexible=flexible)


def sso_parse(value: Any, *, teams: set[str], known: KnownNames, problems: Problems) -> SsoMappingConfig | None:
    """The `sso` section: `groups_claim` and `map`, a list of `{group, role, team}` (docs/sso.md)."""
    f = mapping_read(value, "sso", problems, ("groups_claim", "map"))
    if f is None:
        return None
    before = len(problems)
    claim = f.string("groups_claim", required=False, max_length=255)
    rules: list[GroupRule] = []
    seen: dict[tuple[str, str | None, str | None], str] = {}
    for path, element in f.items("map"):
        rule = mapping_read(element, path, problems, ("group", "role", "team"))
        if rule is None:
            continue
        group = rule.string("group", max_length=255)
        role = rule.choice("role", ROLES)
        team = reference_read(rule, "team", what="team", in_file=teams, known=known.teams, required=False)
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


def currencies_check(sites: list[tuple[str, Any]], gpu_models: list[tuple[str, Any]], problems: Problems) -> None:
    """Cost adds GPU-hours at the model's rate and energy at the site's price, without conversion."""
    first: tuple[str, str] | None = None
    for path, element in [*sites, *gpu_models]:
        if not isinstance(element, dict):
            continue
        currency = element.get("currency", "EUR")
        if not isinstance(currency, str) or not CURRENCY.match(currency):
            continue  # reported by the element itself
        if first is None:
            first = (currency, path)
        elif currency != first[0]:
            problems.add(
                path_join(path, "currency"),
                f"{currency} differs from {first[0]} at {first[1]}: GPU-hour and energy costs are added without "
                "converting currencies, so one config uses one currency",
            )
