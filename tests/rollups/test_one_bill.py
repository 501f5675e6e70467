"""One billed figure (docs/api.md, "Money"): over random fleets and periods, the team's cost is the same to the
cent on its page, in the API's rollup and its CSV, in the FOCUS export, in the teams' comparison (the fleet page's
chart), in the team's weekly e-mail and in the fleet summary e-mail: the sum of its jobs' rounded costs."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.reports.schedule import week_window, zone
from apps.reports.selectors import fleet_summary_build, report_build
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

# Jobs start from Thursday 29 October 2026 on: months (October, November) and ISO weeks (44, 45) cut through them.
FIRST = datetime.fromisoformat("2026-10-29T00:00:00+00:00")
DAYS = 12
TEAMS = ("nlp", "vision")


@dataclass(frozen=True)
class Run:
    team: str
    start_h: int
    hours: int
    gpus: int
    power_w: float


runs = st.lists(
    st.builds(
        Run,
        team=st.sampled_from(TEAMS),
        start_h=st.integers(min_value=0, max_value=DAYS * 24 - 2),
        hours=st.integers(min_value=1, max_value=40),
        gpus=st.integers(min_value=1, max_value=2),
        # Watts with decimals: facility kWh x price leaves fractions of a cent on every job.
        power_w=st.floats(min_value=90.0, max_value=700.0).map(lambda w: round(w, 3)),
    ),
    min_size=1,
    max_size=7,
)
# (kind, which): a UTC day, an ISO week (Mondays 26 Oct and 2 Nov) or a calendar month (October, November).
periods = st.one_of(
    st.tuples(st.just("day"), st.integers(min_value=0, max_value=DAYS - 1)),
    st.tuples(st.just("week"), st.integers(min_value=0, max_value=1)),
    st.tuples(st.just("month"), st.integers(min_value=0, max_value=1)),
)
zones = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"])


def _fleet(fleet_runs: list[Run], tz: str) -> dict[str, Team]:
    fleet = fleet_build(servers=1, gpus_per_server=16)
    fleet.cluster.site.timezone = tz
    fleet.cluster.site.save()
    intensity_set("TEST", [0.3] * 24 * (DAYS + 3), start=FIRST)
    teams = {"vision": fleet.team, "nlp": Team.objects.create(name="nlp")}
    gpu = 0
    for k, run in enumerate(fleet_runs):
        gpus = fleet.gpus[gpu : gpu + run.gpus]
        gpu += run.gpus
        job = job_run(fleet, key=f"slurm/{k}", gpus=gpus, hours=run.hours, power_w=run.power_w,
                      start=FIRST + run.start_h * HOUR)  # fmt: skip
        Job.objects.filter(pk=job.pk).update(team=teams[run.team], last_seen=job.start + run.hours * HOUR)
    footprints_recompute()
    return teams


def _bounds(kind: str, which: int) -> tuple[date, date]:
    if kind == "day":
        first = FIRST.date() + timedelta(days=which)
        return first, first + timedelta(days=1)
    if kind == "week":
        first = date(2026, 10, 26) + timedelta(days=7 * which)
        return first, first + timedelta(days=7)
    return (date(2026, 10, 1), date(2026, 11, 1)) if which == 0 else (date(2026, 11, 1), date(2026, 12, 1))


def _finance() -> tuple[APIClient, Client]:
    user = User.objects.create_user("fin", password="pw-fin")
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    api, browser = APIClient(), Client()
    api.force_authenticate(user)
    browser.force_login(user)
    return api, browser


def _rollup(api: APIClient, team: Team, start: str, end: str) -> tuple[Decimal, Decimal]:
    """The rollup's `totals.cost` (JSON) and its CSV's `total` row's cost."""
    query = {"start": start, "end": end, "granularity": "day"}
    doc = api.get(f"/api/teams/{team.pk}/rollup/", query, HTTP_ACCEPT="application/json").json()
    rows = list(csv.DictReader(io.StringIO(api.get(f"/api/teams/{team.pk}/rollup/", {**query, "format": "csv"})
                                           .content.decode())))  # fmt: skip
    total = [r for r in rows if r["period"] == "total"]
    return Decimal(doc["totals"]["cost"]), Decimal(total[0]["cost"]) if total else Decimal("0.00")


def _page(browser: Client, team: Team, first: date, after: date) -> Decimal:
    html = browser.get(f"/teams/{team.pk}/", {"start": first.isoformat(), "end": after.isoformat()}).content.decode()
    found = re.search(r'id="total-cost">([-\d.,]+) ', html)
    assert found, html
    return Decimal(found[1].replace(",", ""))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet_runs=runs, period=periods, tz=zones)
def test_a_teams_cost_is_one_figure_on_every_page_file_and_email(fleet_runs: list[Run], period, tz: str) -> None:
    with transaction.atomic():
        cache.clear()  # (the pks of one example are new, but the teams' comparison is kept per viewer's scope)
        # given a random fleet of two teams' jobs, its site in `tz`, and finance's API and browser sessions
        teams = _fleet(fleet_runs, tz)
        api, browser = _finance()
        first, after = _bounds(*period)
        # when each reads the period (whole UTC days)
        compare = api.get("/api/teams/compare/", {"start": first, "end": after}, HTTP_ACCEPT="application/json")
        compared = {t["team"]: Decimal(t["cost"]) for t in compare.json()}
        focus: dict[str, Decimal] = {}
        if period[0] == "month":
            body = b"".join(api.get("/api/focus/", {"month": first.strftime("%Y-%m")}).streaming_content).decode()
            for row in csv.DictReader(io.StringIO(body)):
                focus[row["SubAccountName"]] = focus.get(row["SubAccountName"], Decimal(0)) + Decimal(row["BilledCost"])
        for name, team in teams.items():
            billed, in_csv = _rollup(api, team, first.isoformat(), after.isoformat())
            # then the page, the API, its CSV, the comparison and FOCUS show the same cost to the cent
            assert _page(browser, team, first, after) == billed == in_csv, name
            assert compared.get(name, Decimal("0.00")) == billed, name
            if period[0] == "month":
                assert focus.get(name, Decimal("0.00")) == billed, name
        if period[0] == "week":
            # and the e-mails of that week (Monday to Monday in the site's time zone) book what the API books
            # for the same hours, the team's and the fleet's alike
            start, end = week_window(first, zone(tz))
            fleet_lines = {line.team_name: line for line in fleet_summary_build(week_start=first).teams}
            for name, team in teams.items():
                billed, in_csv = _rollup(api, team, start.isoformat(), end.isoformat())
                assert report_build(team=team, week_start=first).week.cost == billed == in_csv, name
                line = fleet_lines.get(name)
                assert (line.week.cost if line and line.week else Decimal("0.00")) == billed, name
        transaction.set_rollback(True)
