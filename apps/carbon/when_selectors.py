"""Reads of "when to run" (docs/arithmetic.md, "When to run"): a zone's forecast from an hour on, the typical run
of a team's flexible job groups, their hints as of an hour, and the hints of record of a period with their check
against the intensity that came. The arithmetic is apps.carbon.when_to_run's (pure).

A team's hints come from its own runs only: a group that several teams run has one hint per team, and nobody reads
another team's runs through them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Sum

from apps.fleet.models import Team
from apps.jobs.models import Job, JobGpuHour

from .models import ForecastHour, IntensityHour, JobGroup, WhenToRunHint
from .when_to_run import (
    HOUR,
    BestStart,
    HintCheck,
    TypicalRun,
    best_start,
    forecast_pick,
    hint_check,
    hint_text,
    kg_text,
    profile_forecast,
    typical_run,
    week_profile,
)

WEEK = timedelta(days=7)
PAST_HINTS_SHOWN = 10  # the latest hints of record listed with their check (the summary counts them all)


def hour_floor(moment: datetime) -> datetime:
    """The UTC hour `moment` is in: a hint looks forward from there."""
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Forecast:
    """A zone's forecast for the hours from `start`: kg/kWh each (None: not known), its kind and where it is from."""

    start: datetime
    values: list[float | None]
    kind: str  # WhenToRunHint.ForecastKind: "imported" or "profile"
    source: str


def _imported(zone: str, basis: str, start: datetime, hours: int) -> Forecast:
    """The imported forecast of the hours [start, start + hours) (ForecastHour), each hour's latest import."""
    rows = ForecastHour.objects.filter(zone=zone, basis=basis, hour__gte=start, hour__lt=start + hours * HOUR)
    by_hour, sources, issued = {}, set(), []
    for hour, kg, source, issued_at in rows.values_list("hour", "kg_per_kwh", "source", "issued_at"):
        by_hour[hour] = kg
        sources.add(source)
        if issued_at is not None:
            issued.append(issued_at)
    made = f", made {max(issued).astimezone(UTC):%Y-%m-%d %H:%M} UTC" if issued else ""
    label = f"imported forecast: {', '.join(sorted(sources))}{made}" if sources else "no imported forecast"
    return Forecast(start, [by_hour.get(start + k * HOUR) for k in range(hours)], "imported", label)


def _profile(zone: str, basis: str, start: datetime, hours: int, weeks: int) -> Forecast:
    """The zone's profile: the mean of its stored intensity by UTC hour of the week over the `weeks` weeks before
    `start`, or before its last stored hour where the figures stop earlier (an import that lags)."""
    stored = IntensityHour.objects.filter(zone=zone, basis=basis)
    last = stored.filter(hour__lt=start).aggregate(last=Max("hour"))["last"]
    if last is None:
        return Forecast(start, [None] * hours, "profile", f"no stored intensity of {zone} to make a profile from")
    window = stored.filter(hour__gt=last - weeks * WEEK, hour__lte=last)
    history = list(window.values_list("hour", "kg_per_kwh"))
    stored_h = int((last + HOUR - min(h for h, _ in history)) / HOUR)
    sources = sorted(set(window.order_by().values_list("source", flat=True).distinct()))
    part = ""
    if stored_h < weeks * 7 * 24:  # fewer weeks stored: say how much the profile is made of
        part = f" ({stored_h // 24} days of it)" if stored_h >= 24 else f" ({stored_h} hours of it)"
    label = (
        f"profile of the last {weeks} weeks of stored intensity{part}, to {last.astimezone(UTC):%Y-%m-%d %H}:00 UTC "
        f"(mean by UTC hour of the week; {', '.join(sources)})"
    )
    values = profile_forecast(week_profile(history), [start + k * HOUR for k in range(hours)])
    return Forecast(start, values, "profile", label)


@dataclass
class _Zone:
    """A zone's two forecasts from one hour, read once for every group that runs there."""

    imported: Forecast
    profile: Forecast

    def pick(self, length_h: int) -> Forecast:
        values, kind = forecast_pick(self.imported.values, self.profile.values, length_h=length_h)
        chosen = self.imported if kind == "imported" else self.profile
        return Forecast(chosen.start, values, kind, chosen.source)


@dataclass(frozen=True)
class GroupHint:
    """A team's flexible group's hint as of `made_at`: its typical run, the forecast used and the best start (None,
    with `text` saying why, where there is none)."""

    team_id: int
    team: str
    group_id: int
    group: str
    zone: str
    basis: str
    made_at: datetime
    deadline_h: int
    run: TypicalRun
    forecast: Forecast
    best: BestStart | None
    text: str

    @property
    def best_start(self) -> datetime | None:
        return self.made_at + self.best.offset_h * HOUR if self.best else None


def _runs_kwh(job_ids: Sequence[int]) -> dict[int, list[float]]:
    """Each job's facility kWh per hour from its first hour with a row (hours between without one are 0)."""
    by_job: dict[int, dict[datetime, float]] = defaultdict(dict)
    rows = (
        JobGpuHour.objects.filter(job_id__in=list(job_ids))
        .values("job_id", "hour")
        .annotate(kwh=Sum("facility_kwh"))
        .order_by()
    )
    for r in rows:
        by_job[r["job_id"]][r["hour"]] = r["kwh"] or 0.0
    out = {}
    for job_id, hours in by_job.items():
        first, last = min(hours), max(hours)
        out[job_id] = [hours.get(first + k * HOUR, 0.0) for k in range(int((last - first) / HOUR) + 1)]
    return out


_RunKey = tuple[Team, JobGroup, str, str]


def _recent_runs(teams: Sequence[Team], now: datetime, weeks: int, limit: int) -> dict[_RunKey, list[int]]:
    """{(team, flexible group, zone, basis): the ids of the team's last `limit` runs of the group there that ended
    in the `weeks` weeks before `now`}, for the runs on a site with a grid zone. One query for all the teams."""
    since = now - weeks * WEEK
    by_id = {t.pk: t for t in teams}
    jobs = (
        Job.objects.filter(team_id__in=list(by_id), job_group__flexible=True, end__gt=since, end__lte=now)
        .seen_since(since)
        .exclude(cluster__site__isnull=True)
        .exclude(cluster__site__grid_zone="")
        .select_related("job_group", "cluster__site")
        .only("pk", "end", "team_id", "job_group", "cluster__site__grid_zone", "cluster__site__intensity_basis")
        .order_by("-end", "-pk")
    )
    runs: dict[_RunKey, list[int]] = defaultdict(list)
    for job in jobs:
        site = job.cluster.site
        assert job.job_group is not None and site is not None
        key = (by_id[job.team_id], job.job_group, site.grid_zone, site.intensity_basis)
        if len(runs[key]) < limit:
            runs[key].append(job.pk)
    return runs


def group_hints(*, teams: Sequence[Team], now: datetime) -> list[GroupHint]:
    """The teams' flexible groups' hints as of the hour of `now`: for each group (and zone) a team ran in the last
    FLEETWATT_FORECAST_PROFILE_WEEKS weeks, its typical run (the team's last FLEETWATT_WHEN_TYPICAL_RUNS runs of
    it there), the zone's forecast (imported where it knows the run started now, else the zone's profile) and the
    cleanest start within FLEETWATT_SHIFT_DEADLINE_H hours. By team, then group. The queries do not grow with the
    teams or runs: one per zone for its forecasts."""
    made_at = hour_floor(now)
    deadline_h = settings.FLEETWATT_SHIFT_DEADLINE_H
    weeks = settings.FLEETWATT_FORECAST_PROFILE_WEEKS
    runs = _recent_runs(teams, made_at, weeks, settings.FLEETWATT_WHEN_TYPICAL_RUNS)
    kwh = _runs_kwh([pk for ids in runs.values() for pk in ids])
    zones: dict[tuple[str, str], _Zone] = {}
    hints = []
    for (team, group, zone, basis), ids in sorted(runs.items(), key=lambda kv: _order(*kv[0])):
        run = typical_run([kwh[pk] for pk in ids if pk in kwh])
        if run is None:
            continue  # no energy recorded for its runs: nothing to move
        if (zone, basis) not in zones:
            zones[(zone, basis)] = _Zone(
                imported=_imported(zone, basis, made_at, deadline_h),
                profile=_profile(zone, basis, made_at, deadline_h, weeks),
            )
        forecast = zones[(zone, basis)].pick(run.length_h)
        best = best_start(run.kwh, forecast.values, deadline_h=deadline_h)
        if best is not None:
            text = hint_text(best, now=made_at, deadline_h=deadline_h)
        elif run.length_h > deadline_h:
            text = f"no hint: its typical run ({run.length_h} h) is longer than the deadline ({deadline_h} h)"
        else:
            text = "no hint: the forecast does not know every hour of a run started now"
        hints.append(
            GroupHint(
                team_id=team.pk, team=team.name, group_id=group.pk, group=group.name, zone=zone, basis=basis,
                made_at=made_at, deadline_h=deadline_h, run=run, forecast=forecast, best=best, text=text,
            )
        )  # fmt: skip
    return hints


def _order(team: Team, group: JobGroup, zone: str, basis: str) -> tuple[str, str, str, str]:
    return (team.name, group.name, zone, basis)


@dataclass(frozen=True)
class CheckedHint:
    """A hint of record with its check against the intensity that came (apps.carbon.when_to_run.hint_check)."""

    hint: WhenToRunHint
    check: HintCheck

    @property
    def offset_h(self) -> int:
        return int((self.hint.best_start - self.hint.made_at) / HOUR)


@dataclass
class GroupSummary:
    """A group's hints of record in a period, against the intensity that came; its runs' measured shift saving."""

    group: str
    zone: str
    hints: int = 0
    checked: int = 0  # hints whose start and hinted start have their intensity known
    claimed_kg: float = 0.0  # what the checked hints claimed, by their forecast
    real_kg: float = 0.0  # what the same hints' starts would have saved, by the intensity that came
    best_real_kg: float | None = None  # the best in hindsight, over the hints whose whole window is known
    runs: int = 0  # the team's runs of the group in the period with a measured shift saving
    measured_shift_kg: float | None = None  # their Job.shift_saving_kg added up (None: no run with one)

    @property
    def claimed_text(self) -> str:
        return kg_text(self.claimed_kg)

    @property
    def real_text(self) -> str:
        return kg_text(self.real_kg)


@dataclass(frozen=True)
class WhenLine:
    """A group (and zone) as the pages show it: its hint now, and the summary of its hints of record beside it."""

    group: str
    zone: str
    hint: GroupHint | None
    summary: GroupSummary | None


@dataclass
class WhenToRun:
    """What the team page, the weekly e-mail and /api/when-to-run/ show of a team: its hints now, its hints of
    record of the period with their check (the latest first), and a summary per group."""

    team: Team
    made_at: datetime
    deadline_h: int
    hints: list[GroupHint]
    past: list[CheckedHint]
    past_count: int
    summary: list[GroupSummary] = field(default_factory=list)

    @property
    def lines(self) -> list[WhenLine]:
        """Every group (and zone) with a hint now or a summary of the period, by name."""
        hints = {(h.group, h.zone): h for h in self.hints}
        summaries = {(s.group, s.zone): s for s in self.summary}
        return [WhenLine(g, z, hints.get((g, z)), summaries.get((g, z))) for g, z in sorted(hints.keys() | summaries)]


def _actual(hints: Sequence[WhenToRunHint]) -> dict[tuple[str, str], dict[datetime, float]]:
    """The intensity that came over the hints' windows, per (zone, basis): one query each."""
    spans: dict[tuple[str, str], tuple[datetime, datetime]] = {}
    for h in hints:
        end = h.made_at + h.deadline_h * HOUR
        first, last = spans.get((h.zone, h.basis), (h.made_at, end))
        spans[(h.zone, h.basis)] = (min(first, h.made_at), max(last, end))
    out = {}
    for (zone, basis), (first, last) in spans.items():
        rows = IntensityHour.objects.filter(zone=zone, basis=basis, hour__gte=first, hour__lt=last)
        out[(zone, basis)] = dict(rows.values_list("hour", "kg_per_kwh"))
    return out


def hints_checked(hints: Sequence[WhenToRunHint]) -> list[CheckedHint]:
    """Each hint of record against the intensity that came (None where it has not come yet)."""
    actual = _actual(hints)
    out = []
    for h in hints:
        came = actual[(h.zone, h.basis)]
        window = [came.get(h.made_at + k * HOUR) for k in range(h.deadline_h)]
        check = hint_check(
            kwh=h.run_kwh, forecast=h.forecast, actual=window, offset_h=int((h.best_start - h.made_at) / HOUR),
            made_at=h.made_at, deadline_h=h.deadline_h,
        )  # fmt: skip
        out.append(CheckedHint(hint=h, check=check))
    return out


def _summaries(
    teams: Sequence[Team], checked: list[CheckedHint], start: datetime, end: datetime
) -> dict[int, list[GroupSummary]]:
    """{team id: a summary per group and zone}: its hints of record and its runs' measured shift saving."""
    by_group: dict[tuple[int, str, str], GroupSummary] = {}
    for c in checked:
        key = (c.hint.team_id, c.hint.job_group.name, c.hint.zone)
        line = by_group.setdefault(key, GroupSummary(group=key[1], zone=key[2]))
        line.hints += 1
        if c.check.real_kg is not None:
            line.checked += 1
            line.claimed_kg += c.check.claimed_kg
            line.real_kg += c.check.real_kg
        if c.check.best_real_kg is not None:
            line.best_real_kg = (line.best_real_kg or 0.0) + c.check.best_real_kg
    measured = (
        Job.objects.filter(team_id__in=[t.pk for t in teams], job_group__flexible=True, end__gte=start, end__lt=end)
        .seen_since(start)  # (index job_team_last_seen: a run that ended in the period was seen in it)
        .exclude(shift_saving_kg__isnull=True)
        .values("team_id", "job_group__name", "cluster__site__grid_zone")
        .annotate(kg=Sum("shift_saving_kg"), runs=Count("pk"))
        .order_by()
    )
    for r in measured:
        key = (r["team_id"], r["job_group__name"], r["cluster__site__grid_zone"] or "")
        line = by_group.setdefault(key, GroupSummary(group=key[1], zone=key[2]))
        line.measured_shift_kg, line.runs = r["kg"], r["runs"]
    out: dict[int, list[GroupSummary]] = defaultdict(list)
    for key in sorted(by_group):
        out[key[0]].append(by_group[key])
    return out


def when_to_run(
    *, teams: Sequence[Team], now: datetime, start: datetime, end: datetime, shown: int | None = PAST_HINTS_SHOWN
) -> list[WhenToRun]:
    """For each team: its hints as of `now`, and its hints of record made in [start, end) with their check, the
    latest `shown` of them (None: all) and a summary per group of all of them. The queries do not grow with the
    teams: one per zone for the forecasts and for the intensity that came."""
    made = WhenToRunHint.objects.filter(team_id__in=[t.pk for t in teams], made_at__gte=start, made_at__lt=end)
    checked = hints_checked(list(made.select_related("job_group").order_by("-made_at", "job_group__name", "zone")))
    hints = group_hints(teams=teams, now=now)
    summaries = _summaries(teams, checked, start, end)
    out = []
    for team in teams:
        past = [c for c in checked if c.hint.team_id == team.pk]
        out.append(
            WhenToRun(
                team=team,
                made_at=hour_floor(now),
                deadline_h=settings.FLEETWATT_SHIFT_DEADLINE_H,
                hints=[h for h in hints if h.team_id == team.pk],
                past=past if shown is None else past[:shown],
                past_count=len(past),
                summary=summaries.get(team.pk, []),
            )
        )
    return out


def team_when_to_run(*, team: Team, now: datetime, start: datetime, end: datetime) -> WhenToRun:
    """One team's (the team page, its weekly e-mail): the latest PAST_HINTS_SHOWN hints of record listed."""
    return when_to_run(teams=[team], now=now, start=start, end=end)[0]
