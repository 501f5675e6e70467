"""Writes of the fleet config (docs/config.md): everything a valid file names, created or updated in one
transaction (sites, server types, GPU models, clusters with their hostname rules and shards, teams and their
rules, the SSO mapping, job groups), with a report of what changed and which clusters' footprints and which job
groups the changes reach. It triggers nothing: apps.pipeline.inputs.config_apply types the nodes and derives what
follows. Applying the same config twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction

from apps.carbon.models import GpuModel, JobGroup, ServerType, ServerTypeRule, Site
from apps.carbon.node_types import NodeMatch, NodeTypesReport
from apps.carbon.selectors import clusters_affected
from apps.core import locks
from apps.fleet.endpoint import CLUSTER_ENDPOINT_KEYS, CLUSTER_SCHEDULER_KEYS
from apps.fleet.models import Cluster, Team, TeamRule
from apps.fleet.work_counters import work_counters_json
from apps.sso.mapping import SsoMappingConfig
from apps.sso.models import SsoGroupRule, SsoSettings
from apps.telemetry.models import ClusterShard

from .types import TIMEOUT_FROM_SETTINGS, ConfigError, FleetConfig, ShardConfig

# Site fields that do not enter a footprint: changing them recomputes nothing.
_SITE_FIELDS_NOT_IN_FOOTPRINTS = {"timezone"}


@dataclass
class Counts:
    """What applying the config did to one kind of object."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.deleted

    def __str__(self) -> str:
        text = f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged"
        return text + (f", {self.deleted} deleted" if self.deleted else "")


@dataclass
class ApplyReport:
    """What applying the config did (config_write, then apps.pipeline.inputs.config_apply), or would do."""

    dry_run: bool = False
    counts: dict[str, Counts] = field(default_factory=dict)
    nodes: NodeTypesReport = field(default_factory=NodeTypesReport)
    typed_cluster_ids: list[int] = field(default_factory=list)  # given hostname rules: their nodes are typed next
    affected_cluster_ids: list[int] = field(default_factory=list)
    changed_group_ids: list[int] = field(default_factory=list)
    jobs_regrouped: int | None = None  # None: no regrouping was needed (or a dry run)
    gpu_hours_refreshed: int | None = None  # None: no footprint was recomputed (or a dry run)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.counts.values()) or self.nodes.updated > 0

    def lines(self) -> list[str]:
        out = [f"{kind:<17} {c}" for kind, c in self.counts.items()]
        n = self.nodes
        out.append(f"{'nodes':<17} {n.updated} given a server type, {n.unchanged} unchanged, {n.unmatched} unmatched")
        if self.jobs_regrouped is not None:
            out.append(f"{'job groups':<17} {self.jobs_regrouped} jobs regrouped")
        if self.gpu_hours_refreshed is not None:
            out.append(
                f"{'footprints':<17} {self.gpu_hours_refreshed} GPU-hours recomputed on "
                f"{len(self.affected_cluster_ids)} cluster(s)"
            )
        return out


def _advisory_lock(name: str) -> None:
    """One writer at a time for the whole transaction (two applies at once would race on creation)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])


def _upsert(
    model: type[models.Model], *, lookup: dict[str, Any], values: dict[str, Any], counts: Counts
) -> tuple[Any, set[str]]:
    """Create or update one row; returns it and the names of the fields that changed ({"*"} if created)."""
    obj = model._default_manager.filter(**lookup).first()
    if obj is None:
        obj = model._default_manager.create(**lookup, **values)
        counts.created += 1
        return obj, {"*"}
    changed = {name for name, value in values.items() if getattr(obj, name) != value}
    if changed:
        for name in changed:
            setattr(obj, name, values[name])
        obj.save(update_fields=sorted(changed))
        counts.updated += 1
    else:
        counts.unchanged += 1
    return obj, changed


def config_write(*, config: FleetConfig) -> ApplyReport:
    """Create or update everything the config names, in one transaction, and say which clusters' nodes are to be
    typed by their new hostname rules, and which clusters' footprints and which job groups the changes reach
    (apps.pipeline types the nodes and derives what follows; a dry run rolls it all back there). Deletes nothing,
    except a cluster's hostname rules that its `nodes` list no longer gives. Idempotent."""
    report = ApplyReport()
    c = report.counts
    kinds = (
        "sites",
        "server_types",
        "gpu_models",
        "clusters",
        "server_type_rules",
        "shards",
        "teams",
        "team_rules",
        "job_groups",
    )
    for kind in kinds:
        c[kind] = Counts()
    if config.sso is not None:  # a file without the section reports (and changes) nothing of it
        c["sso"] = Counts()  # its rules and its settings (the groups claim)
    affected: set[int] = set()
    with transaction.atomic():
        _advisory_lock(locks.CONFIG_APPLY)
        site_ids, changed_site_ids = _sites_apply(config, c["sites"])
        changed_type_ids = _server_types_apply(config, c["server_types"])
        changed_models = _gpu_models_apply(config, c["gpu_models"])
        clusters = _clusters_apply(config, c["clusters"], site_ids=site_ids, affected=affected)
        for cc in config.clusters:
            if cc.nodes is not None:
                _server_type_rules_apply(cluster=clusters[cc.name], patterns=cc.nodes, counts=c["server_type_rules"])
            if cc.shards is not None:
                _shards_apply(cluster=clusters[cc.name], shards=cc.shards, counts=c["shards"])
            if cc.nodes:
                report.typed_cluster_ids.append(clusters[cc.name].id)
        _teams_apply(config, c["teams"], c["team_rules"])
        if config.sso is not None:
            _sso_apply(config.sso, c["sso"])
        changed_group_ids = _job_groups_apply(config, c["job_groups"])
        affected |= clusters_affected(
            site_ids=changed_site_ids,
            server_type_ids=changed_type_ids,
            gpu_model_names=changed_models,
            job_group_ids=changed_group_ids,  # the jobs in them now; those that move in are found on regrouping
        )
    report.affected_cluster_ids = sorted(affected)
    report.changed_group_ids = sorted(changed_group_ids)
    return report


def _sites_apply(config: FleetConfig, counts: Counts) -> tuple[dict[str, int], set[int]]:
    ids = dict(Site.objects.values_list("name", "id"))
    changed_ids: set[int] = set()
    for s in config.sites:
        site, changed = _upsert(
            Site,
            lookup={"name": s.name},
            values={
                "grid_zone": s.grid_zone,
                "intensity_basis": s.intensity_basis,
                "pue": s.pue,
                "pue_by_month": {str(m): v for m, v in s.pue_by_month.items()},
                "provider_includes_overhead": s.provider_includes_overhead,
                "electricity_price_per_kwh": s.electricity_price_per_kwh,
                "currency": s.currency,
                "timezone": s.timezone,
            },
            counts=counts,
        )
        ids[s.name] = site.id
        if changed - _SITE_FIELDS_NOT_IN_FOOTPRINTS - {"*"}:
            changed_ids.add(site.id)
    return ids, changed_ids


def _server_types_apply(config: FleetConfig, counts: Counts) -> set[int]:
    changed_ids: set[int] = set()
    for t in config.server_types:
        server_type, changed = _upsert(
            ServerType,
            lookup={"name": t.name},
            values={
                "node_overhead_factor": t.node_overhead_factor,
                "embodied_kg_per_server": t.embodied_kg_per_server,
                "service_life_h": t.service_life_h,
                "gpus_per_server": t.gpus_per_server,
            },
            counts=counts,
        )
        if changed - {"*"}:
            changed_ids.add(server_type.id)
    return changed_ids


def _gpu_models_apply(config: FleetConfig, counts: Counts) -> set[str]:
    changed_names: set[str] = set()
    for m in config.gpu_models:
        _, changed = _upsert(
            GpuModel,
            lookup={"name": m.name},
            values={"hourly_rate": m.hourly_rate, "currency": m.currency, "tdp_w": m.tdp_w},
            counts=counts,
        )
        if changed:  # a new model prices GPUs that already report its name
            changed_names.add(m.name)
    return changed_names


def _clusters_apply(
    config: FleetConfig, counts: Counts, *, site_ids: dict[str, int], affected: set[int]
) -> dict[str, Cluster]:
    out: dict[str, Cluster] = {}
    problems: list[str] = []
    for i, cc in enumerate(config.clusters):
        values: dict[str, Any] = {}
        if cc.prometheus_url is not None:
            values["prometheus_url"] = cc.prometheus_url
        if cc.selector is not None:
            values["selector"] = cc.selector
        if cc.scrape_interval_s is not None:
            values["scrape_interval_s"] = cc.scrape_interval_s
        if cc.dcgm_host_label is not None:
            values["dcgm_host_label"] = cc.dcgm_host_label
        if cc.work_counters_given:  # null: the defaults
            values["work_counters"] = None if cc.work_counters is None else work_counters_json(cc.work_counters)
        for name in (*CLUSTER_SCHEDULER_KEYS, *CLUSTER_ENDPOINT_KEYS):
            if getattr(cc, name) is not None:
                values[name] = getattr(cc, name)
        if values.get("prometheus_timeout_s") == TIMEOUT_FROM_SETTINGS:
            values["prometheus_timeout_s"] = None  # cleared: FLEETWATT_PROMETHEUS_TIMEOUT_S
        if cc.site is not None:
            if cc.site not in site_ids:  # deleted since the config was validated
                problems.append(f"clusters[{i}].site: unknown site {cc.site!r}")
                continue
            values["site_id"] = site_ids[cc.site]
        existing = Cluster.objects.filter(name=cc.name).exists()
        if not existing:
            values.setdefault("prometheus_url", settings.FLEETWATT_PROMETHEUS_URL)
            values.setdefault("scrape_interval_s", settings.FLEETWATT_SCRAPE_INTERVAL_S)
        cluster, changed = _upsert(Cluster, lookup={"name": cc.name}, values=values, counts=counts)
        out[cc.name] = cluster
        if "site_id" in changed:
            affected.add(cluster.id)
    if problems:
        raise ConfigError(problems)
    return out


def _server_type_rules_apply(*, cluster: Cluster, patterns: Sequence[NodeMatch], counts: Counts) -> None:
    """The cluster's stored hostname rules become exactly `patterns`, in order (priorities 10, 20, ...): the
    ingest applies them to nodes as they appear (node_server_types_apply)."""
    type_ids = dict(ServerType.objects.filter(name__in={p.server_type for p in patterns}).values_list("name", "id"))
    for position, pattern in enumerate(patterns, start=1):
        _upsert(
            ServerTypeRule,
            lookup={"cluster_id": cluster.id, "hostname_glob": pattern.match},
            values={"server_type_id": type_ids[pattern.server_type], "priority": position * 10},
            counts=counts,
        )
    stale = ServerTypeRule.objects.filter(cluster=cluster).exclude(hostname_glob__in=[p.match for p in patterns])
    counts.deleted += stale.delete()[0]


def _shards_apply(*, cluster: Cluster, shards: Sequence[ShardConfig], counts: Counts) -> None:
    """The cluster's node groups become exactly `shards` (the next batch the ingest queues uses them)."""
    for shard in shards:
        _upsert(ClusterShard, lookup={"cluster_id": cluster.id, "name": shard.name},
                values={"node_pattern": shard.nodes}, counts=counts)  # fmt: skip
    stale = ClusterShard.objects.filter(cluster=cluster).exclude(name__in=[s.name for s in shards])
    counts.deleted += stale.delete()[0]


def _teams_apply(config: FleetConfig, teams: Counts, rules: Counts) -> None:
    cluster_ids = dict(Cluster.objects.values_list("name", "id"))
    for t in config.teams:
        team, _ = _upsert(Team, lookup={"name": t.name}, values={"display_name": t.display_name}, counts=teams)
        for r in t.rules:
            if r.cluster is not None and r.cluster not in cluster_ids:
                raise ConfigError([f"teams: unknown cluster {r.cluster!r}"])
            lookup: dict[str, Any] = {"kind": r.kind, "value": r.value}
            if r.cluster is None:
                lookup["cluster__isnull"] = True
            else:
                lookup["cluster_id"] = cluster_ids[r.cluster]
            rule = TeamRule.objects.filter(**lookup).first()
            values = {"team_id": team.id, "priority": r.priority}
            if rule is None:
                TeamRule.objects.create(
                    kind=r.kind,
                    value=r.value,
                    cluster_id=cluster_ids.get(r.cluster) if r.cluster else None,
                    **values,
                )
                rules.created += 1
            else:
                _upsert(TeamRule, lookup={"id": rule.id}, values=values, counts=rules)


def _sso_apply(sso: SsoMappingConfig, counts: Counts) -> None:
    """The file's `sso` section becomes the stored one: its rules exactly (in its order), its claim. Who has
    which team follows at each user's next login (apps.sso.services)."""
    _upsert(SsoSettings, lookup={"id": 1}, values={"groups_claim": sso.groups_claim}, counts=counts)
    team_ids = dict(Team.objects.values_list("name", "id"))
    kept: list[int] = []
    for position, r in enumerate(sso.rules):
        if r.team is not None and r.team not in team_ids:
            raise ConfigError([f"sso: unknown team {r.team!r}"])
        rule, _ = _upsert(
            SsoGroupRule,
            lookup={"group": r.group, "role": r.role, "team_id": team_ids[r.team] if r.team else None},
            values={"position": position},
            counts=counts,
        )
        kept.append(rule.id)
    counts.deleted += SsoGroupRule.objects.exclude(id__in=kept).delete()[0]


def _job_groups_apply(config: FleetConfig, counts: Counts) -> set[int]:
    changed_ids: set[int] = set()
    for g in config.job_groups:
        group, changed = _upsert(
            JobGroup,
            lookup={"name": g.name},
            values={"match_kind": g.match_kind, "match_value": g.match_value, "flexible": g.flexible},
            counts=counts,
        )
        if changed:
            changed_ids.add(group.id)
    return changed_ids
