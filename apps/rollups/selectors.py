"""Rollups of energy, cost and carbon per team, cluster and job group over a period (sums in the database),
kept rendered in the cache until their data changes.

A cluster's rollup is its jobs plus its idle line (energy outside jobs, GPU-hours no job occupied), so
the two add up to the cluster's whole footprint, to the joule and the cent. Each idle line comes with the part
of it nobody saw (`unobserved`: energy and time of agent gaps no estimate charged to a job), so that the idle
seen (GPUs the agent saw with no job) is idle - unobserved.

A team's rollup also carries its waste per period (`waste`): its counted findings' job rows inside the period, a
GPU-hour two findings share counted once, read through apps.waste.selectors.period_waste as the team page, the
weekly report and the audit queue read it.

Every period's jobs' energy comes with its interval (`energy_low_j`, `energy_high_j`; docs/accuracy.md, "Sums"): its
rows' lows and highs added up, exact rows as they are (apps.rollups.bands), from the daily sums or the rows as the
rest of the period."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDay

from apps.carbon.models import JobGroup
from apps.core.kept import kept_or_computed, rollup_key
from apps.core.metrics import ROLLUP_CACHE
from apps.core.services import metric_count
from apps.core.units.aggregates import footprint_sums
from apps.core.units.footprint import S_PER_HOUR, Footprint
from apps.fleet.models import Cluster, Team
from apps.jobs.models import JobGpuHour, JobGpuHourEnergy
from apps.jobs.uncertainty import NO_BAND
from apps.telemetry.models import GpuHour
from apps.waste.selectors import period_waste, team_counted_flags

from .bands import band_joins
from .models import ClusterDay, TeamDay, TeamWasteDay
from .ranges import (
    DAY_SUM_COLUMNS,
    TRUNC,
    cluster_day_sums,
    day_after,
    expired_days,
    group_day_sums,
    period_key,
    period_of,
    team_billed,
    whole_days,
)


class MixedBasisError(ValueError):
    """A rollup would add operational CO2e computed on different intensity bases."""


@dataclass
class Period:
    """One period of a rollup: the jobs' footprint, their energy by split method, the idle line and the part
    of it nobody saw (`unobserved`, set with `idle`), and a team's waste (None in other rollups)."""

    period: str
    footprint: Footprint = field(default_factory=Footprint)
    energy_by_method_j: dict[str, float] = field(default_factory=dict)
    idle: Footprint | None = None
    unobserved: Footprint | None = None
    waste: Footprint | None = None
    # The interval of footprint.energy_j (low = high = energy where every row is exact); None where a day's is not
    # known (stored before the daily sums had it, its rows since past retention).
    energy_low_j: float | None = 0.0
    energy_high_j: float | None = 0.0

    def idle_add(self, line: IdleLine) -> None:
        """Add an idle line (a cluster's, or a team's share of one) to the period's."""
        self.idle = line.idle if self.idle is None else self.idle + line.idle
        self.unobserved = line.unseen if self.unobserved is None else self.unobserved + line.unseen


@dataclass(frozen=True)
class IdleLine:
    """An idle line (energy outside jobs over the GPU-hours no job occupied) and the part of it nobody saw."""

    idle: Footprint
    unseen: Footprint

    def scaled(self, share: float) -> IdleLine:
        return IdleLine(idle=self.idle.scaled(share), unseen=self.unseen.scaled(share))

    @classmethod
    def total(cls, lines: Iterable[IdleLine]) -> IdleLine:
        lines = list(lines)
        return cls(idle=Footprint.total(x.idle for x in lines), unseen=Footprint.total(x.unseen for x in lines))


def clusters_basis(clusters: QuerySet[Cluster]) -> tuple[str, list[str], str]:
    sites = {c.site for c in clusters.select_related("site") if c.site and c.site.grid_zone}
    bases = {s.intensity_basis for s in sites}
    if len(bases) > 1:
        raise MixedBasisError(
            f"The period covers sites on {' and '.join(sorted(bases))} intensity bases; ask for one cluster."
        )
    currencies = {s.currency for s in sites}
    return (next(iter(bases)) if bases else ""), sorted(s.grid_zone for s in sites), ",".join(sorted(currencies))


def _sum_rows(rows: QuerySet[JobGpuHour], trunc: Any) -> dict[str, Period]:
    out: dict[str, Period] = {}
    for r in rows.annotate(period=trunc("hour")).values("period").annotate(**footprint_sums()).order_by("period"):
        key = period_key(r["period"])
        out[key] = Period(period=key, footprint=Footprint.from_sums(r))
    return out


def _methods(energy: QuerySet[JobGpuHourEnergy], trunc: Any, periods: dict[str, Period]) -> None:
    for r in energy.annotate(period=trunc("hour")).values("period", "method").annotate(j=Sum("energy_j")).order_by():
        key = period_key(r["period"])
        periods.setdefault(key, Period(period=key)).energy_by_method_j[r["method"]] = r["j"]


def _bands(
    energy: QuerySet[JobGpuHourEnergy], trunc: Any, periods: dict[str, Period], *, start: datetime, end: datetime
) -> None:
    """Each period's energy interval from its rows (`energy`: its job-GPU-hours' energy per method in [start, end)):
    the period's energy less what its rows' intervals reach below it, plus what they reach above (apps.rollups.bands),
    in one query."""
    rows = (
        energy.exclude(method__in=sorted(NO_BAND))
        .annotate(period=trunc("hour"))
        .values("job_id", "gpu_id", "hour", "method", "energy_j", "period")
        .order_by()
    )
    parts: dict[str, tuple[float, float]] = {}
    try:
        inner, params = rows.query.sql_with_params()
    except EmptyResultSet:  # (a filter that can match nothing)
        inner = ""
    if inner:
        sql = f"""SELECT e.period, SUM(band.below_j::numeric)::float8, SUM(band.above_j::numeric)::float8
        FROM ({inner}) AS e {band_joins(energy="e", lo="%s", hi="%s")} GROUP BY e.period"""
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, start, end, start, end])  # (the joins' hour range: band_joins)
            parts = {period_key(period): (below, above) for period, below, above in cursor.fetchall()}
    for key, p in periods.items():
        below, above = parts.get(key, (0.0, 0.0))
        p.energy_low_j, p.energy_high_j = p.footprint.energy_j - below, p.footprint.energy_j + above


def _band_added(total: float | None, day: float | None) -> float | None:
    """A day's interval end added to its period's: not known (None) once one day's is not."""
    return None if total is None or day is None else total + day


def _idle_lines(hours: QuerySet[GpuHour], trunc: Any) -> dict[str, IdleLine]:
    lines: dict[str, IdleLine] = {}
    for r in (
        hours.annotate(period=trunc("hour"))
        .values("period")
        .annotate(
            device_j=Sum("device_energy_j"),
            jobs_j=Sum("jobs_energy_j"),
            estimated_j=Sum("estimated_j"),  # time nobody saw, charged to jobs by the scheduler's word
            gpu_hours_total=Count("id"),
            occupied_s=Sum("occupied_s"),
            estimated_s=Sum("estimated_s"),
            facility_kwh=Sum("idle_facility_kwh"),
            operational_kg=Sum("idle_operational_kg"),
            embodied_kg=Sum("idle_embodied_kg"),
            cost=Sum("idle_cost"),
            **{name: Sum(name) for name in _UNSEEN_SUMS},
        )
        .order_by("period")
    ):
        lines[period_key(r["period"])] = IdleLine(idle=_idle_footprint(r), unseen=_unseen_footprint(r))
    return lines


def _idle_footprint(r: Mapping[str, Any]) -> Footprint:
    """A period's idle line from its GPU-hours' sums: what the GPUs used less what their jobs used and the
    estimates charged, over the GPU-hours nobody was charged for."""
    return Footprint(
        energy_j=(r["device_j"] or 0.0) - (r["jobs_j"] or 0.0) - (r["estimated_j"] or 0.0),
        gpu_hours=max(
            0.0, (r["gpu_hours_total"] or 0.0) - ((r["occupied_s"] or 0.0) + (r["estimated_s"] or 0.0)) / S_PER_HOUR
        ),
        facility_kwh=r["facility_kwh"] or 0.0,
        operational_kg=r["operational_kg"] or 0.0,
        embodied_kg=r["embodied_kg"] or 0.0,
        cost=r["cost"] or Decimal(0),
    )


def _unseen_footprint(r: Mapping[str, Any]) -> Footprint:
    """The part of a period's idle line nobody saw, from its GPU-hours' sums of it (GpuHour.unseen_*)."""
    return Footprint(
        energy_j=r["unseen_j"] or 0.0,
        gpu_hours=(r["unseen_s"] or 0.0) / S_PER_HOUR,
        facility_kwh=r["unseen_facility_kwh"] or 0.0,
        operational_kg=r["unseen_operational_kg"] or 0.0,
        embodied_kg=r["unseen_embodied_kg"] or 0.0,
        cost=r["unseen_cost"] or Decimal(0),
    )


# The GPU-hours' sums of the part nobody saw, as GpuHour and ClusterDay name them.
_UNSEEN_SUMS = (
    "unseen_j", "unseen_s", "unseen_facility_kwh", "unseen_operational_kg", "unseen_embodied_kg", "unseen_cost",
)  # fmt: skip

# A ClusterDay's GPU-hours' sums by the names _idle_footprint and _unseen_footprint read.
_IDLE_SUMS = {
    "device_j": "device_j", "jobs_j": "jobs_j", "estimated_j": "estimated_j", "gpu_hours_total": "gpu_hours_total",
    "occupied_s": "occupied_s", "estimated_s": "estimated_s", "facility_kwh": "idle_facility_kwh",
    "operational_kg": "idle_operational_kg", "embodied_kg": "idle_embodied_kg", "cost": "idle_cost",
    **{name: name for name in _UNSEEN_SUMS},
}  # fmt: skip


# The ClusterDay columns cluster_day_idle_line reads.
CLUSTER_DAY_IDLE_COLUMNS = tuple(_IDLE_SUMS.values())


def cluster_day_idle_line(day_sums: Mapping[str, Any]) -> IdleLine | None:
    """One cluster-day's idle line and the part of it nobody saw, from its ClusterDay columns
    (CLUSTER_DAY_IDLE_COLUMNS by name), as the cluster's daily rollup works them out; None without a GPU-hour
    that day (no idle line, as in the rollup)."""
    if not day_sums["gpu_hours_total"]:
        return None
    named = {name: day_sums[column] for name, column in _IDLE_SUMS.items()}
    return IdleLine(idle=_idle_footprint(named), unseen=_unseen_footprint(named))


def _day_periods(days: QuerySet[Any], granularity: str, *, idle: bool = False) -> dict[str, Period]:
    """Periods from daily sums (TeamDay, ClusterDay, JobGroupDay rows), added up in the order of their days, in
    one read; with `idle` (ClusterDay), each period's idle line worked out from its days' GPU-hours' sums (none
    without a GPU-hour, as from the rows)."""
    periods: dict[str, Period] = {}
    idle_sums: dict[str, dict[str, Any]] = {}
    columns = (*DAY_SUM_COLUMNS, "energy_by_method_j", "energy_low_j", "energy_high_j",
               *(_IDLE_SUMS.values() if idle else ()))  # fmt: skip
    for r in days.order_by("day", "pk").values("day", *columns):
        key = period_of(r["day"], granularity)
        p = periods.setdefault(key, Period(period=key))
        p.footprint += Footprint.from_sums(r)
        p.energy_low_j = _band_added(p.energy_low_j, r["energy_low_j"])
        p.energy_high_j = _band_added(p.energy_high_j, r["energy_high_j"])
        for method, joules in r["energy_by_method_j"].items():
            p.energy_by_method_j[method] = p.energy_by_method_j.get(method, 0.0) + joules
        if idle:
            added = idle_sums.setdefault(key, dict.fromkeys(_IDLE_SUMS, 0))
            for name, column in _IDLE_SUMS.items():
                added[name] += r[column]
    for key, added in idle_sums.items():
        if added["gpu_hours_total"]:
            periods[key].idle_add(IdleLine(idle=_idle_footprint(added), unseen=_unseen_footprint(added)))
    return periods


def team_rollup(*, team: Team, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """The team's jobs per period (jobs an admin excluded are not on its bill): whole UTC days from its daily
    sums, any other range (a week in a site's time zone) from its rows in [start, end) exactly, as the
    cluster's and the job group's; with FLEETWATT_IDLE_SHARED_TO_TEAMS, also its share of each cluster's idle
    line, in proportion to its GPU-hours there."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    if whole_days(start, end) is not None:
        days = TeamDay.objects.filter(team=team, day__gte=start.date(), day__lt=day_after(end))
        basis, zones, currency = clusters_basis(Cluster.objects.filter(pk__in=days.values("cluster")))
        periods = _day_periods(days, granularity)
    else:
        trunc = TRUNC[granularity]
        rows = JobGpuHour.objects.filter(team_billed(team), hour__gte=start, hour__lt=end)
        basis, zones, currency = clusters_basis(Cluster.objects.filter(pk__in=rows.values("gpu__node__cluster")))
        periods = _sum_rows(rows, trunc)
        energy = JobGpuHourEnergy.objects.filter(team_billed(team), hour__gte=start, hour__lt=end)
        _methods(energy, trunc, periods)
        _bands(energy, trunc, periods, start=start, end=end)
    if settings.FLEETWATT_IDLE_SHARED_TO_TEAMS:
        _share_idle(team=team, start=start, end=end, trunc=TRUNC[granularity], periods=periods)
    _waste_add(team=team, start=start, end=end, granularity=granularity, periods=periods)
    return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)


def _waste_add(*, team: Team, start: datetime, end: datetime, granularity: str, periods: dict[str, Period]) -> None:
    """The team's waste in each period: period_waste over [start, end) (its counted findings' rows there, each
    GPU-hour once), its UTC days added up per period as TRUNC groups the rows; zero in a period without any."""
    whole = whole_days(start, end)
    if whole is not None:  # the stored days (apps.rollups.services.team_waste_days_refresh): what period_waste gives
        stored = TeamWasteDay.objects.filter(team=team, day__gte=whole[0], day__lt=whole[1]).order_by("day")
        per_day = [(day.day, day.footprint()) for day in stored]
    else:
        found = period_waste(flags=team_counted_flags(team=team, start=start, end=end), start=start, end=end)
        per_day = sorted(found.per_day.items())
    for p in periods.values():
        p.waste = Footprint()
    for day, part in per_day:
        key = period_of(day, granularity)
        p = periods.setdefault(key, Period(period=key, waste=Footprint()))
        p.waste = (p.waste or Footprint()) + part


def teams_with_waste_on(*, days: Collection[date]) -> set[int]:
    """The teams with waste stored on any of these UTC days (TeamWasteDay)."""
    if not days:
        return set()
    return set(
        TeamWasteDay.objects.filter(day__in=sorted(days)).values_list("team_id", flat=True).distinct().order_by()
    )


def _share_idle(*, team: Team, start: datetime, end: datetime, trunc: Any, periods: dict[str, Period]) -> None:
    window = JobGpuHour.objects.filter(hour__gte=start, hour__lt=end)
    used: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: {"team": 0.0, "all": 0.0})
    for r in (
        window.annotate(period=trunc("hour"), cluster=F("gpu__node__cluster"))
        .values("period", "cluster")
        .annotate(all=Sum("occupancy_s"), team=Sum("occupancy_s", filter=Q(job__team=team)))
        .order_by()
    ):
        used[(period_key(r["period"]), r["cluster"])] = {"team": r["team"] or 0.0, "all": r["all"] or 0.0}
    lines: dict[int, dict[str, IdleLine]] = {}
    for (period, cluster_id), u in used.items():
        if not u["team"] or not u["all"]:
            continue
        if cluster_id not in lines:
            hours = GpuHour.objects.filter(gpu__node__cluster_id=cluster_id, hour__gte=start, hour__lt=end)
            lines[cluster_id] = _idle_lines(hours, trunc)
        idle = lines[cluster_id].get(period)
        if idle is None:
            continue
        periods.setdefault(period, Period(period=period)).idle_add(idle.scaled(u["team"] / u["all"]))


def _idle_lines_of_days(cluster_days: Iterable[Mapping[str, Any]]) -> dict[date, IdleLine]:
    """Each day's idle line over the clusters of `cluster_days` (ClusterDay rows with CLUSTER_DAY_IDLE_COLUMNS), as
    _idle_lines works it out from their GPU-hours per day: the clusters' sums added up, then the line; none on a day
    without a GPU-hour."""
    added: dict[date, dict[str, Any]] = {}
    for r in cluster_days:
        sums = added.setdefault(r["day"], dict.fromkeys(CLUSTER_DAY_IDLE_COLUMNS, 0))
        for column in CLUSTER_DAY_IDLE_COLUMNS:
            sums[column] += r[column]
    return {day: line for day, sums in added.items() if (line := cluster_day_idle_line(sums)) is not None}


def _team_shares_of_days(
    *, team: Team, cluster_days: list[Mapping[str, Any]], start: datetime, end: datetime
) -> list[IdleLine]:
    """_share_idle's shares of [start, end) (whole UTC days) from the daily sums: each cluster-day's idle line in
    proportion to the team's GPU-hours there (its billed jobs' from its TeamDay, its excluded jobs' from their rows:
    few) against all jobs' (the ClusterDay's)."""
    team_s: dict[tuple[date, int], float] = defaultdict(float)
    for day, cluster_id, occupancy_s in TeamDay.objects.filter(
        team=team, day__gte=start.date(), day__lt=end.date()
    ).values_list("day", "cluster_id", "occupancy_s"):
        team_s[(day, cluster_id)] += occupancy_s
    excluded = JobGpuHour.objects.filter(job__team=team, job__excluded_from_bill=True, hour__gte=start, hour__lt=end)
    for r in (
        excluded.annotate(day=TruncDay("hour", tzinfo=UTC), cluster=F("gpu__node__cluster"))
        .values("day", "cluster")
        .annotate(occupancy_s=Sum("occupancy_s"))
        .order_by()
    ):
        team_s[(r["day"].date(), r["cluster"])] += r["occupancy_s"] or 0.0
    shares = []
    for day_sums in cluster_days:
        used = team_s.get((day_sums["day"], day_sums["cluster_id"]), 0.0)
        line = cluster_day_idle_line(day_sums)
        if used and day_sums["occupancy_s"] and line is not None:
            shares.append(line.scaled(used / day_sums["occupancy_s"]))
    return shares


def team_idle(*, team: Team, start: datetime, end: datetime) -> dict[str, Any]:
    """The idle line a team sees next to its own figures (OpenCost's share-idle semantics, docs/arithmetic.md):
    with FLEETWATT_IDLE_SHARED_TO_TEAMS, its share of each cluster's idle line, day by day in proportion to its
    GPU-hours there (the `idle` of its rollup's periods, summed: on its bill); otherwise the whole idle line
    of the clusters it ran on (the fleet's, shared by all their teams: on nobody's bill). Whole UTC days, as
    team_rollup."""
    shared = bool(settings.FLEETWATT_IDLE_SHARED_TO_TEAMS)
    days = TeamDay.objects.filter(team=team, day__gte=start.date(), day__lt=day_after(end))
    clusters = list(Cluster.objects.filter(pk__in=days.values("cluster")).order_by("name"))
    since = datetime.combine(start.astimezone(UTC).date(), time(0), tzinfo=UTC)
    until = datetime.combine(day_after(end), time(0), tzinfo=UTC)
    # The clusters' daily sums answer it (as their rollups), unless a day's hour rows are past retention.
    cluster_days = None
    if not expired_days(Q(cluster__in=clusters), since, until).exists():
        cluster_days = list(
            ClusterDay.objects.filter(cluster__in=clusters, day__gte=since.date(), day__lt=until.date())
            .order_by("day", "cluster_id")
            .values("cluster_id", "day", "occupancy_s", *CLUSTER_DAY_IDLE_COLUMNS)
        )
    if cluster_days is not None:
        fleet = IdleLine.total(_idle_lines_of_days(cluster_days).values())
    else:
        hours = GpuHour.objects.filter(gpu__node__cluster__in=clusters, hour__gte=since, hour__lt=until)
        fleet = IdleLine.total(_idle_lines(hours, TRUNC["day"]).values())
    if shared:  # the team's rollup's own shares (kept in the cache): the page and the API agree to the cent
        doc = team_rollup_cached(team=team, start=since, end=until, granularity="day")
        share = IdleLine.total(
            IdleLine(idle=_from_figures(p["idle"]), unseen=_from_figures(p["unobserved"]))
            for p in doc["periods"]
            if p["idle"]
        )
    elif cluster_days is not None:  # its share by GPU-hours as sharing would book it, on nobody's bill: by days
        share = IdleLine.total(_team_shares_of_days(team=team, cluster_days=cluster_days, start=since, end=until))
    else:  # the same from the rows
        periods: dict[str, Period] = {}
        _share_idle(team=team, start=since, end=until, trunc=TRUNC["day"], periods=periods)
        share = IdleLine.total(
            IdleLine(idle=p.idle, unseen=p.unobserved or Footprint()) for p in periods.values() if p.idle is not None
        )

    def figures(line: IdleLine) -> dict[str, Any]:
        # The whole line as before, and its two parts apart: seen with no job, and nobody saw.
        return {**_figures_kwh(line.idle), "seen": _figures_kwh(line.idle - line.unseen),
                "unseen": _figures_kwh(line.unseen)}  # fmt: skip

    # The line the team reads (its share where the site shares idle, else the fleet's), and both beside it.
    return {"shared": shared, "clusters": [c.name for c in clusters], **figures(share if shared else fleet),
            "share": figures(share), "fleet": figures(fleet)}  # fmt: skip


def job_group_rollup(*, group: JobGroup, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """A campaign's or model's runs per period, failed and abandoned ones included: the delivered
    model's footprint with its sweeps. Whole UTC days from its daily sums (JobGroupDay), past retention
    excepted; other ranges from its rows."""
    days = group_day_sums(group, start, end)
    if days is not None:
        basis, zones, currency = clusters_basis(Cluster.objects.filter(pk__in=days.values("cluster")))
        periods = _day_periods(days, granularity)
        return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)
    trunc = TRUNC[granularity]
    rows = JobGpuHour.objects.filter(job__job_group=group, hour__gte=start, hour__lt=end)
    basis, zones, currency = clusters_basis(Cluster.objects.filter(pk__in=rows.values("gpu__node__cluster")))
    periods = _sum_rows(rows, trunc)
    energy = JobGpuHourEnergy.objects.filter(job__job_group=group, hour__gte=start, hour__lt=end)
    _methods(energy, trunc, periods)
    _bands(energy, trunc, periods, start=start, end=end)
    return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)


def cluster_rollup(*, cluster: Cluster, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """The cluster's jobs and its idle line per period, and embodied CO2e per useful GPU-hour. Whole UTC days
    from its daily sums (ClusterDay), past retention excepted; other ranges from its rows."""
    trunc = TRUNC[granularity]
    basis, zones, currency = clusters_basis(Cluster.objects.filter(pk=cluster.pk))
    days = cluster_day_sums(cluster, start, end)
    if days is not None:
        periods = _day_periods(days, granularity, idle=True)
    else:
        rows = JobGpuHour.objects.filter(gpu__node__cluster=cluster, hour__gte=start, hour__lt=end)
        periods = _sum_rows(rows, trunc)
        energy = JobGpuHourEnergy.objects.filter(gpu__node__cluster=cluster, hour__gte=start, hour__lt=end)
        _methods(energy, trunc, periods)
        _bands(energy, trunc, periods, start=start, end=end)
        hours = GpuHour.objects.filter(gpu__node__cluster=cluster, hour__gte=start, hour__lt=end)
        for key, idle in _idle_lines(hours, trunc).items():
            periods.setdefault(key, Period(period=key)).idle_add(idle)
    doc = _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)
    useful = sum(p["gpu_hours"] for p in doc["periods"])
    embodied = sum(p["embodied_kg"] + (p["idle"] or {}).get("embodied_kg", 0.0) for p in doc["periods"])
    doc["embodied_kg_per_useful_gpu_hour"] = embodied / useful if useful else None
    return doc


def _from_figures(figures: Mapping[str, Any] | None) -> Footprint:
    """A rollup period's figure set (`period_figures`, as kept in the cache) as a footprint."""
    if not figures:
        return Footprint()
    return Footprint(
        energy_j=figures["energy_j"], gpu_hours=figures["gpu_hours"], facility_kwh=figures["facility_kwh"],
        operational_kg=figures["operational_kg"], embodied_kg=figures["embodied_kg"], cost=Decimal(figures["cost"]),
    )  # fmt: skip


def _figures_kwh(fp: Footprint) -> dict[str, Any]:
    """A footprint's figures with GPU kWh and CO2e (operational and embodied) beside them, as pages show them."""
    return {**period_figures(fp), "energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg}


def period_figures(fp: Footprint) -> dict[str, Any]:
    """A footprint as a rollup period shows it (operational CO2e 0 where unknown, as sums in SQL)."""
    return {
        "energy_j": fp.energy_j,
        "gpu_hours": fp.gpu_hours,
        "facility_kwh": fp.facility_kwh,
        "operational_kg": fp.operational_kg or 0.0,
        "embodied_kg": fp.embodied_kg,
        "cost": fp.cost,
    }


def _document(
    periods: dict[str, Period], *, basis: str, zones: list[str], currency: str, granularity: str
) -> dict[str, Any]:
    out = []
    for key in sorted(periods):
        p = periods[key]
        out.append(
            {
                "period": p.period,
                **period_figures(p.footprint),
                "energy_by_method_j": dict(sorted(p.energy_by_method_j.items())),
                "idle": period_figures(p.idle) if p.idle is not None else None,
                # The part of `idle` nobody saw (idle seen with no job = idle - unobserved).
                "unobserved": period_figures(p.unobserved or Footprint()) if p.idle is not None else None,
                "waste": period_figures(p.waste) if p.waste is not None else None,
                "energy_low_j": p.energy_low_j,
                "energy_high_j": p.energy_high_j,
            }
        )
    return {
        "granularity": granularity,
        "currency": currency,
        "intensity_basis": basis,
        "intensity_zones": zones,
        "periods": out,
    }


ROLLUP_CACHE_SECONDS = 24 * 3600


def rollup_kept(key: str, compute: Callable[[], Any]) -> Any:
    """What `compute` gives, kept under `key` until the next change of the data it sums (apps.core.kept), for at
    most ROLLUP_CACHE_SECONDS."""
    kept = kept_or_computed(key, compute, ROLLUP_CACHE_SECONDS)
    metric_count(metric=ROLLUP_CACHE, labels=[kept.outcome])
    return kept.value


def team_rollup_cache_key(*, team: Team, start: datetime, end: datetime, granularity: str) -> str:
    return rollup_key("team", team.pk, start, end, granularity)


def cluster_rollup_cache_key(*, cluster: Cluster, start: datetime, end: datetime, granularity: str) -> str:
    return rollup_key("cluster", cluster.pk, start, end, granularity)


def job_group_rollup_cache_key(*, group: JobGroup, start: datetime, end: datetime, granularity: str) -> str:
    return rollup_key("job_group", group.pk, start, end, granularity)


def team_rollup_cached(*, team: Team, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """team_rollup, kept in the cache until the next change of the data it sums (dashboards ask for the
    same periods again and again between two ingests)."""
    key = team_rollup_cache_key(team=team, start=start, end=end, granularity=granularity)
    return rollup_kept(key, lambda: team_rollup(team=team, start=start, end=end, granularity=granularity))


def cluster_rollup_cached(*, cluster: Cluster, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """cluster_rollup, kept like team_rollup_cached (ingests and footprint refreshes change its data)."""
    key = cluster_rollup_cache_key(cluster=cluster, start=start, end=end, granularity=granularity)
    return rollup_kept(key, lambda: cluster_rollup(cluster=cluster, start=start, end=end, granularity=granularity))
