"""What a weekly report says (apps/reports/selectors.py): the team's week of record beside the week before, its waste
(never more than the week), the worst jobs, the days' bars; the fleet summary, never summing across currencies; the
time zones; the document the templates and the archive read. The world is tests/reports/conftest.py's; the email
itself tests/reports/test_weekly_email.py."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest

from apps.carbon.models import Site
from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.reports.models import ReportRecipient, WeeklyReport
from apps.reports.selectors import (
    absolute,
    due_teams,
    fleet_summary_build,
    fleet_timezone,
    job_path,
    report_build,
    report_document,
    team_timezone,
)
from tests.carbon.fleet_builder import fleet_build, job_run

from .conftest import PREVIOUS, WEEK, World

pytestmark = pytest.mark.django_db


def test_the_week_beside_the_week_before(world: World) -> None:
    # when
    report = report_build(team=world.fleet.team, week_start=WEEK)
    # then the week holds this week's jobs, the week before last week's job
    assert report.week.gpu_hours == pytest.approx(2 * 10 + 3 + 4 + 2 * 2 * 0.5)
    assert report.previous.gpu_hours == pytest.approx(5)
    assert (report.start.date(), report.end - report.start) == (WEEK, timedelta(days=7))
    assert (report.currency, report.intensity_basis, report.intensity_sources) == ("EUR", "location", ["test"])
    gpu_hours = next(c for c in report.changes if c.metric == "gpu_hours")
    assert gpu_hours.delta == pytest.approx(report.week.gpu_hours - 5)
    assert gpu_hours.pct == pytest.approx(100 * (report.week.gpu_hours - 5) / 5)
    # and the days' bars: each adds up to 100 %, the busiest day is full, the days add up to the week
    assert len(report.days) == 7 and report.days[0].label == "Mon 2 Nov"
    for day in report.days:
        assert day.busy_pct + day.waste_pct + day.rest_pct == 100
        assert day.waste_gpu_hours <= day.gpu_hours
    assert min(day.rest_pct for day in report.days) == 0
    assert sum(day.gpu_hours for day in report.days) == pytest.approx(report.week.gpu_hours)
    # and its document is plain JSON, money as text
    doc = report_document(report)
    assert json.loads(json.dumps(doc)) == doc
    assert isinstance(doc["week"]["cost"], str) and Decimal(doc["week"]["cost"]) == report.week.cost
    assert doc["week"]["operational_kg"] > 0 and doc["week_start"] == WEEK.isoformat()


def test_the_waste_is_never_more_than_the_week_and_the_worst_jobs_come_by_money(world: World) -> None:
    report = report_build(team=world.fleet.team, week_start=WEEK)
    counted = [line for line in report.waste if line.counted]
    assert sum(line.jobs for line in counted) >= 2  # the memory hog and the idle job
    assert Decimal(0) < report.waste_total.cost <= report.week.cost
    assert report.waste_cost_pct == pytest.approx(100 * float(report.waste_total.cost / report.week.cost))
    low = next(line for line in report.waste if not line.counted)
    assert (low.kind, low.jobs, low.mean_coverage) == ("low_coverage", 1, pytest.approx(0.8))
    # the worst jobs, by money, with their links and advice
    worst = report.worst_jobs
    assert 1 <= len(worst) <= 5
    assert [w.totals.cost for w in worst] == sorted((w.totals.cost for w in worst), reverse=True)
    assert {w.job_key for w in worst} >= {"slurm/hog", "slurm/idle"}
    hog = next(w for w in worst if w.job_key == "slurm/hog")
    assert hog.url == absolute(hog.path) and hog.path == job_path(hog.id)
    assert hog.kinds == ["memory_hog"] and hog.advice


def test_a_team_without_jobs_has_an_empty_week() -> None:
    fleet_build(servers=1, gpus_per_server=1)
    report = report_build(team=Team.objects.create(name="empty"), week_start=WEEK)
    assert (report.week.gpu_hours, report.waste_total.cost, report.worst_jobs) == (0.0, Decimal(0), [])
    assert report.waste_cost_pct is None and report.time_zone == "UTC"


def test_the_fleet_summary_of_every_active_team_and_never_a_total_across_currencies(world: World) -> None:
    summary = fleet_summary_build(week_start=WEEK)
    assert [line.team_name for line in summary.teams] == ["vision"]  # nlp ran nothing
    assert summary.total is not None and summary.total.cost == summary.teams[0].week.cost
    assert summary.currency == "EUR" and not summary.notes
    assert summary.idle.facility_kwh == pytest.approx(summary.idle_seen.facility_kwh + summary.unseen.facility_kwh)
    # when another team works on a site that bills in dollars: no total across currencies
    other = fleet_build(name="us", servers=1, gpus_per_server=1)
    Site.objects.filter(pk=other.cluster.site_id).update(currency="USD")
    nlp = Team.objects.get(name="nlp")
    job = job_run(other, key="slurm/nlp", gpus=other.gpus, hours=1, power_w=300, start=PREVIOUS + timedelta(days=8))
    Job.objects.filter(pk=job.pk).update(team=nlp)
    footprints_recompute()
    summary = fleet_summary_build(week_start=WEEK)
    assert summary.total is None and summary.currency == ""
    assert summary.notes == [
        "No fleet total: teams differ in currency or intensity basis, and a report never mixes them."
    ]


def test_time_zones_and_the_teams_due_a_report(world: World) -> None:
    assert team_timezone(world.fleet.team) == "UTC" and team_timezone(world.other_team) == "UTC"
    Site.objects.filter(pk=world.fleet.cluster.site_id).update(timezone="Europe/Berlin")
    assert team_timezone(world.fleet.team) == "Europe/Berlin"
    assert team_timezone(world.other_team) == "UTC"  # no job with a site
    assert fleet_timezone() == "Europe/Berlin"
    # the teams due a report: those with an active recipient
    assert [t.name for t in due_teams()] == ["nlp", "vision"]
    ReportRecipient.objects.filter(team=world.other_team).update(active=False)
    assert [t.name for t in due_teams()] == ["vision"]
    assert not WeeklyReport.objects.exists()  # reads only
