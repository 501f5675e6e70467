"""What a weekly report says: the team's numbers of record for the week (apps.rollups.selectors.team_rollup)
and the week before, its waste from the findings, the five worst jobs, the intensity's source and basis.

Reads only. The result is plain data (dataclasses), turned into a JSON-able document for the templates
and the archive by `report_document`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDay
from django.urls import NoReverseMatch, reverse

from apps.carbon.models import IntensityHour, Site
from apps.carbon.when_selectors import hour_floor, team_when_to_run
from apps.core.units.footprint import Footprint
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job, JobGpuHour
from apps.rollups.cost_selectors import team_job_costs_minor
from apps.rollups.selectors import MixedBasisError, cluster_rollup, team_rollup
from apps.waste import kinds as waste_kinds
from apps.waste.advice import finding_advice
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste

from .models import WeeklyReport
from .schedule import day_windows, week_label, week_window, zone

# Waste kinds counted in the waste total, with their line's label (apps.waste.kinds).
WASTE_KINDS: list[tuple[str, str]] = [(k, k.info.report_label) for k in waste_kinds.WASTE_KINDS]
LOW_COVERAGE_LABEL = "Low-coverage jobs"
# An admin's acknowledgement says the finding was expected (a debugging session): not waste to report. The
# statuses counted everywhere waste is (apps.waste.selectors.counted_flags).
REPORTED_STATUSES = waste_kinds.COUNTED_STATUSES


@dataclass
class Change:
    metric: str
    now: float
    before: float
    delta: float
    pct: float | None  # None where last week was zero


@dataclass
class WasteLine:
    kind: str
    label: str
    jobs: int
    totals: Footprint
    counted: bool = True  # in the waste total (low coverage is shown, not counted)
    mean_coverage: float | None = None


@dataclass
class WorstJob:
    id: int
    job_key: str
    name: str
    user: str
    kinds: list[str]
    totals: Footprint
    path: str
    url: str
    advice: list[str] = field(default_factory=list)  # what to do about each finding (apps.waste.advice)


@dataclass
class DayBar:
    label: str
    gpu_hours: float
    waste_gpu_hours: float
    cost: Decimal
    busy_pct: int  # bar widths, in % of the busiest day; they add up to 100 with rest_pct
    waste_pct: int
    rest_pct: int


@dataclass
class WhenLine:
    """A flexible job group's when-to-run hint as of the week's end, and its hints kept in the week against the
    intensity that came (apps.carbon.when_selectors)."""

    group: str
    zone: str
    text: str  # the hint ("" where the group did not run in the last weeks)
    forecast_source: str
    run_length_h: int | None
    run_facility_kwh: float | None
    hints: int = 0  # hints kept in the week
    checked: int = 0  # of them, those whose intensity has come
    claimed_kg: float = 0.0
    real_kg: float = 0.0
    runs: int = 0  # the week's runs of the group with a measured shift saving
    measured_shift_kg: float | None = None


@dataclass
class TeamReport:
    team_id: int
    team_name: str
    team_label: str
    week_start: date
    week_label: str
    time_zone: str
    start: datetime
    end: datetime
    currency: str
    intensity_basis: str
    intensity_zones: list[str]
    intensity_sources: list[str]
    estimated_gpu_hours: float
    week: Footprint
    previous: Footprint
    changes: list[Change]
    waste: list[WasteLine]
    waste_total: Footprint
    waste_cost_pct: float | None
    worst_jobs: list[WorstJob]
    days: list[DayBar]
    idle_share: Footprint | None = None
    archive_path: str = ""
    when_to_run: list[WhenLine] = field(default_factory=list)
    when_made_at: str = ""  # the UTC hour the hints look forward from (the week's end), "YYYY-MM-DD HH:MM"
    when_deadline_h: int | None = None  # FLEETWATT_SHIFT_DEADLINE_H


@dataclass
class FleetTeamLine:
    team_id: int
    team_name: str
    team_label: str
    week: Footprint | None
    waste_total: Footprint | None
    currency: str
    intensity_basis: str
    error: str = ""


@dataclass
class FleetSummary:
    week_start: date
    week_label: str
    time_zone: str
    start: datetime
    end: datetime
    teams: list[FleetTeamLine]
    total: Footprint | None  # None where teams differ in currency or intensity basis (never mixed)
    idle: Footprint  # the clusters' whole idle line: its two parts below added up
    currency: str
    intensity_basis: str
    in_doubt: int = 0
    notes: list[str] = field(default_factory=list)
    idle_seen: Footprint = field(default_factory=Footprint)  # GPUs the agent saw with no job
    unseen: Footprint = field(default_factory=Footprint)  # energy and time nobody saw, charged to no job


def job_path(job_id: int) -> str:
    """The job's page (the dashboard's, where it exists)."""
    try:
        return reverse("dashboard:job", args=[job_id])
    except NoReverseMatch:
        return f"/jobs/{job_id}/"


def absolute(path: str) -> str:
    return settings.FLEETWATT_BASE_URL.rstrip("/") + path


def team_timezone(team: Team) -> str:
    """The time zone of the site where most of the team's jobs ran; UTC when none has a site."""
    row = (
        Job.objects.filter(team=team, cluster__site__isnull=False)
        .values("cluster__site__timezone")
        .annotate(n=Count("id"))
        .order_by("-n", "cluster__site__timezone")
        .first()
    )
    return row["cluster__site__timezone"] if row else "UTC"


def fleet_timezone() -> str:
    """The time zone of the site with most clusters; UTC when there is none."""
    row = Site.objects.annotate(n=Count("clusters")).order_by("-n", "name").values_list("timezone", flat=True).first()
    return row or "UTC"


def _totals(periods: list[dict[str, Any]]) -> Footprint:
    return Footprint.total(Footprint.from_sums(p) for p in periods)


def _billed(team: Team, start: datetime, end: datetime, rollup: dict[str, Any]) -> Footprint:
    """The week's totals with the cost a finance tool reads from the API for the same days: the sum of the
    team's jobs' costs, each rounded to the currency's minor unit (not the unrounded sum rounded once)."""
    week = _totals(rollup["periods"])
    minor = team_job_costs_minor(team=team, start=start, end=end, granularity="week", currency=rollup["currency"])
    return replace(week, cost=sum(minor.values(), Decimal(0)))


def _idle(periods: list[dict[str, Any]]) -> Footprint | None:
    lines = [p["idle"] for p in periods if p.get("idle")]
    if not lines:
        return None
    return _totals(lines)


def _change(metric: str, now: float, before: float) -> Change:
    pct = (100.0 * (now - before) / before) if before else None
    return Change(metric=metric, now=now, before=before, delta=now - before, pct=pct)


def _team_rows(team: Team, start: datetime, end: datetime) -> QuerySet[JobGpuHour]:
    """The rows team_rollup sums: the team's jobs, less those an admin excluded from its bill."""
    return JobGpuHour.objects.filter(job__team=team, job__excluded_from_bill=False, hour__gte=start, hour__lt=end)


@dataclass
class _Waste:
    lines: list[WasteLine]
    total: Footprint
    per_job: dict[int, tuple[set[str], Footprint]]
    per_day_gpu_hours: dict[date, float]


def _waste(team: Team, start: datetime, end: datetime, tz: ZoneInfo) -> _Waste:
    """The week's waste of the team's jobs on its bill (apps.waste.selectors.period_waste, as the team page and
    the audit queue count it): each finding clipped to the week, a GPU-hour two findings share counted once."""
    kinds = [k for k, _ in WASTE_KINDS] + [Flag.Kind.LOW_COVERAGE]
    flags = Flag.objects.filter(
        kind__in=kinds, status__in=REPORTED_STATUSES, job__team=team, job__excluded_from_bill=False
    )
    found = period_waste(flags=flags, start=start, end=end, tz=tz)
    per_job = {job_id: (found.kinds_of_job[job_id], total) for job_id, total in found.per_job.items()}
    lines = [
        WasteLine(kind=k, label=label, jobs=len(found.jobs_of_kind[k]), totals=found.per_kind[k])
        for k, label in WASTE_KINDS
    ]
    low_ids = found.jobs_of_kind[Flag.Kind.LOW_COVERAGE]
    coverages = list(Job.objects.filter(pk__in=low_ids).values_list("coverage", flat=True))
    lines.append(
        WasteLine(
            kind=Flag.Kind.LOW_COVERAGE,
            label=LOW_COVERAGE_LABEL,
            jobs=len(low_ids),
            totals=found.per_kind[Flag.Kind.LOW_COVERAGE],
            counted=False,
            mean_coverage=(sum(coverages) / len(coverages)) if coverages else None,
        )
    )
    return _Waste(lines=lines, total=found.total, per_job=per_job, per_day_gpu_hours=found.per_day_gpu_hours)


def _worst_jobs(per_job: dict[int, tuple[set[str], Footprint]], limit: int = 5) -> list[WorstJob]:
    ranked = sorted(per_job.items(), key=lambda kv: (-kv[1][1].cost, -kv[1][1].gpu_hours, kv[0]))[:limit]
    jobs = Job.objects.filter(pk__in=[k for k, _ in ranked]).values("id", "job_key", "name", "user", "currency")
    info = {j["id"]: j for j in jobs}
    advice: dict[int, list[str]] = defaultdict(list)
    findings = counted_flags(Flag.objects.filter(job_id__in=info)).order_by("job_id", "kind", "pk")
    for job_id, kind, evidence in findings.values_list("job_id", "kind", "evidence"):
        line = finding_advice(kind, evidence, currency=info[job_id]["currency"])
        if line and line not in advice[job_id]:
            advice[job_id].append(line)
    out = []
    for job_id, (kinds, totals) in ranked:
        path = job_path(job_id)
        j = info[job_id]
        out.append(
            WorstJob(
                id=job_id, job_key=j["job_key"], name=j["name"], user=j["user"], kinds=sorted(kinds),
                totals=totals, path=path, url=absolute(path), advice=advice[job_id],
            )
        )  # fmt: skip
    return out


def _days(team: Team, week_start: date, tz: ZoneInfo, waste_per_day: dict[date, float]) -> list[DayBar]:
    start, end = week_window(week_start, tz)
    used = {
        r["day"].date(): r
        for r in _team_rows(team, start, end)
        .annotate(day=TruncDay("hour", tzinfo=tz))
        .values("day")
        .annotate(occ=Sum("occupancy_s"), cost=Sum("cost"))
        .order_by("day")
    }
    days = []
    peak = max([(r["occ"] or 0.0) / 3600.0 for r in used.values()] + [0.0])
    for day, _s, _e in day_windows(week_start, tz):
        r: Mapping[str, Any] = used.get(day, {})
        gpu_hours = (r.get("occ") or 0.0) / 3600.0
        waste = min(gpu_hours, waste_per_day.get(day, 0.0))
        waste_pct = round(100 * waste / peak) if peak else 0
        total_pct = round(100 * gpu_hours / peak) if peak else 0
        days.append(
            DayBar(
                label=f"{day:%a} {day.day} {day:%b}",
                gpu_hours=gpu_hours,
                waste_gpu_hours=waste,
                cost=r.get("cost") or Decimal(0),
                busy_pct=max(0, total_pct - waste_pct),
                waste_pct=waste_pct,
                rest_pct=100 - max(total_pct, waste_pct),
            )
        )
    return days


def _sources(team: Team, start: datetime, end: datetime, zones: list[str], basis: str) -> list[str]:
    found = set(
        IntensityHour.objects.filter(zone__in=zones, basis=basis, hour__gte=start, hour__lt=end)
        .values_list("source", flat=True)
        .distinct()
    )
    if not found:  # hours filled in from a monthly mean: the jobs say where it came from
        found = set(
            Job.objects.filter(pk__in=_team_rows(team, start, end).values("job_id"))
            .exclude(intensity_source="")
            .values_list("intensity_source", flat=True)
            .distinct()
        )
    return sorted(found)


def _when_to_run(team: Team, start: datetime, end: datetime) -> list[WhenLine]:
    found = team_when_to_run(team=team, now=end, start=start, end=end)
    return [
        WhenLine(
            group=line.group, zone=line.zone, text=line.hint.text if line.hint else "",
            forecast_source=line.hint.forecast.source if line.hint else "",
            run_length_h=line.hint.run.length_h if line.hint else None,
            run_facility_kwh=line.hint.run.facility_kwh if line.hint else None,
            hints=line.summary.hints if line.summary else 0, checked=line.summary.checked if line.summary else 0,
            claimed_kg=line.summary.claimed_kg if line.summary else 0.0,
            real_kg=line.summary.real_kg if line.summary else 0.0, runs=line.summary.runs if line.summary else 0,
            measured_shift_kg=line.summary.measured_shift_kg if line.summary else None,
        )
        for line in found.lines
    ]  # fmt: skip


def report_build(*, team: Team, week_start: date) -> TeamReport:
    """The team's report for the local week that began on `week_start` (a Monday). Raises
    MixedBasisError where the team's week spans sites on different intensity bases."""
    tz_name = team_timezone(team)
    tz = zone(tz_name)
    start, end = week_window(week_start, tz)
    prev_start, prev_end = week_window(week_start - timedelta(days=7), tz)
    rollup = team_rollup(team=team, start=start, end=end, granularity="week")
    previous_rollup = team_rollup(team=team, start=prev_start, end=prev_end, granularity="week")
    week, previous = _billed(team, start, end, rollup), _billed(team, prev_start, prev_end, previous_rollup)
    waste = _waste(team, start, end, tz)
    zones, basis = rollup["intensity_zones"], rollup["intensity_basis"]
    estimated_s = (
        _team_rows(team, start, end).filter(intensity_estimated=True).aggregate(s=Sum("occupancy_s"))["s"] or 0.0
    )
    return TeamReport(
        team_id=team.pk,
        team_name=team.name,
        team_label=str(team),
        week_start=week_start,
        week_label=week_label(week_start),
        time_zone=tz_name,
        start=start,
        end=end,
        currency=rollup["currency"] or previous_rollup["currency"],
        intensity_basis=basis,
        intensity_zones=zones,
        intensity_sources=_sources(team, start, end, zones, basis),
        estimated_gpu_hours=estimated_s / 3600.0,
        week=week,
        previous=previous,
        changes=[
            _change("gpu_hours", week.gpu_hours, previous.gpu_hours),
            _change("energy_kwh", week.gpu_kwh, previous.gpu_kwh),
            _change("co2e_kg", week.co2e_kg, previous.co2e_kg),
            _change("cost", float(week.cost), float(previous.cost)),
        ],
        waste=waste.lines,
        waste_total=waste.total,
        waste_cost_pct=(100.0 * float(waste.total.cost / week.cost)) if week.cost else None,
        worst_jobs=_worst_jobs(waste.per_job),
        days=_days(team, week_start, tz, waste.per_day_gpu_hours),
        idle_share=_idle(rollup["periods"]),
        when_to_run=_when_to_run(team, start, end),
        when_made_at=f"{hour_floor(end):%Y-%m-%d %H:%M}",
        when_deadline_h=settings.FLEETWATT_SHIFT_DEADLINE_H,
    )


def fleet_summary_build(*, week_start: date) -> FleetSummary:
    """Every team with GPU-hours in the week (in the fleet's main time zone), its numbers and waste, the
    clusters' idle line; a fleet total only where every team shares one currency and one basis."""
    tz_name = fleet_timezone()
    tz = zone(tz_name)
    start, end = week_window(week_start, tz)
    active = JobGpuHour.objects.filter(hour__gte=start, hour__lt=end).values("job__team")
    lines: list[FleetTeamLine] = []
    for team in Team.objects.filter(pk__in=active).order_by("name"):
        try:
            rollup = team_rollup(team=team, start=start, end=end, granularity="week")
        except MixedBasisError as exc:
            lines.append(FleetTeamLine(team.pk, team.name, str(team), None, None, "", "", error=str(exc)))
            continue
        lines.append(
            FleetTeamLine(
                team_id=team.pk, team_name=team.name, team_label=str(team), week=_billed(team, start, end, rollup),
                waste_total=_waste(team, start, end, tz).total, currency=rollup["currency"],
                intensity_basis=rollup["intensity_basis"],
            )
        )  # fmt: skip
    ok = [line for line in lines if line.week is not None]
    currencies = {line.currency for line in ok if line.currency}
    bases = {line.intensity_basis for line in ok if line.intensity_basis}
    total: Footprint | None = None
    notes = []
    if len(currencies) <= 1 and len(bases) <= 1:
        total = Footprint.total(line.week for line in ok if line.week is not None)
    else:
        notes.append("No fleet total: teams differ in currency or intensity basis, and a report never mixes them.")
    idle, unseen = Footprint(), Footprint()
    for cluster in Cluster.objects.filter(site__isnull=False, site__timezone=tz_name).order_by("name"):
        doc = cluster_rollup(cluster=cluster, start=start, end=end, granularity="week")
        cluster_idle = _idle(doc["periods"])
        if cluster_idle is not None:
            idle = idle + cluster_idle
            unseen = unseen + _totals([p["unobserved"] for p in doc["periods"] if p.get("unobserved")])
    in_doubt = WeeklyReport.objects.filter(status=WeeklyReport.Status.SENDING, team__isnull=False).count()
    return FleetSummary(
        week_start=week_start,
        week_label=week_label(week_start),
        time_zone=tz_name,
        start=start,
        end=end,
        teams=lines,
        total=total,
        idle=idle,
        idle_seen=idle - unseen,
        unseen=unseen,
        currency=next(iter(currencies)) if len(currencies) == 1 else "",
        intensity_basis=next(iter(bases)) if len(bases) == 1 else "",
        in_doubt=in_doubt,
        notes=notes,
    )


def _plain(value: Any) -> Any:
    """Dataclasses as dicts; a footprint with its derived figures (GPU kWh as `energy_kwh`, CO2e)."""
    if isinstance(value, Footprint):
        return {**value.as_dict(), "operational_kg": value.operational_kg or 0.0}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def report_document(report: TeamReport | FleetSummary) -> dict[str, Any]:
    """The report as JSON-able data (Decimals as strings): what the templates render and the archive keeps."""
    return json.loads(json.dumps(_plain(report), cls=DjangoJSONEncoder))


def due_teams() -> list[Team]:
    """Teams with at least one active recipient."""
    return list(Team.objects.filter(Q(report_recipients__active=True)).distinct().order_by("name"))
