"""Waste counted once (apps.waste.selectors.period_waste): a finding is worth its part inside the period asked
for, a GPU-hour two findings of one job share counts once, and the team page, the weekly report and the audit
queue agree, across a week's and a month's boundary and in a site's time zone."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.pipeline.derive import Fact, Scope, derive
from apps.reports.formatting import money
from apps.reports.schedule import week_window, zone
from apps.reports.selectors import report_build
from apps.waste.models import Flag
from apps.waste.selectors import period_waste
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

# Sunday 29 November 2026, 20:00 UTC: the job runs into the week of Monday 30 November and into December.
JOB_START = datetime(2026, 11, 29, 20, tzinfo=UTC)
JOB_HOURS = 40
WEEK = date(2026, 11, 30)


def _world(tz: str) -> tuple[Team, Job, Job]:
    # given an nlp job alone on two GPUs, doing nothing (an idle allocation) and then failing (a failed run): two
    # findings on the same GPU-hours; and an older job whose finding has nothing in the periods asked for
    fleet = fleet_build(servers=1, gpus_per_server=4)
    fleet.cluster.site.timezone = tz
    fleet.cluster.site.save()
    intensity_set("TEST", [0.3] * 24 * 12, start=datetime(2026, 11, 20, tzinfo=UTC))
    nlp = Team.objects.create(name="nlp")
    idle = job_run(fleet, key="slurm/1", gpus=fleet.gpus[:2], hours=JOB_HOURS, power_w=121.7, start=JOB_START)
    old = job_run(fleet, key="slurm/2", gpus=fleet.gpus[2:3], hours=3, power_w=80.0,
                  start=datetime(2026, 11, 21, tzinfo=UTC))  # fmt: skip
    for job, hours in ((idle, JOB_HOURS), (old, 3)):
        job.team, job.state, job.exit_code, job.signal = nlp, "failed", 1, 0
        job.scheduler, job.job_id, job.last_seen = "slurm", job.job_key.split("/")[1], job.start + hours * HOUR
        job.scheduler_start, job.scheduler_end, job.scheduler_seen_at = job.start, job.last_seen, job.last_seen
        job.save()
    with transaction.atomic():
        derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
    kinds = set(Flag.objects.filter(job=idle).values_list("kind", flat=True))
    assert {"idle_allocation", "failed_run"} <= kinds  # the case: two findings over the same GPU-hours
    return nlp, idle, old


def _admin() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("root", password="pw-root", is_staff=True))
    return client


def _team_page(client: Client, team: Team, first: date, after: date) -> tuple[str, str]:
    """The team page's counted waste (its cost as shown) and the page."""
    html = client.get(f"/teams/{team.pk}/", {"start": first.isoformat(), "end": after.isoformat()}).content.decode()
    found = re.search(r'id="waste-counted-cost">([^<]*)<', html)
    return (found[1] if found else ""), html


def _queue(client: Client, team: Team, first: date, after: date) -> str:
    query = {"team": team.name, "start": first.isoformat(), "end": after.isoformat()}
    html = client.get("/audit/", query).content.decode()
    found = re.search(r'id="audit-waste-cost">([^<]*)<', html)
    return found[1] if found else ""


def _union_hours(job: Job, start: datetime, end: datetime) -> float:
    """The job's GPU-hours inside [start, end): what its findings are worth together, counted once."""
    hours = sum(1 for k in range(JOB_HOURS) if start <= JOB_START + k * HOUR < end)
    return 2.0 * hours


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin"])
def test_the_team_page_the_weekly_report_and_the_audit_queue_count_each_gpu_hour_once(tz: str) -> None:
    nlp, idle, old = _world(tz)
    client = _admin()
    # when the week's report is built (Monday to Monday in the site's time zone)
    start, end = week_window(WEEK, zone(tz))
    report = report_build(team=nlp, week_start=WEEK)
    # then its waste is the job's GPU-hours inside that week, once, though two findings name them
    assert report.waste_total.gpu_hours == pytest.approx(_union_hours(idle, start, end))
    lines = {line.kind: line for line in report.waste}
    assert lines["idle_allocation"].totals.gpu_hours == pytest.approx(_union_hours(idle, start, end))
    assert lines["failed_run"].totals.gpu_hours == pytest.approx(_union_hours(idle, start, end))
    # and it is what the shared reading of the same hours gives
    shared = period_waste(flags=Flag.objects.filter(job__team=nlp), start=start, end=end, tz=zone(tz))
    assert shared.total.cost == report.waste_total.cost
    # when the team page and the audit queue are asked for the week's UTC days
    first, after = WEEK, WEEK + timedelta(days=7)
    utc_start, utc_end = (datetime.combine(d, datetime.min.time(), tzinfo=UTC) for d in (first, after))
    on_page, html = _team_page(client, nlp, first, after)
    in_queue = _queue(client, nlp, first, after)
    utc = period_waste(flags=Flag.objects.filter(job__team=nlp), start=utc_start, end=utc_end)
    # then both show those days' waste, counted once: the same figure to the cent
    assert utc.total.gpu_hours == pytest.approx(_union_hours(idle, utc_start, utc_end))
    assert on_page == in_queue == money(utc.total.cost) != ""
    if tz == "UTC":  # the report's week is these very days
        assert on_page == money(report.waste_total.cost)
    # and the old job's finding, worth nothing in the week, is not listed as waste
    assert f'data-job-key="{idle.job_key}"' in html and f'data-job-key="{old.job_key}"' not in html


def test_a_finding_across_a_months_end_is_counted_in_each_month_for_its_part_only() -> None:
    nlp, idle, _ = _world("UTC")
    client = _admin()
    # when the team page is asked for November and for December
    november, _ = _team_page(client, nlp, date(2026, 11, 1), date(2026, 12, 1))
    december, _ = _team_page(client, nlp, date(2026, 12, 1), date(2027, 1, 1))
    # then each month counts the job's GPU-hours inside it, and the two add up to the job's waste once
    whole = period_waste(flags=Flag.objects.filter(job=idle), start=JOB_START, end=JOB_START + JOB_HOURS * HOUR)
    parts = [
        period_waste(flags=Flag.objects.filter(job=idle), start=datetime(2026, 11, 1, tzinfo=UTC),
                     end=datetime(2026, 12, 1, tzinfo=UTC)),
        period_waste(flags=Flag.objects.filter(job=idle), start=datetime(2026, 12, 1, tzinfo=UTC),
                     end=datetime(2027, 1, 1, tzinfo=UTC)),
    ]  # fmt: skip
    assert [p.total.gpu_hours for p in parts] == [2.0 * 28, 2.0 * 12]
    months = [(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
              (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))]  # fmt: skip
    team = [period_waste(flags=Flag.objects.filter(job__team=nlp), start=a, end=b).total.cost for a, b in months]
    assert [november, december] == [money(cost) for cost in team]  # (November has the old job's finding too)
    assert parts[0].total.cost + parts[1].total.cost == whole.total.cost
    assert whole.total.gpu_hours == pytest.approx(2.0 * JOB_HOURS)  # once, not once per finding
    evidence_cost = sum(Decimal(f.evidence["cost"]) for f in Flag.objects.filter(job=idle))
    assert evidence_cost > whole.total.cost  # the findings' own evidence, added up, counted the hours twice
