"""Writes of the carbon app: its inputs (hourly grid intensity, nodes' server types, jobs' groups) and the figures
they give (footprints per job-GPU-hour, the idle line per GPU-hour, per-job sums). The fleet config that names
sites, server types, GPU models and job groups is written by apps.config.

Each function does one thing and triggers nothing: apps.pipeline calls them in order after an input
changed, and each is a function of the current rows and settings (safe to run again). Importing the same
file twice changes nothing the second time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Avg
from django.db.models.functions import ExtractMonth, ExtractYear

from apps.core import locks
from apps.core.db.bulk import columns_update, rows_update
from apps.core.units.footprint import S_PER_HOUR, Footprint
from apps.fleet.models import Cluster, Gpu, Node
from apps.jobs.models import Job, JobGpuHour
from apps.jobs.summary import JobGpuTotals
from apps.telemetry.models import GpuHour

from .arithmetic import HOUR, HourFactors, footprint, intensity_fill, shift_saving_kg, tdp_estimate_j
from .hourly_import import header_problems, rows_problems
from .intensity import IntensityError, IntensityRow
from .models import GpuModel, IntensityHour, JobGroup, ServerTypeRule, Site
from .node_types import NodeMatch, NodeTypesReport, server_type_for_hostname

JOB_FOOTPRINT_FIELDS = [
    "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost", "currency", "intensity_source",
    "intensity_basis", "intensity_estimated", "shift_saving_kg", "tdp_estimate_j",
]  # fmt: skip
ROW_FIELDS = [
    "server_kwh", "facility_kwh", "intensity_kg_per_kwh", "intensity_estimated", "operational_kg", "embodied_kg",
    "cost",
]  # fmt: skip
IDLE_FIELDS = ["idle_facility_kwh", "idle_operational_kg", "idle_embodied_kg", "idle_cost"]
# The part of the idle line nobody saw, within it.
UNSEEN_FIELDS = [
    "unseen_j", "unseen_s", "unseen_facility_kwh", "unseen_operational_kg", "unseen_embodied_kg", "unseen_cost",
]  # fmt: skip


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

    def factors(self, node: Node, gpu_model: str, hour: datetime) -> HourFactors:
        """An hour's factors for a GPU of `gpu_model` in `node` (its cluster's site and server type loaded)."""
        site: Site | None = node.cluster.site
        server = node.server_type
        model = self._gpu_models.get(gpu_model)
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


@dataclass
class FootprintRefresh:
    """What footprints_refresh recomputed: for the steps after it."""

    gpu_hours: int = 0
    job_ids: set[int] = field(default_factory=set)  # jobs with a row in the window
    cluster_days: set[tuple[int, date]] = field(default_factory=set)  # (cluster, UTC day) of the rows and hours
    book: FactorBook | None = None  # the factors used, with their intensity sources


def footprints_refresh(
    *, cluster_ids: list[int] | None = None, start: datetime | None = None, end: datetime | None = None
) -> FootprintRefresh:
    """Recompute the footprint of every job-GPU-hour row and the idle line of every GPU-hour in
    [start, end) of the given clusters (default: all)."""
    gpu_hours = GpuHour.objects.all()
    job_rows = JobGpuHour.objects.all()
    if cluster_ids is not None:
        gpu_hours = gpu_hours.filter(gpu__node__cluster_id__in=cluster_ids)
        job_rows = job_rows.filter(gpu__node__cluster_id__in=cluster_ids)
    if start is not None:
        gpu_hours, job_rows = gpu_hours.filter(hour__gte=start), job_rows.filter(hour__gte=start)
    if end is not None:
        gpu_hours, job_rows = gpu_hours.filter(hour__lt=end), job_rows.filter(hour__lt=end)
    # Plain tuples, not model instances: thousands of rows per cluster-hour.
    hour_columns = ("pk", "gpu_id", "hour", "device_energy_j", "jobs_energy_j", "estimated_j", "occupied_s",
                    "estimated_s", "unobserved_j", "unobserved_s")  # fmt: skip
    hours = list(gpu_hours.values_list(*hour_columns))
    rows = list(job_rows.values_list("pk", "gpu_id", "job_id", "hour", "energy_j", "occupancy_s"))
    if not hours and not rows:
        return FootprintRefresh()
    lo = min([h[2] for h in hours] + [r[3] for r in rows])
    hi = max([h[2] for h in hours] + [r[3] for r in rows]) + HOUR
    book = FactorBook(start=lo, end=hi)
    # Factors depend on a GPU's node (site, server type) and model: looked up once per node, model and hour,
    # from the few nodes loaded once, not from a chain of related objects per row.
    gpu_ids = {h[1] for h in hours} | {r[1] for r in rows}
    gpu_of = {
        pk: (node_id, model)
        for pk, node_id, model in Gpu.objects.filter(pk__any=gpu_ids).values_list("pk", "node_id", "model_name")
    }
    nodes = Node.objects.select_related("cluster__site", "server_type").in_bulk({n for n, _ in gpu_of.values()})
    factors: dict[tuple[int, str, datetime], HourFactors] = {}

    def factors_for(gpu_id: int, hour: datetime) -> HourFactors:
        node_id, model = gpu_of[gpu_id]
        key = (node_id, model, hour)
        if key not in factors:
            factors[key] = book.factors(nodes[node_id], model, hour)
        return factors[key]

    row_columns: dict[str, list[Any]] = {name: [] for name in ROW_FIELDS}
    for _, gpu_id, _, hour, energy_j, occupancy_s in rows:
        f = factors_for(gpu_id, hour)
        fp = footprint(energy_j=energy_j, gpu_hours=occupancy_s / S_PER_HOUR, factors=f)
        row_columns["server_kwh"].append(fp.server_kwh)
        row_columns["facility_kwh"].append(fp.facility_kwh)
        row_columns["intensity_kg_per_kwh"].append(f.intensity_kg_per_kwh)
        row_columns["intensity_estimated"].append(f.intensity_estimated)
        row_columns["operational_kg"].append(fp.operational_kg)
        row_columns["embodied_kg"].append(fp.embodied_kg)
        row_columns["cost"].append(fp.cost)
    columns_update(JobGpuHour, [r[0] for r in rows], row_columns, partition_key=("hour", [r[3] for r in rows]))

    idle_columns: dict[str, list[Any]] = {name: [] for name in IDLE_FIELDS + UNSEEN_FIELDS}
    for _, gpu_id, hour, device_j, jobs_j, estimated_j, occupied_s, estimated_s, unobserved_j, unobserved_s in hours:
        # The idle line: energy outside every job, and the part of the GPU-hour no job occupied; time nobody
        # saw that the scheduler charged to jobs (estimated_*) is theirs, the rest of it stays here.
        f = factors_for(gpu_id, hour)
        unoccupied_h = max(0.0, S_PER_HOUR - occupied_s - estimated_s) / S_PER_HOUR
        idle_j = max(0.0, device_j - jobs_j - estimated_j)
        fp = footprint(energy_j=idle_j, gpu_hours=unoccupied_h, factors=f)
        idle_columns["idle_facility_kwh"].append(fp.facility_kwh)
        idle_columns["idle_operational_kg"].append(fp.operational_kg)
        idle_columns["idle_embodied_kg"].append(fp.embodied_kg)
        idle_columns["idle_cost"].append(fp.cost)
        # Its part nobody saw: unobserved energy and time no estimate charged to a job (the rest of the line the
        # agent saw, with no job on the GPU).
        unseen_j = min(idle_j, max(0.0, unobserved_j - estimated_j))
        unseen_h = min(unoccupied_h, max(0.0, unobserved_s - estimated_s) / S_PER_HOUR)
        unseen = footprint(energy_j=unseen_j, gpu_hours=unseen_h, factors=f)
        idle_columns["unseen_j"].append(unseen_j)
        idle_columns["unseen_s"].append(unseen_h * S_PER_HOUR)
        idle_columns["unseen_facility_kwh"].append(unseen.facility_kwh)
        idle_columns["unseen_operational_kg"].append(unseen.operational_kg)
        idle_columns["unseen_embodied_kg"].append(unseen.embodied_kg)
        idle_columns["unseen_cost"].append(unseen.cost)
    columns_update(GpuHour, [h[0] for h in hours], idle_columns, partition_key=("hour", [h[2] for h in hours]))
    cluster_of_node = {pk: node.cluster_id for pk, node in nodes.items()}
    # The days of the GPU-hours too: a day no job ran on still has its idle line to sum.
    moments = [(r[1], r[3]) for r in rows] + [(h[1], h[2]) for h in hours]
    return FootprintRefresh(
        gpu_hours=len(hours),
        job_ids={r[2] for r in rows},
        cluster_days={(cluster_of_node[gpu_of[gpu_id][0]], hour.astimezone(UTC).date()) for gpu_id, hour in moments},
        book=book,
    )


def jobs_footprint_sum(
    *, jobs: Sequence[Job], totals: Mapping[int, Sequence[JobGpuTotals]], book: FactorBook | None = None
) -> None:
    """A job's footprint is the sum of its rows' (per-GPU totals); its intensity source and basis those
    of its site; its carbon-shift hint where its group is flexible. In place on `jobs` (their site and
    group loaded); stored by the pipeline with the run's other job figures (JOB_FOOTPRINT_FIELDS)."""
    if not jobs:
        return
    deadline_h = settings.FLEETWATT_SHIFT_DEADLINE_H
    tdp_by_gpu = _gpus_tdp_w({t.gpu_id for per_gpu in totals.values() for t in per_gpu})
    for job in jobs:
        per_gpu = totals.get(job.pk, [])
        job.tdp_estimate_j = tdp_estimate_j([(t.occupancy_s, tdp_by_gpu.get(t.gpu_id)) for t in per_gpu])
        total = Footprint.total(t.footprint for t in per_gpu)
        site = job.cluster.site
        job.server_kwh = total.server_kwh
        job.facility_kwh = total.facility_kwh
        job.operational_kg = total.operational_kg
        job.embodied_kg = total.embodied_kg
        job.cost = total.cost
        job.currency = site.currency if site else ""
        job.intensity_basis = site.intensity_basis if site and site.grid_zone else ""
        sources = sorted(book.sources.get((site.grid_zone, site.intensity_basis), set())) if book and site else []
        job.intensity_source = ", ".join(sources) or (job.intensity_source if job.intensity_basis else "")
        job.intensity_estimated = any(t.intensity_estimated for t in per_gpu)
        job.shift_saving_kg = None
        if job.job_group and job.job_group.flexible and site and site.grid_zone and per_gpu:
            job.shift_saving_kg = _shift_hint(job, site, deadline_h)


def _gpus_tdp_w(gpu_ids: set[int]) -> dict[int, float]:
    """{GPU id: its model's TDP (W)} for the GPUs whose model the fleet config names."""
    tdp = dict(GpuModel.objects.values_list("name", "tdp_w"))
    models = Gpu.objects.filter(pk__in=sorted(gpu_ids)).values_list("pk", "model_name")
    return {pk: tdp[name] for pk, name in models if name in tdp}


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
        case JobGroup.MatchKind.GROUP_KEY:
            return bool(job.group_key) and job.group_key == group.match_value
    return False


def job_groups_assign(
    *, cluster_ids: Iterable[int] | None = None, job_ids: Iterable[int] | None = None
) -> dict[int, int]:
    """Set each job's group from the groups' match rules (the first group by name that matches), except
    where an admin set it. Returns {job id: cluster id} of the jobs whose group changed."""
    groups = list(JobGroup.objects.order_by("name"))
    jobs = Job.objects.all()
    if cluster_ids is not None:
        jobs = jobs.filter(cluster_id__in=list(cluster_ids))
    if job_ids is not None:
        jobs = jobs.filter(pk__any=list(job_ids))
    if not groups:  # no group to match: only a job that still holds one changes (to none)
        jobs = jobs.filter(job_group__isnull=False)
    changed = []
    fields = ("pk", "cluster_id", "account", "name", "namespace", "user", "group_key", "job_group_id")
    for job in jobs.filter(group_locked=False).only(*fields):
        group = next((g for g in groups if _group_matches(g, job)), None)
        group_id = group.pk if group else None
        if job.job_group_id != group_id:
            job.job_group_id = group_id
            changed.append(job)
    rows_update(changed, ["job_group"])
    return {job.pk: job.cluster_id for job in changed}


def node_server_types_apply(*, cluster_id: int, only_unset: bool = False) -> NodeTypesReport:
    """Set the server type of the cluster's nodes from its stored hostname rules (the first glob that
    matches, in priority order); nodes no rule matches keep theirs. `only_unset`: only nodes without one
    (the ingest, for nodes it has just met). Safe to run again."""
    rules = (
        ServerTypeRule.objects.filter(cluster_id=cluster_id).select_related("server_type").order_by("priority", "id")
    )
    patterns = [NodeMatch(match=r.hostname_glob, server_type=r.server_type.name) for r in rules]
    report = NodeTypesReport()
    if not patterns:
        return report
    type_ids = {r.server_type.name: r.server_type_id for r in rules}
    nodes = Node.objects.filter(cluster_id=cluster_id)
    if only_unset:
        nodes = nodes.filter(server_type__isnull=True)
    to_set: dict[int, list[int]] = defaultdict(list)
    for node_id, hostname, current in nodes.values_list("id", "hostname", "server_type_id"):
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
    refresh_window: tuple[datetime, datetime] | None = None  # None with clusters to refresh: all their hours
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


@dataclass(frozen=True)
class IntensityReach:
    """The clusters and hours whose footprints changed intensity hours reach (window None: all hours)."""

    cluster_ids: list[int]
    window: tuple[datetime, datetime] | None


def intensity_reach(
    *, zone: str, basis: str, changed_hours: Collection[datetime], months_flipped: bool
) -> IntensityReach:
    """The footprints the changed hours of (zone, basis) reach under the fill rule (docs/config.md):
    the hours themselves, hours filled from them (within FLEETWATT_INTENSITY_FILL_HOURS), and hours filled
    with the monthly mean of their months: so whole months, widened by the fill distance. When a month
    gains its first figures or loses its last, hours of other months filled from the nearest month's mean
    may change too: then every hour of the zone's clusters."""
    cluster_ids = sorted(
        Cluster.objects.filter(site__grid_zone=zone, site__intensity_basis=basis).values_list("id", flat=True)
    )
    if not cluster_ids or not changed_hours:
        return IntensityReach(cluster_ids=[], window=None)
    if months_flipped:
        return IntensityReach(cluster_ids=cluster_ids, window=None)
    fill = timedelta(hours=settings.FLEETWATT_INTENSITY_FILL_HOURS)
    start = _month_start(min(changed_hours) - fill)
    end = _next_month(max(changed_hours) + fill)
    return IntensityReach(cluster_ids=cluster_ids, window=(start, end))


def intensity_write(
    *, rows: Sequence[IntensityRow], zone: str, source: str, basis: str, allow_unknown_zone: bool = False
) -> ImportReport:
    """Store hourly intensity of one zone and basis, in one transaction: an hour already stored is replaced
    (the latest import wins); the report says which footprints that reaches. Raises IntensityError, having
    written nothing, if the zone is used by no site (unless allowed) or the rows are not one per hour."""
    problems = header_problems(zone=zone, basis=basis, source=source, source_example="Electricity Maps 2024 v1")
    row_problems, first = rows_problems(rows, zone=zone, allow_unknown_zone=allow_unknown_zone)
    problems += row_problems
    if problems:
        raise IntensityError(problems)

    hours = sorted(first)
    report = ImportReport(
        zone=zone, basis=basis, source=source, rows=len(rows), first_hour=hours[0], last_hour=hours[-1]
    )
    report.missing_hours = int((hours[-1] - hours[0]) / HOUR) + 1 - len(hours)
    with transaction.atomic():
        with connection.cursor() as cursor:  # one import of a zone and basis at a time
            lock = locks.INTENSITY.format(zone=zone, basis=basis)
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [lock])
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
        reach = intensity_reach(
            zone=zone, basis=basis, changed_hours=changed, months_flipped=months_before != months and bool(changed)
        )
        report.refreshed_cluster_ids, report.refresh_window = reach.cluster_ids, reach.window
    return report


def intensity_delete(*, hours: models.QuerySet[IntensityHour]) -> tuple[int, list[IntensityReach]]:
    """Delete stored intensity hours (the admin's delete); returns how many, and the footprints they reached."""
    by_zone: dict[tuple[str, str], list[datetime]] = defaultdict(list)
    for zone, basis, hour in hours.values_list("zone", "basis", "hour"):
        by_zone[(zone, basis)].append(hour)
    deleted, _ = hours.delete()
    reaches = []
    for (zone, basis), changed in by_zone.items():
        months = _months(changed)
        reaches.append(
            intensity_reach(
                zone=zone,
                basis=basis,
                changed_hours=changed,
                months_flipped=_months_with_figures(zone, basis, months) != months,
            )
        )
    return deleted, reaches
