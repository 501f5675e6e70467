"""What the pages show of the scheduler: a job's record, the state column of the job tables, the failed runs on
the team and fleet pages, the job groups' delivered-vs-failed split, and the admins' status of the sync."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.fleet.models import Cluster
from apps.jobs.models import Job
from apps.rollups.outcome_selectors import failed_run_totals, job_group_outcomes
from apps.telemetry.models import IngestWatermark
from tests.carbon.fleet_builder import T0
from tests.factories import ClusterFactory, JobFactory, TeamFactory
from tests.rollups.outcomes_world import PERIOD, OutcomesWorld, outcomes_world_build

pytestmark = pytest.mark.django_db

QUERY = f"?start={PERIOD['start']}&end={PERIOD['end']}"
START, END = T0, T0 + timedelta(days=2)  # PERIOD


@pytest.fixture
def world() -> OutcomesWorld:
    return outcomes_world_build()


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _section(html: str, element_id: str) -> str:
    """The HTML of the element with this id (a section or table), up to its closing tag."""
    start = html.index(f'id="{element_id}"')
    tag = html.rfind("<", 0, start)
    name = re.match(r"<(\w+)", html[tag:]).group(1)
    return html[tag : html.index(f"</{name}>", start)]


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


# --- a job's page ---------------------------------------------------------------------------------------------


def test_a_job_s_page_shows_its_scheduler_record(world: OutcomesWorld) -> None:
    # given a run Slurm says failed with exit code 3
    failed = world.jobs["slurm/12"]
    # when its team's member opens its page
    html = _client(world.member).get(f"/jobs/{failed.pk}/").content.decode()
    record = _text(_section(html, "scheduler-record"))
    # then the record is there: state with its label and meaning, exit, queue, times, GPUs and nodes
    assert "Failed Its script exited with a non-zero code." in record
    assert "exit code 3" in record and "gpu, normal" in record
    assert "1 requested, 1 allocated" in record and "c1-n0" in record
    assert failed.submitted_at.strftime("%Y-%m-%d %H:%M:%S") in record
    assert "Not in the scheduler" not in record
    # a run out of memory says so (not "signal 125"); a running one has no end nor exit yet
    oom = _text(_section(_client(world.admin).get(f"/jobs/{world.jobs['slurm/21'].pk}/").content.decode(), "job-exit"))
    assert oom == "ran out of memory (killed)"
    running = _client(world.member).get(f"/jobs/{world.jobs['slurm/15'].pk}/").content.decode()
    assert "none yet" in _section(running, "job-exit") and "Ended not yet" in _text(
        _section(running, "scheduler-record")
    )


def test_a_job_missing_from_the_accounting_and_one_without_a_record_say_so(world: OutcomesWorld) -> None:
    Job.objects.filter(pk=world.jobs["slurm/11"].pk).update(scheduler_missing=True)
    html = _client(world.member).get(f"/jobs/{world.jobs['slurm/11'].pk}/").content.decode()
    assert "Not in the scheduler's accounting" in _section(html, "scheduler-missing")
    # a job no record describes, on a cluster whose accounting is not read
    html = _client(world.member).get(f"/jobs/{world.jobs['k8s/search/p'].pk}/").content.decode()
    record = _text(_section(html, "scheduler-record"))
    assert "Unknown No scheduler record describes it (yet)." in record and "accounting is not read" in record


# --- the job tables ---------------------------------------------------------------------------------------------


def test_the_job_tables_have_a_state_column(world: OutcomesWorld) -> None:
    client = _client(world.member)
    found = _section(client.get("/jobs/", {"q": "sweep-c"}).content.decode(), "jobs")
    assert "<th>State</th>" in found and ">Timed out</span>" in found and 'title="Killed at the end' in found
    top = _section(client.get(f"/teams/{world.vision.pk}/{QUERY}").content.decode(), "top-jobs")
    assert "<th>State</th>" in top
    states = re.findall(r'class="state state-(\w+)"[^>]*>([^<]+)<', top)
    assert (
        ("failed", "Failed") in states and ("completed", "Completed") in states and ("cancelled", "Cancelled") in states
    )


# --- failed runs ----------------------------------------------------------------------------------------------


def test_the_team_page_shows_its_failed_runs_in_kwh_kg_and_money(world: OutcomesWorld) -> None:
    html = _client(world.member).get(f"/teams/{world.vision.pk}/{QUERY}").content.decode()
    section = _section(html, "failed-runs")
    listed = re.findall(r'data-job-key="([^"]+)"', _section(section, "failed-run-jobs"))
    assert sorted(listed) == ["slurm/12", "slurm/13", "slurm/31"]  # failed, timed out; not cancelled nor running
    [totals] = failed_run_totals(user=world.member, start=START, end=END, team=world.vision)
    assert _text(_section(section, "failed-runs-count")) == "3"
    assert _text(_section(section, "failed-runs-kwh")) == f"{totals['facility_kwh']:.1f}"
    assert _text(_section(section, "failed-runs-kg")) == f"{totals['co2e_kg']:.1f}"
    assert _text(_section(section, "failed-runs-cost")) == f"{totals['cost']:.2f}"
    # they are in the waste table too, as the weekly report counts them
    assert "failed_run" in _section(html, "waste")


def test_the_fleet_page_shows_failed_runs_per_team(world: OutcomesWorld) -> None:
    html = _client(world.finance).get(f"/{QUERY}").content.decode()
    table = _section(html, "failed-by-team")
    assert re.findall(r'data-team="([^"]+)"', table) == ["nlp", "vision"]
    every = failed_run_totals(user=world.finance, start=START, end=END)
    cost = sum((t["cost"] for t in every), Decimal(0))
    assert _text(_section(table, "failed-runs-count")) == "4"
    assert _text(_section(table, "failed-runs-cost")) == f"{cost:.2f} EUR"
    # a member sees their team's only
    mine = _section(_client(world.member).get(f"/{QUERY}").content.decode(), "failed-by-team")
    assert re.findall(r'data-team="([^"]+)"', mine) == ["vision"]


# --- job groups --------------------------------------------------------------------------------------------------


def _chart(html: str) -> dict:
    return json.loads(
        re.search(r'<script id="groups-chart-data" type="application/json">(.*?)</script>', html).group(1)
    )


def test_the_groups_page_splits_each_group_by_outcome_as_the_api(world: OutcomesWorld) -> None:
    # when finance and a member open the job groups page
    for user, runs in ((world.finance, 9), (world.member, 6)):
        html = _client(user).get(f"/groups/{QUERY}").content.decode()
        section = _section(html, "group-sweeps")
        api = _client(user).get(f"/api/job-groups/{world.group.pk}/outcomes/{QUERY}").json()
        # then its table and chart are the API's figures, outcome by outcome
        assert re.findall(r'data-outcome="(\w+)"', section) == ["completed", "failed", "cancelled", "other"]
        assert api["total"]["jobs"] == runs and f">{runs}</td>" in section.split("<tfoot>")[1]
        chart = _chart(html)
        [group] = chart["groups"]
        for outcome in api["outcomes"]:
            # (the cost booked, the sum of the runs' rounded costs, as the API's `cost`)
            assert group["outcomes"][outcome["outcome"]]["cost"] == pytest.approx(float(outcome["cost"]))
            assert group["outcomes"][outcome["outcome"]]["facility_kwh"] == pytest.approx(outcome["facility_kwh"])
            assert group["outcomes"][outcome["outcome"]]["co2e_kg"] == pytest.approx(outcome["co2e_kg"])
    assert "Only your teams' runs are counted." in html


def test_the_groups_page_is_in_the_menu_and_takes_a_period(world: OutcomesWorld) -> None:
    client = _client(world.member)
    assert 'href="/groups/"' in client.get("/").content.decode()
    assert client.get("/groups/?start=2026-11-04&end=2026-11-02").status_code == 400
    empty = client.get("/groups/?start=2026-12-01&end=2026-12-02").content.decode()
    assert "No job group had runs in this period" in empty and "No runs in this period: sweeps." in empty
    doc = job_group_outcomes(user=world.member, start=START, end=END)
    assert doc["groups"][0]["total"]["jobs"] == 6


# --- the status of the sync -------------------------------------------------------------------------------------


@pytest.fixture
def synced() -> dict[str, Cluster]:
    """A cluster whose sync works, one whose sacct fails, one without a scheduler; jobs of the last day."""
    now = timezone.now()
    good = ClusterFactory(name="gpu-a", scheduler="slurm_sacct", scheduler_synced_through=now - timedelta(hours=1))
    broken = ClusterFactory(
        name="gpu-b",
        scheduler="slurm_sacct",
        scheduler_synced_through=now - timedelta(days=2),
        scheduler_status="cluster gpu-b: sacct --json: exited 1: sacct: error: Problem talking to the database",
    )
    plain = ClusterFactory(name="gpu-c")
    IngestWatermark.objects.create(
        cluster=good, ingested_through=now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    )
    team = TeamFactory(name="vision")
    recent = {"start": now - timedelta(hours=3), "last_seen": now - timedelta(hours=1), "team": team}
    JobFactory(cluster=good, job_id="1", state="completed", **recent)
    lost = JobFactory(cluster=good, job_id="2", state="unknown", scheduler_missing=True, **recent)
    JobFactory(cluster=broken, job_id="3", state="unknown", **recent)
    old = {"start": now - timedelta(days=5), "last_seen": now - timedelta(days=4), "team": team}
    JobFactory(cluster=broken, job_id="4", state="unknown", **old)  # not of the last day
    JobFactory(cluster=plain, job_id="5", state="unknown", **recent)
    return {"good": good, "broken": broken, "plain": plain, "lost": lost}


def _row(html: str, cluster: str) -> str:
    start = html.index(f'data-cluster="{cluster}"')
    return html[start : html.index("</tr>", start)]


def test_the_status_page_shows_each_cluster_s_ingest_and_sync(synced: dict, django_assert_max_num_queries) -> None:
    admin = User.objects.create_user("root", is_staff=True)
    client = _client(admin)
    with django_assert_max_num_queries(12):
        html = client.get("/status/").content.decode()
    good, broken, plain = _row(html, "gpu-a"), _row(html, "gpu-b"), _row(html, "gpu-c")
    # the energy ingest's watermark, the scheduler, how far its accounting has been read, the last error
    assert "1 h behind" in good and "never" in _text(broken).split("Slurm")[0]
    assert "Slurm: sacct" in good and "(1.0 h ago)" in good
    assert "Problem talking to the database" in broken and 'class="error"' in broken
    assert "not read" in plain
    # the last day's jobs that no record describes, and those missing from the accounting (named)
    assert re.search(r'data-field="unknown">1<', good) and re.search(r'data-field="missing">1:', good)
    assert f'href="/jobs/{synced["lost"].pk}/"' in good
    assert re.search(r'data-field="unknown">1<', broken) and re.search(r'data-field="missing">0<', broken)
    assert re.search(r'data-field="unknown">1<', plain)
    # linked from the admins' menu
    assert 'href="/status/"' in client.get("/").content.decode()


def test_the_status_page_is_for_admins(synced: dict) -> None:
    member = User.objects.create_user("ada")
    answer = _client(member).get("/status/")
    assert answer.status_code == 403
    assert 'href="/status/"' not in _client(member).get("/").content.decode()
    assert Client().get("/status/").status_code == 302  # to the login page
