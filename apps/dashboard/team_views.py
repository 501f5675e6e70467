"""A team's jobs of a period, on a page of their own: every job with its part inside the period, filtered by user,
state and job group, the costliest first, 50 a page, and the same list as CSV (in-period figures only: what the
team's bill for the period counts of each job)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_safe

from apps.core.units.footprint import Footprint
from apps.core.web import params
from apps.core.web.query import QueryError, bad_query_is_400, text_param
from apps.core.web.renderers import csv_stream
from apps.fleet.models import Team
from apps.jobs.states import JobState
from apps.rollups.breakdown import NO_GROUP, JobFilter, JobPart, bill_of
from apps.rollups.finance import csv_quantity
from apps.rollups.team_parts import team_jobs_listed, team_parts_all
from apps.rollups.team_selectors import jobs_of_parts, parts_filtered

from .page_cache import kept_page
from .views import page_period

JOBS_PER_PAGE = 50
CSV_CHUNK = 1000  # jobs read at a time for the export
MILLIONTH = Decimal("0.000001")  # costs are stored to 6 places


def _filter(request: HttpRequest) -> JobFilter:
    """`?user=&state=&group=`: a user name as the scheduler gives it, a state (JobState), a group's id or "none"."""
    state = text_param(request.GET, "state")
    if state and state not in {s.value for s in JobState}:
        raise QueryError("state", f"one of {', '.join(s.value for s in JobState)}.")
    group = text_param(request.GET, "group")
    if group and group != NO_GROUP:
        params.object_id(group, name="group")
    return JobFilter(user=text_param(request.GET, "user", max_length=255), state=state, group=group)


def _team_period(request: HttpRequest, team_id: int) -> tuple[Team, datetime, datetime, JobFilter]:
    team = get_object_or_404(Team.objects.visible_to(request.user), pk=team_id)
    start, end = page_period(request)
    return team, start, end, _filter(request)


@require_safe
@bad_query_is_400
@login_required
@kept_page
def team_jobs(request: HttpRequest, team_id: int) -> HttpResponse:
    """The team's jobs of the period, filtered, the costliest in the period first, JOBS_PER_PAGE a page (summed in
    the database: a team's month is thousands of jobs)."""
    team, start, end, chosen = _team_period(request, team_id)
    raw_page = text_param(request.GET, "page")
    # (the page asked for, checked against the number of pages once the count is read)
    asked = int(raw_page) if raw_page.isascii() and raw_page.isdigit() and 0 < len(raw_page) < 10 else 1
    listed = team_jobs_listed(
        user=request.user, team=team, start=start, end=end, chosen=chosen, page=max(asked, 1), per_page=JOBS_PER_PAGE
    )
    pages = max(1, -(-listed.count // JOBS_PER_PAGE))
    page = params.whole_number(raw_page, name="page", low=1, high=pages) if raw_page else 1
    query = {"start": start.date().isoformat(), "end": end.date().isoformat()}
    query |= {k: v for k, v in (("user", chosen.user), ("state", chosen.state), ("group", chosen.group)) if v}
    context = {
        "team": team,
        "start": start.date(),
        "end": end.date(),
        "chosen": chosen,
        "jobs": jobs_of_parts(listed.parts),
        "count": listed.count,
        "page": page,
        "pages": pages,
        "query": urlencode(query),
        "shown_bill": listed.shown_bill,
        "users": listed.users,
        "states": [s for s in JobState if s.value in listed.states],
        "groups": listed.groups,
        "no_group": NO_GROUP,
        "currency": listed.currency,
    }
    return render(request, "dashboard/team_jobs.html", context)


# The export's columns: the job, then its part inside the period (nothing of its whole run).
CSV_COLUMNS = [
    "job_key", "job_id", "name", "user", "job_group", "state", "start", "end", "on_bill",
    "period_start", "period_end", "period_gpu_hours", "period_energy_kwh", "period_facility_kwh",
    "period_co2e_kg", "period_cost", "period_cost_exact", "currency",
]  # fmt: skip


@require_safe
@bad_query_is_400
@login_required
def team_jobs_csv(request: HttpRequest, team_id: int) -> HttpResponse | StreamingHttpResponse:
    """The same jobs as CSV, every one (no pages), with their figures inside the period; last a `total` row of the
    jobs on the bill (`?totals=false` leaves it out): without a filter, the team's bill for the period."""
    team, start, end, chosen = _team_period(request, team_id)
    totals = text_param(request.GET, "totals")
    if totals not in ("", "true", "false"):
        raise QueryError("totals", "true or false.")
    shown = parts_filtered(team_parts_all(user=request.user, team=team, start=start, end=end), chosen)
    period = {"period_start": start.date().isoformat(), "period_end": end.date().isoformat()}
    rows = _csv_rows(shown, period, totals != "false")
    response = StreamingHttpResponse(csv_stream(rows, CSV_COLUMNS), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="fleetwatt-{team.name}-jobs-{period["period_start"]}.csv"'
    return response


def _csv_rows(parts: list[JobPart], period: dict[str, str], with_total: bool) -> Iterator[dict[str, Any]]:
    for first in range(0, len(parts), CSV_CHUNK):
        for job in jobs_of_parts(parts[first : first + CSV_CHUNK]):
            part: JobPart = job.period  # type: ignore[attr-defined]
            yield {
                "job_key": job.job_key, "job_id": job.display_id or job.job_id, "name": job.name, "user": job.user,
                "job_group": part.group, "state": job.state,
                "start": job.start.isoformat() if job.start else "", "end": job.end.isoformat() if job.end else "",
                "on_bill": "true" if part.on_bill else "false", **period, **_figures(part.footprint, part.cost),
                "currency": part.currency,
            }  # fmt: skip
    if with_total:
        total = bill_of(parts)
        currency = ",".join(sorted({p.currency for p in parts if p.on_bill and p.currency}))
        yield {"job_key": "total", "on_bill": "true", **period, **_figures(total.footprint, total.cost),
               "currency": currency}  # fmt: skip


def _figures(fp: Footprint, cost: Decimal) -> dict[str, Any]:
    """A part's figures as the export writes them: quantities without float noise, the cost as booked and exact."""
    return {
        "period_gpu_hours": csv_quantity(fp.gpu_hours),
        "period_energy_kwh": csv_quantity(fp.gpu_kwh),
        "period_facility_kwh": csv_quantity(fp.facility_kwh),
        "period_co2e_kg": csv_quantity(fp.co2e_kg),
        "period_cost": str(cost),
        "period_cost_exact": str(Decimal(fp.cost).quantize(MILLIONTH)),
    }
