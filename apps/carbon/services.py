"""Writes of the carbon and cost footprint: per job-GPU-hour rows, the idle line per GPU-hour, and the
per-job sums. Recomputed after each ingest and whenever an input (config, intensity) changes, so it is
always a function of the current rows and settings (safe to run again)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.aggregates import BoolOr
from django.db import connection, transaction
from django.db.models import Avg, Sum
from django.db.models.functions import ExtractMonth, ExtractYear

from apps.core.bulk import rows_update
from apps.fleet.models import Gpu
from apps.jobs.models import Job, JobGpuHour
from apps.telemetry.models import GpuHour

from .arithmetic import HOUR, HourFactors, footprint, intensity_fill, shift_saving_kg
from .models import GpuModel, IntensityHour, JobGroup, Site, TeamDay
from .selectors import rollups_invalidate

JOB_FOOTPRINT_FIELDS = [
    "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost", "currency", "intensity_source",
    "intensity_basis", "intensity_estimated", "shift_saving_kg",
]  # fmt: skip
ROW_FIELDS = [
    "server_kwh", "facility_kwh", "intensity_kg_per_kwh", "intensity_estimated", "operational_kg", "embodied_kg",
    "cost",
]  # fmt: skip
IDLE_FIELDS = ["idle_facility_kwh", "idle_operational_kg", "idle_embodied_kg", "idle_cost"]


@dataclass
class _ZoneIntensity:
    """One zone's hourly figures on one basis, with the sources they came from."""

    known: dict[datetime, float]
    monthly_mean: dict[tuple[int, int], float]
    sources: set[str]


class FactorBook:
    """Looks up, once per refresh, what every GPU-hour's footprint needs."""

    def __init__(self, *, start: datetime, end: datetime) -> None:
        fill = timedelta(hours=settings.FLEETWATT_INTENSITY_FILL_HOURS)
        self._start, self._end, self._fill = start - fill, end + fill, fill
        self._zones: dict[tuple[str, str], _ZoneIntensity] = {}
        self._gpu_models = {m.name: m for m in GpuModel.objects.all()}
        self.sources: dict[tuple[str, str], set[str]] = defaultdict(set)

    def zone(self, zone: str, basis: str) -> _ZoneIntensity:
        if (zone, basis) not in self._zones:
            rows = IntensityHour.objects.filter(zone=zone, basis=basis)
            window = rows.filter(hour__gte=self._start, hour__lt=self._end)
            means = (
                rows.annotate(y=ExtractYear("hour"), m=ExtractMonth("hour"))
                .values("y", "m")
                .annotate(mean=Avg("kg_per_kwh"))
                .order_by()
            )
            self._zones[(zone, basis)] = _ZoneIntensity(
                known={r.hour: r.kg_per_kwh for r in window},
                monthly_mean={(r["y"], r["m"]): r["mean"] for r in means},
                sources=set(window.values_list("source", flat=True).distinct()),
            )
        return self._zones[(zone, basis)]

    def factors(self, gpu: Gpu, hour: datetime) -> HourFactors:
        node = gpu.node
        site: Site | None = node.cluster.site
        server = node.server_type
        model = self._gpu_models.get(gpu.model_name)
        intensity, estimated = None, False
        if site is not None and site.grid_zone:
            zone = self.zone(site.grid_zone, site.intensity_basis)
            intensity, estimated = intensity_fill(
                hour,
                known=zone.known,
                monthly_mean=zone.monthly_mean,
                within_hours=settings.FLEETWATT_INTENSITY_FILL_HOURS,
            )
            self.sources[(site.grid_zone, site.intensity_basis)] |= zone.sources
        return HourFactors(
            overhead=server.overhead if server else 1.0,
            pue=site.pue_for_month(hour.month) if site else 1.0,
            intensity_kg_per_kwh=intensity,
            intensity_estimated=estimated,
            embodied_kg_per_gpu_hour=server.embodied_kg_per_gpu_hour if server else 0.0,
            gpu_rate_per_hour=model.hourly_rate if model else Decimal(0),
            price_per_kwh=site.electricity_price_per_kwh if site else Decimal(0),
        )


def footprints_refresh(
    *, cluster_ids: list[int] | None = None, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Recompute the footprint of every GPU-hour in [start, end) of the given clusters (default: all),
    then the sums of every job that has a row there. Returns the number of GPU-hours recomputed."""
    gpu_hours = GpuHour.objects.select_related("gpu__node__cluster__site", "gpu__node__server_type")
    job_rows = JobGpuHour.objects.select_related("gpu__node__cluster__site", "gpu__node__server_type")
    if cluster_ids is not None:
        gpu_hours = gpu_hours.filter(gpu__node__cluster_id__in=cluster_ids)
        job_rows = job_rows.filter(gpu__node__cluster_id__in=cluster_ids)
    if start is not None:
        gpu_hours, job_rows = gpu_hours.filter(hour__gte=start), job_rows.filter(hour__gte=start)
    if end is not None:
        gpu_hours, job_rows = gpu_hours.filter(hour__lt=end), job_rows.filter(hour__lt=end)
    hours = list(gpu_hours)
    rows = list(job_rows)
    if not hours and not rows:
        return 0
    lo = min([h.hour for h in hours] + [r.hour for r in rows])
    hi = max([h.hour for h in hours] + [r.hour for r in rows]) + HOUR
    book = FactorBook(start=lo, end=hi)
    factors: dict[tuple[int, datetime], HourFactors] = {}

    def factors_for(gpu: Gpu, hour: datetime) -> HourFactors:
        key = (gpu.pk, hour)
        if key not in factors:
            factors[key] = book.factors(gpu, hour)
        return factors[key]

    for row in rows:
        f = factors_for(row.gpu, row.hour)
        fp = footprint(energy_j=row.energy_j, gpu_hours=row.occupancy_s / 3600.0, factors=f)
        row.server_kwh, row.facility_kwh = fp.server_kwh, fp.facility_kwh
        row.intensity_kg_per_kwh, row.intensity_estimated = f.intensity_kg_per_kwh, f.intensity_estimated
        row.operational_kg, row.embodied_kg, row.cost = fp.operational_kg, fp.embodied_kg, fp.cost
    rows_update(rows, ROW_FIELDS)

    for gh in hours:
        # The idle line: energy outside every job, and the part of the GPU-hour no job occupied.
        f = factors_for(gh.gpu, gh.hour)
        unoccupied_h = max(0.0, 3600.0 - gh.occupied_s) / 3600.0
        fp = footprint(energy_j=max(0.0, gh.device_energy_j - gh.jobs_energy_j), gpu_hours=unoccupied_h, factors=f)
        gh.idle_facility_kwh, gh.idle_operational_kg = fp.facility_kwh, fp.operational_kg
        gh.idle_embodied_kg, gh.idle_cost = fp.embodied_kg, fp.cost
    rows_update(hours, IDLE_FIELDS)

    jobs_footprint_sum(job_ids={r.job_id for r in rows}, book=book)
    team_days_refresh(
        cluster_ids={r.gpu.node.cluster_id for r in rows}, days={r.hour.astimezone(UTC).date() for r in rows}
    )
    transaction.on_commit(rollups_invalidate)  # the idle lines of cluster rollups changed
    return len(hours)


def jobs_footprint_sum(*, job_ids: Iterable[int], book: FactorBook | None = None) -> None:
    """A job's footprint is the sum of its rows; its intensity source and basis those of its site."""
    from apps.waste.services import estimated_intensity_flags_sync, job_findings_sync

    ids = sorted(set(job_ids))
    if not ids:
        return
    sums = {
        r["job_id"]: r
        for r in JobGpuHour.objects.filter(job_id__in=ids)
        .values("job_id")
        .annotate(
            server_kwh=Sum("server_kwh"),
            facility_kwh=Sum("facility_kwh"),
            operational_kg=Sum("operational_kg"),  # NULL when no hour had an intensity
            embodied_kg=Sum("embodied_kg"),
            cost=Sum("cost"),
            estimated=BoolOr("intensity_estimated"),
        )
        .order_by()
    }
    jobs = list(Job.objects.filter(pk__in=ids).select_related("cluster__site", "job_group"))
    deadline_h = settings.FLEETWATT_SHIFT_DEADLINE_H
    for job in jobs:
        total = sums.get(job.pk, {})
        site = job.cluster.site
        job.server_kwh = total.get("server_kwh") or 0.0
        job.facility_kwh = total.get("facility_kwh") or 0.0
        job.operational_kg = total.get("operational_kg")
        job.embodied_kg = total.get("embodied_kg") or 0.0
        job.cost = total.get("cost") or Decimal(0)
        job.currency = site.currency if site else ""
        job.intensity_basis = site.intensity_basis if site and site.grid_zone else ""
        sources = sorted(book.sources.get((site.grid_zone, site.intensity_basis), set())) if book and site else []
        job.intensity_source = ", ".join(sources) or (job.intensity_source if job.intensity_basis else "")
        job.intensity_estimated = bool(total.get("estimated"))
        job.shift_saving_kg = None
        if job.job_group and job.job_group.flexible and site and site.grid_zone and total:
            job.shift_saving_kg = _shift_hint(job, site, deadline_h)
    rows_update(jobs, JOB_FOOTPRINT_FIELDS)
    estimated_intensity_flags_sync(jobs=jobs)
    job_findings_sync(job_ids=ids)  # their evidence carries kWh, kg and cost


def _shift_hint(job: Job, site: Site, deadline_h: int) -> float | None:
    """The carbon-aware hint of one flexible job, from its hourly facility energy."""
    by_hour: dict[datetime, float] = defaultdict(float)
    for hour, kwh in JobGpuHour.objects.filter(job=job).values_list("hour", "facility_kwh"):
        by_hour[hour] += kwh
    window = IntensityHour.objects.filter(
        zone=site.grid_zone,
        basis=site.intensity_basis,
        hour__gte=min(by_hour),
        hour__lt=max(by_hour) + (deadline_h + 1) * HOUR,
    ).values_list("hour", "kg_per_kwh")
    return shift_saving_kg(sorted(by_hour.items()), dict(window), deadline_h=deadline_h)


def _group_matches(group: JobGroup, job: Job) -> bool:
    match group.match_kind:
        case JobGroup.MatchKind.ACCOUNT:
            return job.account == group.match_value
        case JobGroup.MatchKind.NAME_PREFIX:
            return bool(job.name) and job.name.startswith(group.match_value)
        case JobGroup.MatchKind.NAMESPACE:
            return job.namespace == group.match_value
        case JobGroup.MatchKind.USER:
            return job.user == group.match_value
    return False


def job_groups_assign(*, cluster_ids: list[int] | None = None, job_ids: Iterable[int] | None = None) -> int:
    """Set each job's group from the groups' match rules (the first group by name that matches).
    Returns the number of jobs changed."""
    groups = list(JobGroup.objects.order_by("name"))
    jobs = Job.objects.all()
    if cluster_ids is not None:
        jobs = jobs.filter(cluster_id__in=cluster_ids)
    if job_ids is not None:
        jobs = jobs.filter(pk__in=list(job_ids))
    changed = []
    for job in jobs.filter(group_locked=False).only("pk", "account", "name", "namespace", "user", "job_group_id"):
        group = next((g for g in groups if _group_matches(g, job)), None)
        group_id = group.pk if group else None
        if job.job_group_id != group_id:
            job.job_group_id = group_id
            changed.append(job)
    rows_update(changed, ["job_group"])
    return len(changed)


def node_server_types_apply(*, cluster_id: int, only_unset: bool = False) -> int:
    """Set the server type of the cluster's nodes from its stored hostname rules (first match wins),
    as the config last applied them. Returns the number of nodes changed."""
    from apps.fleet.models import Node

    from .config import NodeMatch, server_type_for_hostname
    from .models import ServerTypeRule

    rules = (
        ServerTypeRule.objects.filter(cluster_id=cluster_id).select_related("server_type").order_by("priority", "id")
    )
    patterns = [NodeMatch(match=r.hostname_glob, server_type=r.server_type.name) for r in rules]
    if not patterns:
        return 0
    type_ids = {r.server_type.name: r.server_type_id for r in rules}
    nodes = Node.objects.filter(cluster_id=cluster_id)
    if only_unset:
        nodes = nodes.filter(server_type__isnull=True)
    changed = []
    for node in nodes:
        name = server_type_for_hostname(node.hostname, patterns)
        if name is not None and node.server_type_id != type_ids[name]:
            node.server_type_id = type_ids[name]
            changed.append(node)
    rows_update(changed, ["server_type"])
    return len(changed)


_TEAM_DAYS_SQL = """
WITH rows AS (
    SELECT j.team_id, n.cluster_id, (jh.hour AT TIME ZONE 'UTC')::date AS day, jh.job_id, jh.gpu_id, jh.hour,
           jh.energy_j, jh.occupancy_s, jh.facility_kwh, COALESCE(jh.operational_kg, 0) AS operational_kg,
           jh.embodied_kg, jh.cost
    FROM jobs_jobgpuhour jh
    JOIN jobs_job j ON j.id = jh.job_id
    JOIN fleet_gpu g ON g.id = jh.gpu_id
    JOIN fleet_node n ON n.id = g.node_id
    WHERE n.cluster_id = ANY(%(clusters)s) AND (jh.hour AT TIME ZONE 'UTC')::date = ANY(%(days)s)
      AND NOT j.excluded_from_bill
), methods AS (
    SELECT r.team_id, r.cluster_id, r.day, e.method, SUM(e.energy_j) AS energy_j
    FROM rows r JOIN jobs_jobgpuhourenergy e ON e.job_id = r.job_id AND e.gpu_id = r.gpu_id AND e.hour = r.hour
    GROUP BY r.team_id, r.cluster_id, r.day, e.method
)
INSERT INTO carbon_teamday (team_id, cluster_id, day, energy_j, occupancy_s, facility_kwh, operational_kg,
                            embodied_kg, cost, energy_by_method_j)
SELECT r.team_id, r.cluster_id, r.day, SUM(r.energy_j), SUM(r.occupancy_s), SUM(r.facility_kwh),
       SUM(r.operational_kg), SUM(r.embodied_kg), SUM(r.cost),
       COALESCE((SELECT jsonb_object_agg(m.method, m.energy_j) FROM methods m
                 WHERE m.team_id = r.team_id AND m.cluster_id = r.cluster_id AND m.day = r.day), '{}'::jsonb)
FROM rows r
GROUP BY r.team_id, r.cluster_id, r.day
"""


def team_days_refresh(*, cluster_ids: Iterable[int], days: Iterable[date]) -> None:
    """Rebuild the teams' daily sums of these clusters and days from the job-GPU-hour rows."""
    clusters, wanted = sorted(set(cluster_ids)), sorted(set(days))
    if not clusters or not wanted:
        return
    TeamDay.objects.filter(cluster_id__in=clusters, day__in=wanted).delete()
    with connection.cursor() as cursor:
        cursor.execute(_TEAM_DAYS_SQL, {"clusters": clusters, "days": wanted})
    transaction.on_commit(rollups_invalidate)
    rollups_invalidate()  # now too: a reader inside this transaction must not see the old figures


def job_team_days_refresh(*, job: Job) -> None:
    """After a decision moved or excluded a job: the days and clusters it ran in."""
    pairs = set(JobGpuHour.objects.filter(job=job).values_list("gpu__node__cluster_id", "hour").order_by())
    team_days_refresh(cluster_ids={c for c, _ in pairs}, days={h.astimezone(UTC).date() for _, h in pairs})
