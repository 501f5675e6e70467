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
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.aggregates import ArrayAgg
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Case, CharField, Count, DateTimeField, F, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Cast, TruncDay, TruncMonth, TruncWeek

from apps.carbon.models import JobGroup
from apps.core.kept import kept_or_computed, rollup_key
from apps.core.metrics import ROLLUP_CACHE
from apps.core.services import metric_count
from apps.core.units.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS, footprint_sums, numeric_sums
from apps.core.units.footprint import FOOTPRINT_COLUMNS, S_PER_HOUR, Footprint, kwh
from apps.core.units.money import (
    DEFAULT_EXPONENT,
    MINOR_EXPONENTS,
    from_minor_units,
    minor_exponent,
    minor_units,
    round_minor,
    split_rounded,
)
from apps.fleet.models import Cluster, Team, team_scoped
from apps.jobs.models import ExpiredJobDay, Job, JobGpuHour, JobGpuHourEnergy, JobQuerySet, days_reach
from apps.jobs.states import OUTCOMES
from apps.jobs.uncertainty import NO_BAND
from apps.telemetry.models import GpuHour
from apps.waste.kinds import FlagKind
from apps.waste.selectors import period_waste, team_counted_flags

from .bands import band_joins
from .models import ClusterDay, JobGroupDay, TeamDay, TeamWasteDay

# The footprint columns a day's sums keep (they have no server energy).
DAY_SUM_COLUMNS = ("energy_j", "occupancy_s", "facility_kwh", "operational_kg", "embodied_kg", "cost")
TRUNC = {"day": TruncDay, "week": TruncWeek, "month": TruncMonth}


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


def _period_key(value: datetime | date) -> str:
    return (value.date() if isinstance(value, datetime) else value).isoformat()


def _bases(clusters: QuerySet[Cluster]) -> tuple[str, list[str], str]:
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
        key = _period_key(r["period"])
        out[key] = Period(period=key, footprint=Footprint.from_sums(r))
    return out


def _methods(energy: QuerySet[JobGpuHourEnergy], trunc: Any, periods: dict[str, Period]) -> None:
    for r in energy.annotate(period=trunc("hour")).values("period", "method").annotate(j=Sum("energy_j")).order_by():
        key = _period_key(r["period"])
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
            parts = {_period_key(period): (below, above) for period, below, above in cursor.fetchall()}
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
        lines[_period_key(r["period"])] = IdleLine(idle=_idle_footprint(r), unseen=_unseen_footprint(r))
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
        key = _period_of(r["day"], granularity)
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


def _whole_days(start: datetime, end: datetime) -> tuple[date, date] | None:
    """[start, end) as UTC days, where both are midnights (UTC): what daily sums can answer."""
    first, after = start.astimezone(UTC), end.astimezone(UTC)
    if first.time() != time(0) or after.time() != time(0):
        return None
    return first.date(), after.date()


def team_rollup(*, team: Team, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """The team's jobs per period (jobs an admin excluded are not on its bill): whole UTC days from its daily
    sums, any other range (a week in a site's time zone) from its rows in [start, end) exactly, as the
    cluster's and the job group's; with FLEETWATT_IDLE_SHARED_TO_TEAMS, also its share of each cluster's idle
    line, in proportion to its GPU-hours there."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    if _whole_days(start, end) is not None:
        days = TeamDay.objects.filter(team=team, day__gte=start.date(), day__lt=day_after(end))
        basis, zones, currency = _bases(Cluster.objects.filter(pk__in=days.values("cluster")))
        periods = _day_periods(days, granularity)
    else:
        trunc = TRUNC[granularity]
        rows = JobGpuHour.objects.filter(_team_billed(team), hour__gte=start, hour__lt=end)
        basis, zones, currency = _bases(Cluster.objects.filter(pk__in=rows.values("gpu__node__cluster")))
        periods = _sum_rows(rows, trunc)
        energy = JobGpuHourEnergy.objects.filter(_team_billed(team), hour__gte=start, hour__lt=end)
        _methods(energy, trunc, periods)
        _bands(energy, trunc, periods, start=start, end=end)
    if settings.FLEETWATT_IDLE_SHARED_TO_TEAMS:
        _share_idle(team=team, start=start, end=end, trunc=TRUNC[granularity], periods=periods)
    _waste_add(team=team, start=start, end=end, granularity=granularity, periods=periods)
    return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)


def _waste_add(*, team: Team, start: datetime, end: datetime, granularity: str, periods: dict[str, Period]) -> None:
    """The team's waste in each period: period_waste over [start, end) (its counted findings' rows there, each
    GPU-hour once), its UTC days added up per period as TRUNC groups the rows; zero in a period without any."""
    whole = _whole_days(start, end)
    if whole is not None:  # the stored days (apps.rollups.services.team_waste_days_refresh): what period_waste gives
        stored = TeamWasteDay.objects.filter(team=team, day__gte=whole[0], day__lt=whole[1]).order_by("day")
        per_day = [(day.day, day.footprint()) for day in stored]
    else:
        found = period_waste(flags=team_counted_flags(team=team, start=start, end=end), start=start, end=end)
        per_day = sorted(found.per_day.items())
    for p in periods.values():
        p.waste = Footprint()
    for day, part in per_day:
        key = _period_of(day, granularity)
        p = periods.setdefault(key, Period(period=key, waste=Footprint()))
        p.waste = (p.waste or Footprint()) + part


def teams_with_waste_on(*, days: Collection[date]) -> set[int]:
    """The teams with waste stored on any of these UTC days (TeamWasteDay)."""
    if not days:
        return set()
    return set(
        TeamWasteDay.objects.filter(day__in=sorted(days)).values_list("team_id", flat=True).distinct().order_by()
    )


def _team_billed(team: Team) -> Q:
    """A filter of job rows (JobGpuHour, JobGpuHourEnergy, ExpiredJobDay) to those on the team's bill."""
    return Q(job__team=team, job__excluded_from_bill=False)


def day_after(end: datetime) -> date:
    """The first day not in [.., end): end's own day when end is midnight, else the next one."""
    day = end.astimezone(UTC).date()
    return day if end.astimezone(UTC).time() == time(0) else day + timedelta(days=1)


def _share_idle(*, team: Team, start: datetime, end: datetime, trunc: Any, periods: dict[str, Period]) -> None:
    window = JobGpuHour.objects.filter(hour__gte=start, hour__lt=end)
    used: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: {"team": 0.0, "all": 0.0})
    for r in (
        window.annotate(period=trunc("hour"), cluster=F("gpu__node__cluster"))
        .values("period", "cluster")
        .annotate(all=Sum("occupancy_s"), team=Sum("occupancy_s", filter=Q(job__team=team)))
        .order_by()
    ):
        used[(_period_key(r["period"]), r["cluster"])] = {"team": r["team"] or 0.0, "all": r["all"] or 0.0}
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
    if not _expired_days(Q(cluster__in=clusters), since, until).exists():
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
    days = _group_days(group, start, end)
    if days is not None:
        basis, zones, currency = _bases(Cluster.objects.filter(pk__in=days.values("cluster")))
        periods = _day_periods(days, granularity)
        return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)
    trunc = TRUNC[granularity]
    rows = JobGpuHour.objects.filter(job__job_group=group, hour__gte=start, hour__lt=end)
    basis, zones, currency = _bases(Cluster.objects.filter(pk__in=rows.values("gpu__node__cluster")))
    periods = _sum_rows(rows, trunc)
    energy = JobGpuHourEnergy.objects.filter(job__job_group=group, hour__gte=start, hour__lt=end)
    _methods(energy, trunc, periods)
    _bands(energy, trunc, periods, start=start, end=end)
    return _document(periods, basis=basis, zones=zones, currency=currency, granularity=granularity)


def _group_days(group: JobGroup, start: datetime, end: datetime) -> QuerySet[JobGroupDay] | None:
    """The group's daily sums of [start, end), where they answer it: whole UTC days, none past retention (whose
    hour rows are gone: a range over them reads what is left, as before the daily sums)."""
    days = _whole_days(start, end)
    if days is None or _expired_days(Q(job__job_group=group), start, end).exists():
        return None
    return JobGroupDay.objects.filter(job_group=group, day__gte=days[0], day__lt=days[1])


def _cluster_days(cluster: Cluster, start: datetime, end: datetime) -> QuerySet[ClusterDay] | None:
    """The cluster's daily sums of [start, end), where they answer it (as _group_days)."""
    days = _whole_days(start, end)
    if days is None or _expired_days(Q(cluster=cluster), start, end).exists():
        return None
    return ClusterDay.objects.filter(cluster=cluster, day__gte=days[0], day__lt=days[1])


def cluster_rollup(*, cluster: Cluster, start: datetime, end: datetime, granularity: str) -> dict[str, Any]:
    """The cluster's jobs and its idle line per period, and embodied CO2e per useful GPU-hour. Whole UTC days
    from its daily sums (ClusterDay), past retention excepted; other ranges from its rows."""
    trunc = TRUNC[granularity]
    basis, zones, currency = _bases(Cluster.objects.filter(pk=cluster.pk))
    days = _cluster_days(cluster, start, end)
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
    """A rollup period's figure set (`_figures`, as kept in the cache) as a footprint."""
    if not figures:
        return Footprint()
    return Footprint(
        energy_j=figures["energy_j"], gpu_hours=figures["gpu_hours"], facility_kwh=figures["facility_kwh"],
        operational_kg=figures["operational_kg"], embodied_kg=figures["embodied_kg"], cost=Decimal(figures["cost"]),
    )  # fmt: skip


def _figures_kwh(fp: Footprint) -> dict[str, Any]:
    """A footprint's figures with GPU kWh and CO2e (operational and embodied) beside them, as pages show them."""
    return {**_figures(fp), "energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg}


def _figures(fp: Footprint) -> dict[str, Any]:
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
                **_figures(p.footprint),
                "energy_by_method_j": dict(sorted(p.energy_by_method_j.items())),
                "idle": _figures(p.idle) if p.idle is not None else None,
                # The part of `idle` nobody saw (idle seen with no job = idle - unobserved).
                "unobserved": _figures(p.unobserved or Footprint()) if p.idle is not None else None,
                "waste": _figures(p.waste) if p.waste is not None else None,
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


# --- money as finance tools book it: each job's cost rounded, periods the sums of those (docs/api.md) ------


# Each job's cost per period (the ORM query below: from its job-GPU-hours and its days past retention, added up),
# counted per job: a job within one period (nearly all) is rounded here and summed per period in the database; a job
# across periods comes back part by part for split_rounded. Rows: (NULL, period, units) for the jobs within one
# period, (job_id, period, cost) for each part of the others.
_JOB_COSTS_MINOR_SQL = f"""
WITH per AS ({{per_job}}),
counted AS (SELECT job_id, period, COALESCE(c, 0) AS c, count(*) OVER (PARTITION BY job_id) AS periods FROM per),
single AS (SELECT period, (c * 1000000)::bigint AS m, %s::bigint AS d FROM counted WHERE periods = 1),
floored AS (SELECT period, d, {HALF_EVEN_QR} FROM single)
SELECT NULL::bigint, period, SUM({HALF_EVEN_UNITS}) FROM floored GROUP BY period
UNION ALL
SELECT job_id, period, c FROM counted WHERE periods > 1
"""

# Each job's cost over the period with its team and currency (the ORM query below: hours and days past retention,
# added up), rounded in the job's currency (its exponent from the codes passed, DEFAULT_EXPONENT for any other) and
# summed per team and exponent.
_TEAM_COSTS_MINOR_SQL = f"""
WITH per AS ({{per_job}}),
single AS (
    SELECT per.team_name, COALESCE(x.e, %s) AS e, (COALESCE(per.c, 0) * 1000000)::bigint AS m,
           power(10, 6 - COALESCE(x.e, %s))::bigint AS d
    FROM per LEFT JOIN unnest(%s::text[], %s::int[]) AS x(code, e) ON x.code = upper(trim(per.job_currency))
),
floored AS (SELECT team_name, e, d, {HALF_EVEN_QR} FROM single)
SELECT team_name, e, SUM({HALF_EVEN_UNITS}) FROM floored GROUP BY team_name, e
"""


def _job_costs_minor(
    rows: QuerySet[JobGpuHour], expired: QuerySet[ExpiredJobDay], trunc: Any, currency: str
) -> dict[str, Decimal]:
    """Per period, the sum of its jobs' costs in the currency's minor unit: each job's cost over the rows is
    rounded half-even, and split over the periods it ran in by largest remainder (apps.core.units.money), so a
    job's parts add up to its rounded cost and the periods to the sum of the jobs' rounded costs. Jobs within one
    period are rounded and summed in the database (a team's year is 10^5 jobs; one query either way). `expired`:
    the same jobs' days whose hour rows were dropped past retention (`_expired_days`)."""
    exponent = minor_exponent(currency)
    hours = rows.annotate(period=trunc("hour")).values("job_id", "period").annotate(c=Sum("cost"))
    day_start = Cast("day", DateTimeField())
    days = expired.annotate(period=trunc(day_start)).values("job_id", "period").annotate(c=Sum("cost"))
    out: dict[str, Decimal] = defaultdict(Decimal)
    split: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for job_id, period, amount in _per_job_sums(
        _JOB_COSTS_MINOR_SQL, "job_id, period", hours, expired, days, [10 ** (6 - exponent)]
    ):
        if job_id is None:
            out[_period_key(period)] += from_minor_units(amount, exponent)
        else:
            split[job_id][_period_key(period)] = Decimal(amount)
    for parts in split.values():
        for key, amount in split_rounded(parts, currency).items():
            out[key] += amount
    return dict(out)


def _per_job_sums(
    template: str,
    keys: str,
    hours: QuerySet[Any],
    expired: QuerySet[ExpiredJobDay],
    days: QuerySet[Any],
    params: list[Any],
) -> list[tuple[Any, ...]]:
    """The rows of `template`, whose `{per_job}` is each job's cost `c` per `keys` from `hours` (job-GPU-hours)
    added up with `days` (the same from `expired`, the days past retention), with `params` after the query's own.
    The union and its second sum only when `expired` has a day: most ranges are past no retention. Nothing when a
    filter can match nothing (no team to see)."""
    try:
        if expired.exists():
            union, inner = hours.order_by().union(days.order_by(), all=True).query.sql_with_params()
            sql = f"SELECT {keys}, SUM(c) AS c FROM ({union}) AS parts GROUP BY {keys}"
        else:
            sql, inner = hours.order_by().query.sql_with_params()
    except EmptyResultSet:
        return []
    with connection.cursor() as cursor:
        cursor.execute(template.replace("{per_job}", sql), [*inner, *params])
        return cursor.fetchall()


def _expired_days(jobs: Q, start: datetime, end: datetime) -> QuerySet[ExpiredJobDay]:
    """The jobs' days (`jobs`: a filter of ExpiredJobDay) whose hour rows were dropped past retention, those wholly
    within [start, end) (an expired day is kept whole, so a range that cuts one leaves it out, as its hours)."""
    first, after = start.astimezone(UTC), end.astimezone(UTC).date()
    first_day = first.date() if first.time() == time(0) else first.date() + timedelta(days=1)
    return ExpiredJobDay.objects.filter(jobs, day__gte=first_day, day__lt=after)


def team_job_costs_minor(
    *, team: Team, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """team_rollup's job cost per period in minor units (jobs excluded from the bill left out): whole UTC days
    from its daily sums, any other range from its rows in [start, end), as team_rollup."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    billed = _team_billed(team)
    days = None
    if _whole_days(start, end) is not None:
        days = TeamDay.objects.filter(team=team, day__gte=start.date(), day__lt=day_after(end))
    return _costs_minor(
        days, Job.objects.filter(team=team, excluded_from_bill=False),
        rows=billed, expired=billed, start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def _costs_minor(
    days: QuerySet[Any] | None, jobs: JobQuerySet, *, rows: Q, expired: Q, start: datetime, end: datetime,
    granularity: str, currency: str,
) -> dict[str, Decimal]:  # fmt: skip
    """_job_costs_minor of a rollup's jobs (`jobs`; `rows` and `expired`: the same as filters of their job-GPU-hours
    and of their days past retention) over [start, end): from the daily sums `days` where they answer it (None:
    they do not), else every job from its rows."""
    out = None
    if days is not None:
        out = _costs_minor_from_days(days, jobs, first=start, after=end, granularity=granularity, currency=currency)
    if out is None:
        hours = JobGpuHour.objects.filter(rows, hour__gte=start, hour__lt=end)
        out = _job_costs_minor(hours, _expired_days(expired, start, end), TRUNC[granularity], currency)
    return out


def _costs_minor_from_days(
    days: QuerySet[Any], jobs: JobQuerySet, *, first: datetime, after: datetime, granularity: str, currency: str
) -> dict[str, Decimal] | None:
    """_job_costs_minor of `jobs` over whole days [first, after): those within one day from the daily sums
    `days` (cost_units), those across days from their rows. None where a day's sum is not known or is in
    another minor unit than `currency`'s (then every job is read from its rows)."""
    exponent = minor_exponent(currency)
    within = _within_day_units(days)
    if within is None or any(e not in (None, exponent) for *_, e in within):
        return None
    across = _jobs_across_days(jobs, first, after)
    rows = JobGpuHour.objects.filter(across, hour__gte=first, hour__lt=after)
    out = defaultdict(Decimal, _job_costs_minor(rows, _expired_days(across, first, after), TRUNC[granularity],
                                                currency))  # fmt: skip
    for _, day, units, _ in within:
        out[_period_of(day, granularity)] += from_minor_units(units, exponent)
    return dict(out)


def _jobs_across_days(jobs: JobQuerySet, first: datetime, after: datetime) -> Q:
    """A filter of rows to those of the jobs across days in [first, after): their ids read first (few; an array,
    whose length the planner knows, where a subquery of a team list had it read every row of the range)."""
    return Q(job_id__any=list(jobs.across_days(first.date(), after.date()).values_list("pk", flat=True)))


def _within_day_units(days: QuerySet[Any], *, label: str = "pk") -> list[tuple[Any, date, int, int | None]] | None:
    """The days' rounded costs of their jobs within one day, (label, day, units, exponent) per daily sum (`label`:
    a field of it, e.g. its team's name); None where one day's is not known (a job there has no days recorded)
    or in more than one minor unit."""
    rows = list(days.values_list(label, "day", "cost_units", "units_exponent").order_by())
    known = [(name, day, units, e) for name, day, units, e in rows if units is not None and e != -1]
    return known if len(known) == len(rows) else None


def _period_of(day: date, granularity: str) -> str:
    """The period a UTC day is in, as TRUNC gives it: the day, its week's Monday or its month's first."""
    if granularity == "week":
        day -= timedelta(days=day.weekday())
    elif granularity == "month":
        day = day.replace(day=1)
    return day.isoformat()


def cluster_job_costs_minor(
    *, cluster: Cluster, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """cluster_rollup's job cost per period in minor units (from its daily sums where they answer the range)."""
    return _costs_minor(
        _cluster_days(cluster, start, end), Job.objects.filter(cluster=cluster), rows=Q(gpu__node__cluster=cluster),
        expired=Q(cluster=cluster), start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def job_group_job_costs_minor(
    *, group: JobGroup, start: datetime, end: datetime, granularity: str, currency: str
) -> dict[str, Decimal]:
    """job_group_rollup's job cost per period in minor units (from its daily sums where they answer the range)."""
    return _costs_minor(
        _group_days(group, start, end), Job.objects.filter(job_group=group), rows=Q(job__job_group=group),
        expired=Q(job__job_group=group), start=start, end=end, granularity=granularity, currency=currency,
    )  # fmt: skip


def team_totals_costs_minor(*, user: User, start: datetime, end: datetime) -> dict[str, Decimal]:
    """team_totals' cost per team name in minor units: the sum of its jobs' costs over the period (whole UTC
    days, jobs excluded from the bill left out), each rounded half-even in its currency: the jobs within one day
    from the teams' daily sums (TeamDay.cost_units), those across days from their rows in one query; every job
    from its rows where a day's sum is not known."""
    first = datetime.combine(start.astimezone(UTC).date(), time(0), tzinfo=UTC)
    after = datetime.combine(day_after(end), time(0), tzinfo=UTC)
    teams = Team.objects.visible_to(user)
    team_days = TeamDay.objects.filter(team__in=teams, day__gte=first.date(), day__lt=after.date())
    within = _within_day_units(team_days, label="team__name")
    if within is None:
        billed = Q(job__team__in=teams, job__excluded_from_bill=False)
    else:
        billed = _jobs_across_days(Job.objects.filter(team__in=teams, excluded_from_bill=False), first, after)
    expired = _expired_days(billed, first, after)
    hours, days = (
        rows.values("job_id")
        .annotate(team_name=F("job__team__name"), job_currency=F("job__currency"), c=Sum("cost"))
        .values("job_id", "team_name", "job_currency", "c")
        for rows in (JobGpuHour.objects.filter(billed, hour__gte=first, hour__lt=after), expired)
    )
    codes = sorted(MINOR_EXPONENTS)
    params = [DEFAULT_EXPONENT, DEFAULT_EXPONENT, codes, [MINOR_EXPONENTS[c] for c in codes]]
    out: dict[str, Decimal] = defaultdict(Decimal)
    keys = "job_id, team_name, job_currency"
    for team_name, exponent, units in _per_job_sums(_TEAM_COSTS_MINOR_SQL, keys, hours, expired, days, params):
        out[team_name] += from_minor_units(units, exponent)
    for team_name, _, units, exponent in within or ():
        if exponent is not None:
            out[team_name] += from_minor_units(units, exponent)
    return dict(out)


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


User = AbstractBaseUser | AnonymousUser


def team_daily_energy(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """GPU energy per whole UTC day, team and split method (J, and kWh beside it), for the teams the user may
    see: from the teams' daily sums, as their rollups, so jobs an admin excluded from a team's bill are not on it."""
    per_key: dict[tuple[str, str, str], float] = defaultdict(float)
    days = TeamDay.objects.filter(
        team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=day_after(end)
    ).values_list("day", "team__name", "energy_by_method_j")
    for day, team, by_method in days:
        for method, joules in by_method.items():
            per_key[(day.isoformat(), team, method)] += joules
    return [
        {"day": day, "team": team, "method": method, "energy_j": joules, "energy_kwh": kwh(joules)}
        for (day, team, method), joules in sorted(per_key.items())
    ]


def team_totals(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Each team the user may see, side by side over the period (whole UTC days, as its rollup): GPU-hours,
    energy, cost and CO2e, from the teams' daily sums in one read. A team whose days span sites on different
    intensity bases is left out (its rollup refuses to mix them)."""
    days = TeamDay.objects.filter(team__in=Team.objects.visible_to(user), day__gte=start.date(), day__lt=day_after(end))
    sums = {
        r["team_id"]: r for r in days.values("team_id").annotate(**footprint_sums(columns=DAY_SUM_COLUMNS)).order_by()
    }
    bases: dict[int, set[str]] = defaultdict(set)
    currencies: dict[int, set[str]] = defaultdict(set)  # as the team's rollup names its `currency` (_bases)
    zoned = days.filter(cluster__site__isnull=False).exclude(cluster__site__grid_zone="")
    site = ("team_id", "cluster__site__intensity_basis", "cluster__site__currency")
    for team_id, basis, currency in zoned.values_list(*site).distinct().order_by():
        bases[team_id].add(basis)
        currencies[team_id].add(currency)
    out = []
    teams = Team.objects.filter(pk__in=list(sums)).order_by("name").values_list("pk", "name", "display_name")
    for team_id, name, display_name in teams:
        if len(bases[team_id]) > 1:
            continue
        total = Footprint.from_sums(sums[team_id])
        out.append(
            {
                "team": name,
                "display_name": display_name or name,
                "currency": ",".join(sorted(currencies[team_id])),
                "gpu_hours": total.gpu_hours,
                "energy_j": total.energy_j,
                "facility_kwh": total.facility_kwh,
                "operational_kg": total.operational_kg or 0.0,
                "embodied_kg": total.embodied_kg,
                "cost": str(total.cost),
            }
        )
    return out


def teams_compared(*, user: User, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """team_totals with kWh beside J and each team's cost in minor units (`cost`: the sum of its jobs' rounded
    costs, as its rollup's `totals.cost` over the same days) beside the exact one (`cost_exact`), as text. After
    them (issue 35, for finance's CSV): the team's display name and currency, the days summed (`period_start`,
    `period_end`, exclusive) and the cost as a whole number of the currency's minor units (`cost_minor`)."""
    teams = team_totals(user=user, start=start, end=end)
    minor = team_totals_costs_minor(user=user, start=start, end=end)
    first, after = start.astimezone(UTC).date(), day_after(end)
    out = []
    for t in teams:
        names = {"display_name": t.pop("display_name"), "currency": t.pop("currency")}
        cost = minor.get(t["team"], Decimal("0.00"))
        out.append(
            {
                **t,
                "energy_kwh": kwh(t["energy_j"]),
                "cost": str(cost),
                "cost_exact": t["cost"],
                **names,
                "period_start": first.isoformat(),
                "period_end": after.isoformat(),
                "cost_minor": minor_units(cost, names["currency"]),
            }
        )
    return out


# --- what a job group's runs came to: delivered, failed, stopped --------------------------------------------


def _outcome_figures(fp: Footprint, jobs: int) -> dict[str, Any]:
    return {"jobs": jobs, **_figures(fp), "energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg}


def _outcome_case() -> Case:
    """A job-GPU-hour's outcome key (OUTCOMES) from its job's state."""
    return Case(
        *[When(job__state__in=[s.value for s in info.states], then=Value(key)) for key, info in OUTCOMES.items()],
        default=Value("other"),
        output_field=CharField(),
    )


# Job groups' runs by outcome from each run's sums (`{per_run}`: per group, outcome and job, its rows' footprint
# columns as exact decimals and their clusters): per group and outcome the runs, their sums read as floats (the same
# to the last bit as summed from the rows at once), each run's cost (rounded in Python, in the currency of the rows'
# sites) and, on every row, the clusters of all the rows.
_OUTCOME_SUMS_SQL = """
WITH per_run AS ({per_run})
SELECT "job__job_group", outcome, count(*) AS run_count, {sums}, array_agg(cost) AS run_costs,
       (SELECT array_agg(DISTINCT c) FROM per_run, unnest(per_run.clusters) AS c) AS clusters
FROM per_run GROUP BY "job__job_group", outcome
"""


@dataclass(frozen=True)
class OutcomeSums:
    """Job groups' runs of a period by outcome (OUTCOMES), read once: per (group id, outcome) the runs' count and
    footprint sums (`sums`: a row for Footprint.from_sums, with `run_count`) and each run's cost (`run_costs`), and
    the clusters of their rows (whose sites give the intensity basis and the currency)."""

    sums: dict[tuple[int, str], dict[str, Any]]
    run_costs: dict[tuple[int, str], list[Decimal]]
    clusters: list[int]

    def costs_minor(self, currency: str) -> dict[tuple[int, str], Decimal]:
        """Per (group id, outcome): the sum of its runs' costs, each rounded half-even in `currency`."""
        return {
            key: sum((round_minor(c, currency) for c in costs), Decimal(0)) for key, costs in self.run_costs.items()
        }


def job_groups_outcome_sums(*, user: User, start: datetime, end: datetime, groups: Iterable[int]) -> OutcomeSums:
    """The groups' runs (jobs the user may see: a member, their teams' only) with job-GPU-hours in [start, end), by
    outcome, from one read of those rows (each run summed, then the runs)."""
    # Only the jobs whose days reach into the period can have rows in it: the groups' jobs of the period come by
    # index (job_group_team_last_day), not every job of the groups.
    days = days_reach(start=start, end=end, path="job__")
    rows = team_scoped(
        JobGpuHour.objects.filter(days, hour__gte=start, hour__lt=end, job__job_group__in=list(groups)), user,
        team_path="job__team",
    )  # fmt: skip
    per_run = (
        rows.annotate(outcome=_outcome_case())
        .values("job__job_group", "outcome", "job_id")
        .annotate(clusters=ArrayAgg("gpu__node__cluster", distinct=True), **numeric_sums())
        .order_by()
    )
    columns = ", ".join(
        "SUM(cost) AS cost" if name == "cost" else f"SUM({name})::float8 AS {name}" for name in FOOTPRINT_COLUMNS
    )
    try:
        inner, params = per_run.query.sql_with_params()
    except EmptyResultSet:  # no team to see
        return OutcomeSums({}, {}, [])
    with connection.cursor() as cursor:
        cursor.execute(_OUTCOME_SUMS_SQL.format(per_run=inner, sums=columns), params)
        names = [c.name for c in cursor.description]
        found = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    return OutcomeSums(
        sums={(r["job__job_group"], r["outcome"]): r for r in found},
        run_costs={(r["job__job_group"], r["outcome"]): [c or Decimal(0) for c in r["run_costs"]] for r in found},
        clusters=sorted(found[0]["clusters"]) if found else [],
    )


def job_group_outcome_costs_minor(
    *, user: User, start: datetime, end: datetime, group: JobGroup, currency: str
) -> dict[str, Decimal]:
    """job_group_outcomes' cost per outcome of one group in minor units: the sum of its runs' costs in the
    period (of the jobs the user may see), each rounded half-even, in one query."""
    costs = job_groups_outcome_costs_minor(user=user, start=start, end=end, groups=[group.pk], currency=currency)
    return {outcome: cost for (_, outcome), cost in costs.items()}


def job_groups_outcome_costs_minor(
    *, user: User, start: datetime, end: datetime, groups: list[int], currency: str
) -> dict[tuple[int, str], Decimal]:
    """job_group_outcome_costs_minor of several groups (their ids) at once, per (group id, outcome), in one query."""
    return job_groups_outcome_sums(user=user, start=start, end=end, groups=groups).costs_minor(currency)


def job_group_outcomes(
    *, user: User, start: datetime, end: datetime, groups: QuerySet[JobGroup] | None = None
) -> dict[str, Any]:
    """Each job group's runs of [start, end) split by how they ended (OUTCOMES): GPU-hours, energy, CO2e and
    cost of the completed runs, the failed ones, the cancelled or preempted ones and those still running or of
    unknown state; "what the delivered model cost, failures included". Summed from the job-GPU-hours in the
    period (as the group's rollup), of the jobs the user may see (a member: their teams' runs only), in one
    aggregate query; every group of `groups` (default: all) is listed, with zeros where it had no run."""
    return job_group_outcomes_booked(user=user, start=start, end=end, groups=groups)[0]


def job_group_outcomes_booked(
    *, user: User, start: datetime, end: datetime, groups: QuerySet[JobGroup] | None = None
) -> tuple[dict[str, Any], dict[tuple[int, str], Decimal]]:
    """job_group_outcomes, and each group's cost per outcome in minor units as job_groups_outcome_costs_minor
    books it in the document's currency, from the same read of the rows."""
    groups = (groups if groups is not None else JobGroup.objects.all()).order_by("name")
    listed = list(groups)
    found = job_groups_outcome_sums(user=user, start=start, end=end, groups=[g.pk for g in listed])
    basis, zones, currency = _bases(Cluster.objects.filter(pk__in=found.clusters))
    out = []
    for group in listed:
        split, total, total_jobs = [], Footprint(), 0
        for key, info in OUTCOMES.items():
            row = found.sums.get((group.pk, key), {})
            fp, jobs = Footprint.from_sums(row), row.get("run_count", 0)
            split.append({"outcome": key, "label": info.label, **_outcome_figures(fp, jobs)})
            total, total_jobs = total + fp, total_jobs + jobs
        failed_cost = next(o["cost"] for o in split if o["outcome"] == "failed")
        out.append(
            {
                "id": group.pk,
                "name": group.name,
                "outcomes": split,
                "total": _outcome_figures(total, total_jobs),
                "failed_cost_share": float(failed_cost / total.cost) if total.cost else None,
            }
        )
    doc = {"currency": currency, "intensity_basis": basis, "intensity_zones": zones, "groups": out}
    return doc, found.costs_minor(currency)


# --- failed runs, as the pages show them ------------------------------------------------------------------


def failed_run_jobs(*, user: User, start: datetime, end: datetime, team: Team | None = None) -> JobQuerySet:
    """The failed runs the user may see among the jobs that ran in [start, end) (as the dashboards pick them:
    started before its end, seen since its start): jobs with a `failed_run` finding, whatever its review,
    costliest first. Their figures are the whole run's, as the finding's evidence."""
    jobs = Job.objects.visible_to(user).filter(start__lt=end).seen_since(start)
    if team is not None:
        jobs = jobs.filter(team=team)
    return jobs.filter(flag_rows__kind=FlagKind.FAILED_RUN).order_by("-cost", "id")


# A job's own footprint columns (its rows' sums, stored on it: GPU-hours rather than occupancy seconds).
JOB_FOOTPRINT_COLUMNS = ("energy_j", "gpu_hours", "facility_kwh", "operational_kg", "embodied_kg", "cost")


def failed_run_totals(*, user: User, start: datetime, end: datetime, team: Team | None = None) -> list[dict[str, Any]]:
    """The failed runs of `failed_run_jobs` summed per team (and currency), in one aggregate query: runs,
    GPU-hours, GPU and facility energy, CO2e; and cost, the sum of the runs' rounded costs (as /api/jobs/ shows
    each), from their costs read in a second query."""
    failed = failed_run_jobs(user=user, start=start, end=end, team=team)
    billed: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    for team_id, currency, cost in failed.values_list("team_id", "currency", "cost").order_by():
        billed[(team_id, currency)] += round_minor(cost, currency)
    rows = (
        failed.values("team_id", "team__name", "currency")
        .annotate(
            runs=Count("id"),
            **footprint_sums(columns=JOB_FOOTPRINT_COLUMNS),
        )
        .order_by("team__name", "currency")
    )
    out = []
    for r in rows:
        fp = Footprint.from_sums(r)
        out.append(
            {"team_id": r["team_id"], "team": r["team__name"], "currency": r["currency"], "runs": r["runs"]}
            | _figures(fp)
            | {"energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg, "cost": billed[(r["team_id"], r["currency"])]}
        )
    return out
