"""A team's waste in its rollups (docs/arithmetic.md, "Waste in a period"): each period carries the team's waste,
read through apps.waste.selectors.period_waste, so that over a week and a month that cut through a job's findings,
in a site's time zone, the team page, the rollup (JSON and CSV), the weekly report and the audit queue show the same
waste to the cent; and only what counts: disputed findings still do, acknowledged ones and excluded jobs do not."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from rest_framework.test import APIClient

from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import Fact, Scope, derive
from apps.reports.schedule import week_window, zone
from apps.reports.selectors import report_build
from apps.rollups import selectors
from apps.rollups.services import team_waste_days_refresh
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

# Sunday 29 November 2026, 20:00 UTC: the first job's two findings run into the week of Monday 30 November and into
# December; the others start on that Monday and cross into December 1st.
JOB_START = datetime(2026, 11, 29, 20, tzinfo=UTC)
MONDAY = datetime(2026, 11, 30, 10, tzinfo=UTC)
WEEK = date(2026, 11, 30)
MONTHS = ((date(2026, 11, 1), date(2026, 12, 1)), (date(2026, 12, 1), date(2027, 1, 1)))
CENT = Decimal("0.01")

# key: (team, GPUs from, GPUs, hours, start, the findings' status, excluded from the bill)
RUNS = {
    "slurm/1": ("nlp", 0, 2, 40, JOB_START, "open", False),  # idle, then failed: two findings on the same hours
    "slurm/2": ("nlp", 2, 1, 3, datetime(2026, 11, 21, tzinfo=UTC), "open", False),  # November only
    "slurm/3": ("nlp", 3, 1, 30, MONDAY, "disputed", False),  # still waste: the queue lists open ones by default
    "slurm/4": ("nlp", 4, 1, 5, MONDAY, "acknowledged", False),  # expected: not waste
    "slurm/5": ("nlp", 5, 1, 6, MONDAY, "open", True),  # off the team's bill: not its waste
    "slurm/6": ("vision", 6, 1, 20, MONDAY, "open", False),  # another team's
}


def _world(tz: str) -> tuple[Team, Team]:
    fleet = fleet_build(servers=1, gpus_per_server=8)
    fleet.cluster.site.timezone = tz
    fleet.cluster.site.save()
    intensity_set("TEST", [0.3] * 24 * 20, start=datetime(2026, 11, 20, tzinfo=UTC))
    teams = {"vision": fleet.team, "nlp": Team.objects.create(name="nlp")}
    for key, (team, first, gpus, hours, start, _, excluded) in RUNS.items():
        # idle on whole GPUs (an idle allocation), then failed (a failed run)
        job = job_run(fleet, key=key, gpus=fleet.gpus[first : first + gpus], hours=hours, power_w=121.7, start=start)
        job.team, job.state, job.exit_code, job.signal = teams[team], "failed", 1, 0
        job.scheduler, job.job_id, job.last_seen = "slurm", key.split("/")[1], start + hours * HOUR
        job.scheduler_start, job.scheduler_end, job.scheduler_seen_at = start, job.last_seen, job.last_seen
        job.excluded_from_bill = excluded
        job.save()
    with transaction.atomic():
        derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
    for key, (*_, status, _) in RUNS.items():
        found = Flag.objects.filter(job__job_key=key, kind__in=["idle_allocation", "failed_run"])
        assert found.count() == 2, key  # each job: two findings over the same GPU-hours
        found.update(status=status)
    with transaction.atomic():  # as an admin's decisions on them would (apps.pipeline.decisions.flag_review)
        derive(Scope.jobs(Job.objects.values_list("pk", flat=True)), changed={Fact.FINDING_STATUS})
    return teams["nlp"], teams["vision"]


def _utc(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def _tie_the_week(team: Team) -> Decimal:
    """Move one GPU-hour's cost so that the week's waste is an exact half cent over an even cent: rounding half
    up and half-even then differ, and every figure must round it one way."""
    counted = counted_flags(Flag.objects.filter(job__team=team))
    exact = period_waste(flags=counted, start=_utc(WEEK), end=_utc(WEEK + timedelta(days=7))).total.cost
    cents = (exact / CENT).to_integral_value(rounding=ROUND_FLOOR)
    target = (cents - cents % 2) * CENT + Decimal("0.005")
    row = JobGpuHour.objects.filter(job__job_key="slurm/1", hour=MONDAY).first()
    assert row is not None
    JobGpuHour.objects.filter(pk=row.pk).update(cost=row.cost + (target - exact))
    # the team's stored waste days read the moved cost, as the derivation that writes a row's cost refreshes them
    team_waste_days_refresh(team_ids=[team.pk], days=[MONDAY.date() + timedelta(days=i) for i in range(-1, 3)])
    return target


def _clients(team: Team) -> tuple[Client, APIClient]:
    admin = Client()
    admin.force_login(User.objects.create_user("root", password="pw-root", is_staff=True))
    member = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=member, team=team)
    api = APIClient()
    api.force_authenticate(member)
    return admin, api


def _money(html: str, element: str) -> Decimal:
    found = re.search(rf'id="{element}">([-\d.,]+)<', html)
    assert found, html
    return Decimal(found[1].replace(",", ""))


def _team_page(admin: Client, team: Team, first: date, after: date) -> Decimal:
    html = admin.get(f"/teams/{team.pk}/", {"start": first.isoformat(), "end": after.isoformat()}).content.decode()
    return _money(html, "waste-counted-cost")


def _queue(admin: Client, team: Team, first: date, after: date) -> Decimal:
    # the queue as it opens (open findings listed), filtered to the team
    html = admin.get("/audit/", {"team": team.name, "start": first.isoformat(), "end": after.isoformat()})
    return _money(html.content.decode(), "audit-waste-cost")


def _rollup(api: APIClient, team: Team, start: str, end: str, granularity: str = "day") -> tuple[dict, list[dict]]:
    """The team's rollup as JSON and as CSV rows."""
    query = {"start": start, "end": end, "granularity": granularity}
    doc = api.get(f"/api/teams/{team.pk}/rollup/", query, HTTP_ACCEPT="application/json")
    assert doc.status_code == 200, doc.content
    text = api.get(f"/api/teams/{team.pk}/rollup/", {**query, "format": "csv"}).content.decode()
    return doc.json(), list(csv.DictReader(io.StringIO(text)))


def _waste_total(doc: dict, rows: list[dict]) -> Decimal:
    """The rollup's waste over its range: `totals.waste.cost`, the same as its CSV's total row."""
    [total] = [r for r in rows if r["period"] == "total"]
    assert Decimal(total["waste_cost"]) == Decimal(doc["totals"]["waste"]["cost"])
    # its exact figure is its periods' added up, and it is that rounded once
    exact = sum((Decimal(p["waste"]["cost_exact"]) for p in doc["periods"]), Decimal(0))
    assert Decimal(doc["totals"]["waste"]["cost_exact"]) == exact
    assert Decimal(doc["totals"]["waste"]["cost"]) == exact.quantize(CENT)  # (half-even: Decimal's own rounding)
    return Decimal(doc["totals"]["waste"]["cost"])


def _expected(team: Team, start: datetime, end: datetime) -> Any:
    """The team's waste read straight from the selector: its counted findings of the range."""
    return period_waste(flags=counted_flags(Flag.objects.filter(job__team=team)), start=start, end=end).total


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin"])
def test_the_team_page_the_rollup_the_weekly_report_and_the_audit_queue_show_one_waste(tz: str) -> None:
    # given a team whose findings cut through a week's and a month's end, in a site's time zone, one of them
    # disputed, one acknowledged, one on a job off its bill; another team's beside them; and the week's waste
    # an exact half cent
    nlp, vision = _world(tz)
    tie = _tie_the_week(nlp)
    admin, api = _clients(nlp)
    for first, after in ((WEEK, WEEK + timedelta(days=7)), *MONTHS):
        # when the team page, the audit queue and the rollup are asked for the same UTC days
        doc, rows = _rollup(api, nlp, first.isoformat(), after.isoformat())
        in_rollup = _waste_total(doc, rows)
        # then they show the same waste, to the cent
        assert _team_page(admin, nlp, first, after) == _queue(admin, nlp, first, after) == in_rollup, first
        expected = _expected(nlp, _utc(first), _utc(after))
        assert in_rollup == expected.cost.quantize(CENT) > 0
        assert doc["totals"]["waste"]["gpu_hours"] == pytest.approx(expected.gpu_hours)
        assert doc["totals"]["waste"]["energy_kwh"] == pytest.approx(expected.gpu_kwh)
    assert Decimal(_rollup(api, nlp, "2026-11-30", "2026-12-07")[0]["totals"]["waste"]["cost_exact"]) == tie
    # when the weekly report is built for the week (Monday to Monday in the site's time zone)
    start, end = week_window(WEEK, zone(tz))
    report = report_build(team=nlp, week_start=WEEK)
    doc, rows = _rollup(api, nlp, start.isoformat(), end.isoformat(), granularity="week")
    # then the rollup of those very hours books the report's waste
    assert (
        report.waste_total.cost.quantize(CENT)
        == _waste_total(doc, rows)
        == _expected(nlp, start, end).cost.quantize(CENT)
    )
    assert doc["totals"]["waste"]["gpu_hours"] == pytest.approx(report.waste_total.gpu_hours)
    if tz == "UTC":  # the report's week is the page's seven UTC days
        assert _team_page(admin, nlp, WEEK, WEEK + timedelta(days=7)) == report.waste_total.cost.quantize(CENT)


def test_each_period_holds_its_part_of_a_finding_and_a_gpu_hour_once() -> None:
    nlp, _ = _world("UTC")
    admin, api = _clients(nlp)
    # when the rollup is asked per month over November and December
    doc, _ = _rollup(api, nlp, "2026-11-01", "2027-01-01", granularity="month")
    by_month = {p["period"]: p["waste"] for p in doc["periods"]}
    # then each month holds the waste of its own hours: the team page's for that month
    for first, after in MONTHS:
        assert Decimal(by_month[first.isoformat()]["cost"]) == _team_page(admin, nlp, first, after)
    # and the first job's 40 hours on its two GPUs are counted once, though two findings name them: 28 hours of
    # them in November, 12 in December, beside the other counted jobs' hours
    counted = {"slurm/1": 2 * 28, "slurm/2": 3, "slurm/3": 14}, {"slurm/1": 2 * 12, "slurm/3": 16}
    for month, hours in zip(("2026-11-01", "2026-12-01"), counted, strict=True):
        assert by_month[month]["gpu_hours"] == pytest.approx(sum(hours.values())), month
    # and the days add up to the month, the week's days to the week
    days, _ = _rollup(api, nlp, "2026-11-01", "2027-01-01", granularity="day")
    for month, waste in by_month.items():
        parts = [p["waste"] for p in days["periods"] if p["period"][:7] == month[:7]]
        assert sum(Decimal(w["cost_exact"]) for w in parts) == Decimal(waste["cost_exact"])
        assert sum(w["gpu_hours"] for w in parts) == pytest.approx(waste["gpu_hours"])


def test_the_rollups_of_clusters_and_job_groups_have_no_waste_line_and_another_team_sees_none() -> None:
    nlp, vision = _world("UTC")
    _, api = _clients(nlp)
    start, end = _utc(WEEK), _utc(WEEK + timedelta(days=7))
    cluster = Job.objects.get(job_key="slurm/1").cluster
    # a cluster's rollup bills no team: no waste line
    doc = selectors.cluster_rollup(cluster=cluster, start=start, end=end, granularity="day")
    assert doc["periods"] and all(p["waste"] is None for p in doc["periods"])
    # the other team's rollup holds its own waste, none of nlp's; and a member of nlp cannot read it
    other = selectors.team_rollup(team=vision, start=start, end=end, granularity="week")
    assert Decimal(other["periods"][0]["waste"]["cost"]) == _expected(vision, start, end).cost > 0
    assert api.get(f"/api/teams/{vision.pk}/rollup/", {"week": "2026-W49"}).status_code == 404
