"""Writes of the carbon app's inputs: the fleet config, hourly grid intensity, nodes' server types; and
the recomputation of the footprints those inputs change (apps.carbon.services).

Each entry point runs in one transaction, so a failure leaves the database as it was, and is safe to run
again: applying the same config or importing the same file twice changes nothing the second time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction

from apps.fleet.models import Cluster, Gpu, Node, Team, TeamRule
from apps.jobs.models import Job

from . import services
from .config import (
    BASES,
    ConfigError,
    FleetConfig,
    KnownNames,
    NodeMatch,
    server_type_for_hostname,
)
from .intensity import HOUR, IntensityError, IntensityRow
from .models import GpuModel, IntensityHour, JobGroup, ServerType, ServerTypeRule, Site

# Site fields that do not enter a footprint: changing them recomputes nothing.
_SITE_FIELDS_NOT_IN_FOOTPRINTS = {"timezone"}


@dataclass
class Counts:
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
class NodeTypesReport:
    """What node_server_types_apply did on one cluster."""

    updated: int = 0
    unchanged: int = 0
    unmatched: int = 0  # nodes no pattern matches: their server type is left as it is


@dataclass
class ApplyReport:
    dry_run: bool
    counts: dict[str, Counts] = field(default_factory=dict)
    nodes: NodeTypesReport = field(default_factory=NodeTypesReport)
    affected_cluster_ids: list[int] = field(default_factory=list)
    jobs_regrouped: int | None = None  # None: job_groups_assign was not needed (or a dry run)
    gpu_hours_refreshed: int | None = None  # None: footprints_refresh was not needed (or a dry run)

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


def known_names_read() -> KnownNames:
    """What a config may refer to without defining it."""
    return KnownNames(
        sites=frozenset(Site.objects.values_list("name", flat=True)),
        server_types=frozenset(ServerType.objects.values_list("name", flat=True)),
        clusters=frozenset(Cluster.objects.values_list("name", flat=True)),
        default_cluster=settings.FLEETWATT_CLUSTER,
    )


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


def node_server_types_apply(*, cluster: Cluster, patterns: Sequence[NodeMatch]) -> NodeTypesReport:
    """Set the server type of each node of the cluster from the first pattern whose glob matches its
    hostname. Nodes no pattern matches keep theirs. Safe to run again; call it after nodes appear."""
    names = {p.server_type for p in patterns}
    type_ids = dict(ServerType.objects.filter(name__in=names).values_list("name", "id"))
    if missing := names - type_ids.keys():
        raise ValueError(f"unknown server types: {', '.join(sorted(missing))}")
    report = NodeTypesReport()
    to_set: dict[int, list[int]] = defaultdict(list)
    for node_id, hostname, current in Node.objects.filter(cluster=cluster).values_list(
        "id", "hostname", "server_type_id"
    ):
        name = server_type_for_hostname(hostname, patterns)
        if name is None:
            report.unmatched += 1
        elif current == type_ids[name]:
            report.unchanged += 1
        else:
            to_set[type_ids[name]].append(node_id)
    for type_id, node_ids in to_set.items():
        report.updated += Node.objects.filter(id__in=node_ids).update(server_type_id=type_id)
    return report


def clusters_affected(
    *,
    site_ids: Collection[int] = (),
    server_type_ids: Collection[int] = (),
    gpu_model_names: Collection[str] = (),
    job_group_ids: Collection[int] = (),
) -> set[int]:
    """The clusters whose footprints depend on these inputs."""
    ids: set[int] = set()
    if site_ids:
        ids |= set(Cluster.objects.filter(site_id__in=site_ids).values_list("id", flat=True))
    if server_type_ids:
        ids |= set(Node.objects.filter(server_type_id__in=server_type_ids).values_list("cluster_id", flat=True))
    if gpu_model_names:
        ids |= set(Gpu.objects.filter(model_name__in=gpu_model_names).values_list("node__cluster_id", flat=True))
    if job_group_ids:  # a group's `flexible` decides whether its jobs get the carbon hint
        ids |= set(Job.objects.filter(job_group_id__in=job_group_ids).values_list("cluster_id", flat=True))
    return ids


def job_groups_changed(*, group_ids: Collection[int]) -> tuple[int, set[int]]:
    """Regroup every job after these groups changed; returns (jobs regrouped, clusters whose jobs moved in or
    out of them). Call before the group rows are deleted, if they are."""
    before = clusters_affected(job_group_ids=group_ids)
    regrouped = services.job_groups_assign(cluster_ids=None)
    return regrouped, before | clusters_affected(job_group_ids=group_ids)


def config_apply(*, config: FleetConfig, dry_run: bool = False) -> ApplyReport:
    """Create or update everything the config names, in one transaction; then regroup jobs if job groups
    changed and recompute the footprints of the clusters whose inputs changed. Deletes nothing, except a
    cluster's hostname rules that its `nodes` list no longer gives. A dry run does the same and rolls back
    (without regrouping or recomputing). Idempotent."""
    report = ApplyReport(dry_run=dry_run)
    c = report.counts
    kinds = (
        "sites",
        "server_types",
        "gpu_models",
        "clusters",
        "server_type_rules",
        "teams",
        "team_rules",
        "job_groups",
    )
    for kind in kinds:
        c[kind] = Counts()
    affected: set[int] = set()
    with transaction.atomic():
        _advisory_lock("fleetwatt.config_apply")
        site_ids, changed_site_ids = _sites_apply(config, c["sites"])
        changed_type_ids = _server_types_apply(config, c["server_types"])
        changed_models = _gpu_models_apply(config, c["gpu_models"])
        clusters = _clusters_apply(config, c["clusters"], site_ids=site_ids, affected=affected)
        for cc in config.clusters:
            if cc.nodes is not None:
                _server_type_rules_apply(cluster=clusters[cc.name], patterns=cc.nodes, counts=c["server_type_rules"])
            if cc.nodes:
                nodes = node_server_types_apply(cluster=clusters[cc.name], patterns=cc.nodes)
                report.nodes.updated += nodes.updated
                report.nodes.unchanged += nodes.unchanged
                report.nodes.unmatched += nodes.unmatched
                if nodes.updated:
                    affected.add(clusters[cc.name].id)
        _teams_apply(config, c["teams"], c["team_rules"])
        changed_group_ids = _job_groups_apply(config, c["job_groups"])
        affected |= clusters_affected(
            site_ids=changed_site_ids, server_type_ids=changed_type_ids, gpu_model_names=changed_models
        )
        if dry_run:
            transaction.set_rollback(True)
        else:
            if changed_group_ids:
                report.jobs_regrouped, moved = job_groups_changed(group_ids=changed_group_ids)
                affected |= moved
            if affected:
                report.gpu_hours_refreshed = services.footprints_refresh(cluster_ids=sorted(affected))
    report.affected_cluster_ids = sorted(affected)
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
    ingest applies them to nodes as they appear (apps.carbon.services.node_server_types_apply)."""
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


# --- Intensity -------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    zone: str
    basis: str
    source: str
    rows: int
    first_hour: datetime
    last_hour: datetime
    created: int = 0
    replaced: int = 0  # an hour already stored, now with another value or source
    unchanged: int = 0  # an hour already stored with the same value and source
    missing_hours: int = 0  # hours between the first and the last that the rows do not give
    refreshed_cluster_ids: list[int] = field(default_factory=list)
    refresh_window: tuple[datetime, datetime] | None = None  # None with clusters refreshed: all their hours
    gpu_hours_refreshed: int | None = None  # None: nothing to recompute

    def lines(self) -> list[str]:
        out = [
            f"{self.rows} hours of {self.zone} ({self.basis}, source {self.source!r}): "
            f"{self.first_hour:%Y-%m-%d %H:%M} to {self.last_hour:%Y-%m-%d %H:%M} UTC",
            f"{self.created} created, {self.replaced} replaced, {self.unchanged} unchanged; "
            f"{self.missing_hours} hours missing in between (filled by the fill rule where jobs ran)",
        ]
        if self.gpu_hours_refreshed is None:
            out.append("footprints: nothing to recompute")
        else:
            window = (
                f"{self.refresh_window[0]:%Y-%m-%d %H:%M} to {self.refresh_window[1]:%Y-%m-%d %H:%M} UTC"
                if self.refresh_window
                else "all hours (a month gained or lost its first figures)"
            )
            out.append(
                f"footprints: {self.gpu_hours_refreshed} GPU-hours recomputed on "
                f"{len(self.refreshed_cluster_ids)} cluster(s), {window}"
            )
        return out


def _month_start(moment: datetime) -> datetime:
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _next_month(moment: datetime) -> datetime:
    start = _month_start(moment)
    return (start + timedelta(days=32)).replace(day=1)


def _months(hours: Iterable[datetime]) -> set[tuple[int, int]]:
    return {(h.year, h.month) for h in hours}


def _months_with_figures(zone: str, basis: str, months: set[tuple[int, int]]) -> set[tuple[int, int]]:
    if not months:
        return set()
    start = min(datetime(y, m, 1, tzinfo=UTC) for y, m in months)
    end = _next_month(max(datetime(y, m, 1, tzinfo=UTC) for y, m in months))
    hours = IntensityHour.objects.filter(zone=zone, basis=basis, hour__gte=start, hour__lt=end)
    return _months(hours.values_list("hour", flat=True).distinct()) & months


def _intensity_refresh(
    *, zone: str, basis: str, changed_hours: Collection[datetime], months_flipped: bool
) -> tuple[list[int], tuple[datetime, datetime] | None, int | None]:
    """Recompute the footprints the changed hours of (zone, basis) reach under the fill rule (docs/config.md):
    the hours themselves, hours filled from them (within FLEETWATT_INTENSITY_FILL_HOURS), and hours filled
    with the monthly mean of their months: so whole months, widened by the fill distance. When a month
    gains its first figures or loses its last, hours of other months filled from the nearest month's mean
    may change too: then every hour of the zone's clusters."""
    cluster_ids = sorted(
        Cluster.objects.filter(site__grid_zone=zone, site__intensity_basis=basis).values_list("id", flat=True)
    )
    if not cluster_ids or not changed_hours:
        return [], None, None
    if months_flipped:
        return cluster_ids, None, services.footprints_refresh(cluster_ids=cluster_ids)
    fill = timedelta(hours=settings.FLEETWATT_INTENSITY_FILL_HOURS)
    start = _month_start(min(changed_hours) - fill)
    end = _next_month(max(changed_hours) + fill)
    return cluster_ids, (start, end), services.footprints_refresh(cluster_ids=cluster_ids, start=start, end=end)


def intensity_import(
    *, rows: Sequence[IntensityRow], zone: str, source: str, basis: str, allow_unknown_zone: bool = False
) -> ImportReport:
    """Store hourly intensity of one zone and basis, in one transaction: an hour already stored is replaced
    (the latest import wins). Then recompute the footprints it changes. Raises IntensityError, having
    written nothing, if the zone is used by no site (unless allowed) or the rows are not one per hour."""
    problems: list[str] = []
    if basis not in BASES:
        problems.append(f"--basis: expected one of {', '.join(BASES)}, got {basis!r}")
    if not zone.strip() or len(zone) > 50:
        problems.append("--zone: a zone id of 1 to 50 characters, e.g. DE or US-CAL-CISO")
    if not source.strip() or len(source) > 200:
        problems.append("--source: a name of 1 to 200 characters, e.g. 'Electricity Maps 2024 v1'")
    if not rows:
        problems.append("no rows to import")
    first: dict[datetime, int] = {}
    for row in rows:
        if row.hour.tzinfo is None or row.hour.utcoffset() != timedelta(0) or row.hour.minute or row.hour.second:
            problems.append(f"line {row.line}: {row.hour} is not the start of a UTC hour")
        elif row.hour in first:
            problems.append(
                f"line {row.line}: {row.hour:%Y-%m-%d %H}:00 UTC is already given on line {first[row.hour]}"
            )
        else:
            first[row.hour] = row.line
    if zone.strip() and not allow_unknown_zone and not Site.objects.filter(grid_zone=zone).exists():
        used = sorted(set(Site.objects.values_list("grid_zone", flat=True)))
        problems.append(
            f"--zone {zone}: no site uses this zone (sites use: {', '.join(used) or 'none yet'}); "
            "pass --allow-unknown-zone to import it anyway"
        )
    if problems:
        raise IntensityError(problems)

    hours = sorted(first)
    report = ImportReport(
        zone=zone, basis=basis, source=source, rows=len(rows), first_hour=hours[0], last_hour=hours[-1]
    )
    report.missing_hours = int((hours[-1] - hours[0]) / HOUR) + 1 - len(hours)
    with transaction.atomic():
        _advisory_lock(f"fleetwatt.intensity:{zone}:{basis}")
        stored = {
            h.hour: (h.kg_per_kwh, h.source)
            for h in IntensityHour.objects.filter(zone=zone, basis=basis, hour__gte=hours[0], hour__lte=hours[-1])
        }
        months = _months(hours)
        months_before = _months_with_figures(zone, basis, months)
        write: list[IntensityHour] = []
        for row in rows:
            before = stored.get(row.hour)
            if before == (row.kg_per_kwh, source):
                report.unchanged += 1
                continue
            if before is None:
                report.created += 1
            else:
                report.replaced += 1
            write.append(IntensityHour(zone=zone, basis=basis, hour=row.hour, kg_per_kwh=row.kg_per_kwh, source=source))
        IntensityHour.objects.bulk_create(
            write,
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["zone", "basis", "hour"],
            update_fields=["kg_per_kwh", "source", "imported_at"],
        )
        changed = [w.hour for w in write]
        report.refreshed_cluster_ids, report.refresh_window, report.gpu_hours_refreshed = _intensity_refresh(
            zone=zone, basis=basis, changed_hours=changed, months_flipped=months_before != months and bool(changed)
        )
    return report


def intensity_delete(*, hours: models.QuerySet[IntensityHour]) -> int:
    """Delete stored intensity hours (the admin's delete) and recompute the footprints they reached."""
    with transaction.atomic():
        by_zone: dict[tuple[str, str], list[datetime]] = defaultdict(list)
        for zone, basis, hour in hours.values_list("zone", "basis", "hour"):
            by_zone[(zone, basis)].append(hour)
        deleted, _ = hours.delete()
        for (zone, basis), changed in by_zone.items():
            months = _months(changed)
            _intensity_refresh(
                zone=zone,
                basis=basis,
                changed_hours=changed,
                months_flipped=_months_with_figures(zone, basis, months) != months,
            )
    return deleted


def server_type_rules_changed(*, cluster_id: int) -> int | None:
    """After a cluster's hostname rules were edited (the admin): re-type its nodes from the stored rules and
    recompute its footprints if a node changed. Returns the GPU-hours recomputed (None: none)."""
    if services.node_server_types_apply(cluster_id=cluster_id) == 0:
        return None
    return services.footprints_refresh(cluster_ids=[cluster_id])


def footprint_inputs_changed(
    *,
    site_ids: Collection[int] = (),
    server_type_ids: Collection[int] = (),
    gpu_model_names: Collection[str] = (),
    job_group_ids: Collection[int] = (),
    cluster_ids: Collection[int] = (),
    regroup: bool = False,
) -> int | None:
    """After an edit outside the config file (the admin): regroup jobs if job groups changed (or `regroup`,
    after groups were deleted), and recompute the footprints of the clusters these inputs reach, plus
    `cluster_ids`. Returns the GPU-hours recomputed (None: nothing to recompute)."""
    affected = set(cluster_ids) | clusters_affected(
        site_ids=site_ids, server_type_ids=server_type_ids, gpu_model_names=gpu_model_names
    )
    if job_group_ids or regroup:
        _, moved = job_groups_changed(group_ids=job_group_ids)
        affected |= moved
    if not affected:
        return None
    return services.footprints_refresh(cluster_ids=sorted(affected))
