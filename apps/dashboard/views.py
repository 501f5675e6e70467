from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Max, Min, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from apps.carbon.frontier_selectors import fleet_saving
from apps.carbon.models import JobGroup
from apps.carbon.when_selectors import team_when_to_run
from apps.core.access.policy import member_team_ids, user_sees_all_teams
from apps.core.units.footprint import S_PER_HOUR, Footprint, kwh
from apps.core.units.money import round_minor
from apps.core.web import params
from apps.core.web.query import QueryError, bad_query_is_400, date_param, text_param
from apps.fleet.models import Cluster, Gpu, Team
from apps.jobs.frontier import MIN_RUNS_DEFAULT, SLACK_DEFAULT
from apps.jobs.methods import method_legend
from apps.jobs.models import Job
from apps.jobs.selectors import job_utilisation_summary, low_coverage_jobs
from apps.jobs.states import OUTCOMES
from apps.reports.selectors import REPORTED_STATUSES
from apps.rollups import documents
from apps.rollups.api.serializers import MAX_ROLLUP_DAYS
from apps.rollups.breakdown import NO_GROUP, Breakdowns, waste_kind_lines
from apps.rollups.outcome_selectors import failed_run_jobs, failed_run_totals, job_group_outcomes_booked
from apps.rollups.selectors import MixedBasisError, team_idle
from apps.rollups.team_parts import team_period_sums
from apps.rollups.team_selectors import team_period_findings
from apps.telemetry.models import IngestedHour
from apps.telemetry.selectors import gpu_settings_over
from apps.waste.kinds import GPU_HOUR_KINDS, FlagStatus
from apps.waste.models import Flag
from apps.waste.selectors import period_waste_counted

from .attention import fleet_attention
from .heatmap import gpu_power_grid
from .page_cache import kept_page
from .selectors import RECENT, job_hour_gaps, scheduler_sync_status

FAILED_RUNS_LISTED = 20  # the costliest failed runs a page lists; its totals count them all


def page_period(request: HttpRequest) -> tuple[datetime, datetime]:
    """?start=YYYY-MM-DD&end=YYYY-MM-DD (end exclusive); by default the last 7 days of ingested data. A day
    the page cannot read, a start not before the end, or more days than a rollup covers: QueryError (400)."""
    return period_of(request.GET)


def period_of(values: Mapping[str, Any]) -> tuple[datetime, datetime]:
    """The period of a page's query or of a form (`start`, `end`), read as page_period reads it."""
    start_day, end_day = date_param(values, "start"), date_param(values, "end")
    if end_day is not None:
        end = datetime.combine(end_day, time(), tzinfo=UTC)
    else:
        latest = IngestedHour.objects.order_by("-hour").values_list("hour", flat=True).first()
        end = (latest or timezone.now()).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    start = datetime.combine(start_day, time(), tzinfo=UTC) if start_day is not None else end - timedelta(days=7)
    if start >= end:
        raise QueryError("start", f"{start.date()} must be before end ({end.date()}).")
    if end - start > timedelta(days=MAX_ROLLUP_DAYS):
        raise QueryError("start and end", f"a period covers at most {MAX_ROLLUP_DAYS} days.")
    return start, end


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _with_split(job: Job) -> Job:
    """Energy in kWh and each method's share, for the table."""
    job.energy_kwh = kwh(job.energy_j)  # type: ignore[attr-defined]
    # Summed here: the template filter `add` would make integers of these floats.
    job.co2e_kg = (job.operational_kg or 0.0) + job.embodied_kg  # type: ignore[attr-defined]
    total = sum(job.attribution_j.values()) or 1.0
    job.split_pct = [(m, 100.0 * j / total) for m, j in job.attribution_j.items()]  # type: ignore[attr-defined]
    return job


def month_to_date(now: datetime) -> tuple[date, date]:
    """This month's first day and tomorrow (UTC days, the end exclusive): a team's default period."""
    today = now.astimezone(UTC).date()
    return today.replace(day=1), today + timedelta(days=1)


@require_safe
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Where a login lands: a member of teams (not an admin, not finance) on their team this month; everyone
    else on the fleet page."""
    user = cast(User, request.user)  # login_required
    if member_team_ids(user) and not user_sees_all_teams(user):
        return redirect("dashboard:my-team")
    return redirect("dashboard:fleet")


@require_safe
@login_required
def my_team(request: HttpRequest) -> HttpResponse:
    """ "My team": the viewer's one team this month, or a choice among their teams (admins and finance in no
    team: the fleet page, which lists every team)."""
    teams = list(Team.objects.filter(pk__in=member_team_ids(cast(User, request.user))).order_by("name"))
    if not teams:
        return redirect("dashboard:fleet")
    start, end = month_to_date(timezone.now())
    period = f"?start={start.isoformat()}&end={end.isoformat()}"
    if len(teams) == 1:
        return redirect(reverse("dashboard:team", args=[teams[0].pk]) + period)
    return render(request, "dashboard/my_teams.html", {"teams": teams, "period": period})


@require_safe
@bad_query_is_400
def fleet(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:  # the bare home page: after the login, where the viewer lands (`home`)
        return redirect_to_login(request.get_full_path()) if request.GET else redirect(settings.LOGIN_URL)
    return _fleet(request)


@kept_page
def _fleet(request: HttpRequest) -> HttpResponse:
    start, end = page_period(request)
    threshold = settings.FLEETWATT_COVERAGE_THRESHOLD
    flagged = [
        _with_split(job) for job in low_coverage_jobs(user=request.user, start=start, end=end, threshold=threshold)
    ]
    sees_all = user_sees_all_teams(request.user)
    context = {
        "start": start.date(),
        "end": end.date(),
        "api_query": f"start={start.date().isoformat()}&end={end.date().isoformat()}",
        "attention": fleet_attention(
            user=request.user, start=start, end=end, now=timezone.now(), low_coverage=len(flagged)
        ),
        # The GPUs' pages are for admins and finance, and so is a grid of every team's GPUs.
        "heatmap": gpu_power_grid(start=start, end=end) if sees_all else None,
        "flagged": flagged,
        "threshold_pct": round(threshold * 100),
        "has_data": IngestedHour.objects.exists(),
        "teams": Team.objects.visible_to(request.user).order_by("name"),
        "fleet": _clusters_overview(start, end) if sees_all else None,
        "teams_compared": _teams_compared(request, start, end) if sees_all else None,
        # Only to admins, and without any credentials the URL may carry (user:password@).
        "prometheus_url": _without_credentials(
            Cluster.objects.values_list("prometheus_url", flat=True).first() or settings.FLEETWATT_PROMETHEUS_URL
        )
        if request.user.is_staff
        else "",
        "split_methods": method_legend(),
        **_failed_runs(request, start, end),
    }
    return render(request, "dashboard/fleet.html", context)


@require_safe
@bad_query_is_400
@login_required
@kept_page
def team(request: HttpRequest, team_id: int) -> HttpResponse:
    """One team over a period: cost, energy and carbon side by side. The charts load the same rollup
    the API serves (`/api/teams/{id}/rollup/`); the tables are the team's jobs, waste and gaps."""
    team = get_object_or_404(Team.objects.visible_to(request.user), pk=team_id)
    start, end = page_period(request)
    try:
        # The API's own document (kept rendered): the page's script asks for this same one right after, so the
        # headline and the charts show the bill as finance tools read it.
        rollup = _finance_document(documents.Ask("team", team.pk, start, end, "day"), team)
        error = ""
    except MixedBasisError as exc:
        rollup, error = None, str(exc)
    threshold = settings.FLEETWATT_COVERAGE_THRESHOLD
    waste = _team_waste(request, team, start, end)
    # The period's jobs (those that ran in it, as the API's `?start=&end=` picks them, and any other with something in
    # it) summed in the database: the splits with each job's counted waste, the costliest jobs, the sources.
    sums = team_period_sums(
        user=request.user, team=team, start=start, end=end, top=TOP_JOBS, waste=waste.pop("waste_lines")
    )
    context = {
        "team": team,
        "start": start.date(),
        "end": end.date(),
        "rollup": rollup,
        "error": error,
        "totals": _billed_totals(rollup["totals"]) if rollup else {},
        "top_jobs": _top_jobs(sums.top),
        "low_coverage": [
            _with_split(job)
            for job in low_coverage_jobs(user=request.user, start=start, end=end, threshold=threshold, team=team)
        ],
        **waste,
        **_breakdowns(sums.breakdowns),
        "idle": team_idle(team=team, start=start, end=end),
        "threshold_pct": round(threshold * 100),
        "sources": sums.sources,
        "api_query": f"start={start.date().isoformat()}&end={end.date().isoformat()}",
        "split_methods": method_legend(),
        **_failed_runs(request, start, end, team=team),
        "when_to_run": team_when_to_run(team=team, now=timezone.now(), start=start, end=end),
        "frontier": {
            "groups": fleet_saving(jobs=Job.objects.visible_to(request.user).filter(team=team), start=start, end=end),
            "slack_pct": round(SLACK_DEFAULT * 100),
            "min_runs": MIN_RUNS_DEFAULT,
        },
    }
    return render(request, "dashboard/team.html", context)


TOP_JOBS = 10  # the costliest jobs (their whole run's cost) the team page lists


def _top_jobs(top: list[tuple[int, Footprint]]) -> list[Job]:
    """The costliest of the jobs that ran (their whole run's cost; then by id), each with its part inside the
    period (`period`: its GPU-hours, energy, CO2e and cost there) beside its whole run's."""
    found = Job.objects.filter(pk__in=[pk for pk, _ in top]).in_bulk()
    jobs = []
    for pk, inside in top:
        job = _with_split(found[pk])
        job.period = inside  # type: ignore[attr-defined]
        jobs.append(job)
    return jobs


def _breakdowns(found: Breakdowns) -> dict:
    """The period's jobs on the bill by user and by job group, each table adding up to the bill."""
    return {
        "breakdowns": found,
        "breakdown_tables": [
            ("By user", "User", "by-user", found.by_user, "user"),
            ("By job group", "Job group", "by-group", found.by_group, "group"),
        ],
        "no_group": NO_GROUP,
    }


def _team_waste(request: HttpRequest, team: Team, start: datetime, end: datetime) -> dict:
    """The waste findings of the team's jobs that ran in the period worth something there
    (apps.waste.selectors.period_waste: each clipped to the period), with their status, and the waste counted: open
    and disputed findings of jobs on the team's bill, a GPU-hour two of them share counted once, as the weekly report
    and the audit queue count them; an acknowledged or resolved one, or one of a job an admin excluded from the bill,
    is shown, not counted. The counted waste split by kind (every kind, a GPU-hour two kinds share under one), and per
    job with the keys of its lines in the splits by user and by job group (`waste_lines`). The findings' rows are read
    once for both."""
    flags = team_period_findings(team=team, start=start, end=end) & Flag.objects.visible_to(request.user)
    worth, counted_worth, found = period_waste_counted(
        flags=flags, start=start, end=end, counted=_counted, job_fields=WASTE_JOB_FIELDS
    )
    for f in found:
        f.worth = worth.per_flag[f.pk]  # type: ignore[attr-defined]
        f.counted = _counted(f)  # type: ignore[attr-defined]
    counted = [f for f in found if f.counted]  # type: ignore[attr-defined]
    total = counted_worth.total
    currency = ",".join(sorted({f.job.currency for f in counted if f.job}))
    jobs = {f.job_id: f.job for f in counted if f.job is not None}
    return {
        "waste": found,
        "waste_counted": {
            "findings": len(counted),
            "gpu_hours_blocked": total.gpu_hours,
            "facility_kwh": total.facility_kwh,
            "co2e_kg": total.co2e_kg,
            "cost": total.cost,
        },
        # Each kind at zero too, the most money first; its GPU-hours counted once, so the kinds add up to the total.
        "waste_by_kind": waste_kind_lines(Counter(f.kind for f in counted), counted_worth.per_kind_once, currency),
        "waste_lines": {
            pk: (jobs[pk].user, "" if jobs[pk].job_group_id is None else str(jobs[pk].job_group_id), fp)
            for pk, fp in counted_worth.per_job.items()
        },
        "waste_not_counted": len(found) - len(counted),
        "reported_statuses": [FlagStatus(s).label for s in REPORTED_STATUSES],
    }


# What the team page reads of a finding's job (its table, its counting and its lines; glossary.waste_window).
WASTE_JOB_FIELDS = ("job_key", "currency", "excluded_from_bill", "start", "end", "user", "job_group")


def _counted(flag: Flag) -> bool:
    """A finding counted as waste: open or disputed, of a job on its team's bill."""
    return flag.status in REPORTED_STATUSES and flag.job is not None and not flag.job.excluded_from_bill


def _teams_compared(request: HttpRequest, start: datetime, end: datetime) -> dict[str, Any]:
    """The "Teams compared" chart's figures as a table, from the same document as the chart (the API's
    `/api/teams/compare/`), with a totals row: its cost is the bill, the sum of the teams' billed costs."""
    user = cast(User, request.user)  # login_required
    teams, _generation = documents.kept(documents.Ask("teams_compared", user.pk, start, end), user)
    rows = [{**t, "cost": Decimal(t["cost"]), "co2e_kg": t["operational_kg"] + t["embodied_kg"]} for t in teams]
    names = dict(Team.objects.filter(name__in=[r["team"] for r in rows]).values_list("name", "display_name"))
    for r in rows:
        r["display_name"] = names.get(r["team"]) or r["team"]
    totals = {
        key: sum((r[key] for r in rows), Decimal(0) if key == "cost" else 0.0)
        for key in ("gpu_hours", "facility_kwh", "co2e_kg", "cost")
    }
    return {"rows": rows, "totals": totals}


def _finance_document(ask: documents.Ask, subject: Team | Cluster) -> dict:
    """The rollup as the API answers it (costs in minor units: the bill), from the document it keeps."""
    value, _generation = documents.kept(ask, subject)
    return json.loads(value)


def _billed_totals(totals: dict) -> dict:
    """A finance document's totals as the page shows them: `cost` the bill (the sum of the jobs' rounded costs),
    `cost_exact` the unrounded sum beside it, and CO2e added up."""
    return {
        **totals,
        "cost": Decimal(totals["cost"]),
        "cost_exact": Decimal(totals["cost_exact"]),
        "co2e_kg": totals["operational_kg"] + totals["embodied_kg"],
    }


def _failed_runs(request: HttpRequest, start: datetime, end: datetime, team: Team | None = None) -> dict:
    """The period's failed runs (the `failed_run` findings): per team and in all, and the costliest ones."""
    per_team = failed_run_totals(user=request.user, start=start, end=end, team=team)
    runs = failed_run_jobs(user=request.user, start=start, end=end, team=team).select_related("team", "job_group")
    return {
        "failed_by_team": per_team,
        "failed_total": {
            "runs": sum(t["runs"] for t in per_team),
            "gpu_hours": sum(t["gpu_hours"] for t in per_team),
            "facility_kwh": sum(t["facility_kwh"] for t in per_team),
            "co2e_kg": sum(t["co2e_kg"] for t in per_team),
            "cost": sum((t["cost"] for t in per_team), Decimal(0)),
            "currency": ",".join(sorted({t["currency"] for t in per_team if t["currency"]})),
        },
        "failed_runs": [_with_split(job) for job in runs[:FAILED_RUNS_LISTED]],
        "failed_listed": FAILED_RUNS_LISTED,
    }


@require_safe
@bad_query_is_400
@login_required
@kept_page
def job(request: HttpRequest, job_id: int) -> HttpResponse:
    """A job: how it used its GPUs (SM, memory, power, sharing), its split per GPU and hour, coverage, footprint,
    flags and audit trail, and what a TDP-based estimate would have claimed."""
    job = get_object_or_404(
        Job.objects.visible_to(request.user).select_related("team", "cluster__site", "job_group"), pk=job_id
    )
    rows = list(job.gpu_hours_rows.select_related("gpu__node").order_by("hour", "gpu__index"))
    energy: dict[tuple[int, datetime], dict[str, float]] = {}
    for e in job.energy_rows.all():
        energy.setdefault((e.gpu_id, e.hour), {})[e.method] = e.energy_j
    gaps = job_hour_gaps(job=job)
    estimated = [r for r in rows if r.source == "estimated"]
    context = {
        "job": _with_split(job),
        "utilisation": job_utilisation_summary(job=job, rows=rows),
        "rows": [
            (r, energy.get(key, {}), (r.operational_kg or 0.0) + r.embodied_kg, gaps.get(key))
            for r in rows
            for key in [(r.gpu_id, r.hour)]
        ],
        "missed": {
            "estimated_rows": len(estimated),
            "estimated_gpu_hours": sum(r.occupancy_s for r in estimated) / S_PER_HOUR,
            "estimated_kwh": kwh(sum(r.energy_j for r in estimated)),
            "unseen_hours": sum(1 for r in rows if r.source != "estimated" and (r.gpu_id, r.hour) in gaps),
        },
        "sampled_over": any(r.sampled_s > S_PER_HOUR for r in rows),
        "flags": job.flag_rows.order_by("kind"),
        "gpu_hour_kinds": [k for k in job.flags if k in GPU_HOUR_KINDS],
        "trail": job.audit_entries.select_related("actor").order_by("at", "id"),
        "tdp_estimate_kwh": kwh(job.tdp_estimate_j) if job.tdp_estimate_j is not None else None,
        "tdp_ratio": (job.tdp_estimate_j / job.energy_j) if job.tdp_estimate_j is not None and job.energy_j else None,
        "teams": Team.objects.order_by("name") if request.user.is_staff else [],
        "groups": JobGroup.objects.order_by("name") if request.user.is_staff else [],
    }
    return render(request, "dashboard/job.html", context)


def _line_part(line: dict, *, less: dict | None = None) -> dict:
    """A rollup's idle figures (its totals' `idle` or `unobserved`) as the fleet page shows them: GPU kWh, CO2e
    and money; with `less`, what is left of the line without that part."""

    less = less or {}

    def figure(name: str) -> float:
        return float(line.get(name, 0.0)) - float(less.get(name, 0.0))

    return {
        "energy_kwh": kwh(figure("energy_j")),
        "co2e_kg": figure("operational_kg") + figure("embodied_kg"),
        "cost": Decimal(str(line.get("cost", "0"))) - Decimal(str(less.get("cost", "0"))),
    }


def _clusters_overview(start: datetime, end: datetime) -> dict:
    """For admins and finance: each cluster's use and its idle line."""
    clusters = []
    for cluster in Cluster.objects.select_related("site").order_by("name"):
        try:
            doc = _finance_document(documents.Ask("cluster", cluster.pk, start, end, "month"), cluster)
        except MixedBasisError:
            continue
        used = sum(p["gpu_hours"] for p in doc["periods"])
        idle = sum((p["idle"] or {}).get("gpu_hours", 0.0) for p in doc["periods"])
        whole, unseen = doc["totals"]["idle"] or {}, doc["totals"].get("unobserved") or {}
        clusters.append(
            {
                "cluster": cluster,
                "gpu_hours_used": used,
                "gpu_hours_idle": idle,
                "utilisation": used / (used + idle) if used + idle else None,
                "idle_energy_kwh": kwh(sum((p["idle"] or {}).get("energy_j", 0.0) for p in doc["periods"])),
                # Each period's idle line rounded, added up (the API's `totals.idle.cost`).
                "idle_cost": Decimal((doc["totals"]["idle"] or {}).get("cost", "0")),
                # The idle line's two parts apart: GPUs seen with no job, and what nobody saw (its `unobserved`).
                "idle_seen": _line_part(whole, less=unseen),
                "unseen": _line_part(unseen),
                "embodied_per_useful_gpu_hour": doc["embodied_kg_per_useful_gpu_hour"],
                "currency": doc["currency"],
            }
        )
    return {"clusters": clusters}


@require_safe
@bad_query_is_400
@login_required
def gpu(request: HttpRequest, gpu_id: int) -> HttpResponse:
    """A GPU: its hours (device, jobs and idle energy, occupancy) and the jobs that ran on it."""
    if not user_sees_all_teams(request.user):
        raise PermissionDenied("The fleet's GPUs are for admins and finance.")
    gpu = get_object_or_404(Gpu.objects.select_related("node__cluster"), pk=gpu_id)
    start, end = page_period(request)
    hours = list(gpu.hours.filter(hour__gte=start, hour__lt=end).order_by("hour"))
    rows = (
        gpu.job_hours.filter(hour__gte=start, hour__lt=end)
        .values("job_id", "job__job_key", "job__team__name")
        .annotate(energy_j=Sum("energy_j"), occupancy_s=Sum("occupancy_s"), first=Min("hour"), last=Max("hour"))
        .order_by("first")
    )
    jobs = [
        {**j, "energy_kwh": kwh(j["energy_j"] or 0.0), "gpu_hours": (j["occupancy_s"] or 0.0) / S_PER_HOUR}
        for j in rows
    ]
    context = {
        "gpu": gpu,
        "hours": hours,
        "settings": gpu_settings_over(gpu_id=gpu.pk, start=start, end=end),
        "jobs": jobs,
        "start": start.date(),
        "end": end.date(),
        # The page's chart (gpu.js): per hour, jobs' and idle energy (kWh) and the mean power (W).
        "chart": [
            {
                "hour": h.hour.isoformat(),
                "jobs_kwh": kwh(h.jobs_energy_j or 0.0),
                "idle_kwh": kwh(h.idle_energy_j or 0.0),
                "power_w": (h.device_energy_j or 0.0) / S_PER_HOUR,
            }
            for h in hours
        ],
    }
    return render(request, "dashboard/gpu.html", context)


JOB_SEARCH_LIMIT = 100
JOB_SEARCH_MAX_CHARS = 200


@require_safe
@bad_query_is_400
@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    """Find a job: by the scheduler's id (`123`, an array task `6_2`), its key (`slurm/123`) or a part of
    its name; `?mine=1`: the jobs the user ran (the scheduler's user name equal to the login's). Newest
    first, at most JOB_SEARCH_LIMIT, of the teams the user may see."""
    q = text_param(request.GET, "q", max_length=JOB_SEARCH_MAX_CHARS).strip()
    mine = text_param(request.GET, "mine")
    if mine not in ("", "0", "1"):
        raise QueryError("mine", "1 for the jobs you ran, else leave it out.")
    found = Job.objects.visible_to(request.user)
    if mine == "1":
        found = found.filter(user=request.user.get_username())
    if q:
        found = found.filter(Q(job_id=q) | Q(display_id=q) | Q(job_key=q) | Q(name__icontains=q))
    elif mine != "1":
        found = found.none()
    results = list(found.select_related("team", "cluster").order_by("-start", "id")[: JOB_SEARCH_LIMIT + 1])
    context = {
        "q": q,
        "mine": mine == "1",
        "jobs": [_with_split(job) for job in results[:JOB_SEARCH_LIMIT]],
        "more": len(results) > JOB_SEARCH_LIMIT,
        "limit": JOB_SEARCH_LIMIT,
    }
    return render(request, "dashboard/jobs.html", context)


@require_safe
@bad_query_is_400
@login_required
def job_by_scheduler_id(request: HttpRequest, scheduler: str, scheduler_job_id: str) -> HttpResponse:
    """`/jobs/slurm/123/`: the job's page, as its users know it; a list where the id is on several clusters."""
    params.text(scheduler_job_id, name="job id")
    found = list(
        Job.objects.visible_to(request.user)
        .filter(scheduler=scheduler, job_id=scheduler_job_id)
        .select_related("team", "cluster")
        .order_by("-start", "id")[:JOB_SEARCH_LIMIT]
    )
    if not found:
        raise Http404("No such job among those you may see.")
    if len(found) == 1:
        return redirect("dashboard:job", found[0].pk)
    context = {"q": f"{scheduler}/{scheduler_job_id}", "mine": False, "jobs": [_with_split(j) for j in found]}
    return render(request, "dashboard/jobs.html", {**context, "more": False, "limit": JOB_SEARCH_LIMIT})


@require_safe
@bad_query_is_400
@login_required
def groups(request: HttpRequest) -> HttpResponse:
    """Each job group's runs of the period by how they ended: what the delivered model cost, failures
    included. The API's `/api/job-groups/{id}/outcomes/` per group; a member counts their teams' runs only."""
    start, end = page_period(request)
    billed: dict[tuple[int, str], Decimal] = {}
    try:  # the figures and the costs in minor units from one read of the rows
        (doc, billed), error = job_group_outcomes_booked(user=request.user, start=start, end=end), ""
    except MixedBasisError as exc:
        doc, error = {"groups": [], "currency": ""}, str(exc)
    shown = [g for g in doc["groups"] if g["total"]["jobs"]]
    _outcomes_billed(shown, billed, currency=doc["currency"])
    context = {
        "start": start.date(),
        "end": end.date(),
        "doc": doc,
        "groups": shown,
        "idle_groups": [g["name"] for g in doc["groups"] if not g["total"]["jobs"]],
        "error": error,
        "sees_all": user_sees_all_teams(request.user),
        "outcomes": [{"outcome": key, "label": info.label, "meaning": info.meaning} for key, info in OUTCOMES.items()],
        "api_query": f"start={start.date().isoformat()}&end={end.date().isoformat()}",
        "chart": _outcomes_chart(shown, currency=doc["currency"]),
    }
    return render(request, "dashboard/groups.html", context)


def _outcomes_billed(groups: list[dict], billed: Mapping[tuple[int, str], Decimal], *, currency: str) -> None:
    """Each outcome's cost as the API's `/api/job-groups/{id}/outcomes/` books it (`billed`: the sum of its runs'
    rounded costs per group and outcome; the total the sum of the outcomes'), the exact one kept as `cost_exact`."""
    zero = round_minor(Decimal(0), currency)
    for g in groups:
        for o in g["outcomes"]:
            o["cost_exact"], o["cost"] = o["cost"], billed.get((g["id"], o["outcome"]), zero)
        g["total"]["cost_exact"] = g["total"]["cost"]
        g["total"]["cost"] = sum((o["cost"] for o in g["outcomes"]), zero)
        g["failed_cost_share"] = (
            float(next(o["cost"] for o in g["outcomes"] if o["outcome"] == "failed") / g["total"]["cost"])
            if g["total"]["cost"]
            else None
        )


def _outcomes_chart(groups: list[dict], *, currency: str) -> dict:
    """The groups' split as the page's script draws it (numbers, not Decimal text)."""
    figures = ("cost", "facility_kwh", "co2e_kg")
    return {
        "currency": currency,
        "outcomes": [{"outcome": key, "label": info.label} for key, info in OUTCOMES.items()],
        "groups": [
            {"name": g["name"], "outcomes": {o["outcome"]: {f: float(o[f]) for f in figures} for o in g["outcomes"]}}
            for g in groups
        ],
    }


@require_safe
@login_required
def status(request: HttpRequest) -> HttpResponse:
    """For admins: how far each cluster's energy ingest and scheduler sync have got, the sync's last error,
    and the last day's jobs that no scheduler record describes."""
    if not request.user.is_staff:
        raise PermissionDenied("The ingest's and the scheduler sync's status is for admins.")
    now = timezone.now()
    context = {"now": now, "clusters": scheduler_sync_status(now=now), "recent_h": round(RECENT.total_seconds() / 3600)}
    return render(request, "dashboard/status.html", context)
