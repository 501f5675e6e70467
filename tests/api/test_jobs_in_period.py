"""The part of each job inside the period asked for (`/api/jobs/?start=&end=`, JSON pages and the streamed CSV):
beside the whole run's figures, and adding up to the team's bill for the period exactly (docs/api.md, "Money")."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from apps.core.access.policy import FINANCE_GROUP
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

PERIOD = {"start": "2026-11-03", "end": "2026-11-05"}


@pytest.fixture
def client() -> APIClient:
    # given vision's jobs: one before the period and one after it, two across its edges, one inside, one across
    # both, and one inside that an admin excluded from the bill; at watts that leave fractions of a cent
    fleet = fleet_build(servers=1, gpus_per_server=8)
    intensity_set("TEST", [0.3] * 24 * 6)
    spans = {"before": (0, 10), "across-start": (20, 9), "inside": (30, 7), "across-end": (60, 20),
             "both": (10, 70), "after": (80, 5), "excluded": (40, 3)}  # fmt: skip
    for k, (name, (start_h, hours)) in enumerate(spans.items()):
        job = job_run(fleet, key=f"slurm/{name}", gpus=fleet.gpus[k : k + 1], hours=hours, power_w=137.123 + k,
                      start=T0 + start_h * HOUR)  # fmt: skip
        Job.objects.filter(pk=job.pk).update(last_seen=job.start + hours * HOUR, excluded_from_bill=name == "excluded")
    footprints_recompute()
    finance = User.objects.create_user("fin", password="pw-fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    api = APIClient()
    api.force_authenticate(finance)
    return api


def _pages(client: APIClient, params: dict) -> list[dict]:
    jobs, url, query = [], "/api/jobs/", {**params, "page_size": 2}
    while url:
        page = client.get(url, query, HTTP_ACCEPT="application/json").json()
        jobs += page["results"]
        url, query = page["next"], {}
    return jobs


def test_the_in_period_costs_add_up_to_the_teams_bill_and_the_whole_runs_do_not(client: APIClient) -> None:
    # when finance lists vision's jobs of the period, page by page, and reads its rollup
    jobs = _pages(client, {"team": "vision", **PERIOD})
    team = Job.objects.first().team  # type: ignore[union-attr]
    rollup = client.get(f"/api/teams/{team.pk}/rollup/", PERIOD, HTTP_ACCEPT="application/json").json()
    # then the jobs that ran in the period are listed, each with its part in the period beside the whole run
    assert sorted(j["job_key"] for j in jobs) == [
        "slurm/across-end", "slurm/across-start", "slurm/both", "slurm/excluded", "slurm/inside"
    ]  # fmt: skip
    on_bill = [j for j in jobs if not j["excluded_from_bill"]]
    billed = Decimal(rollup["totals"]["cost"])
    # and the in-period costs of the jobs on the bill add up to the bill to the cent, the whole runs' do not
    assert sum(Decimal(j["period_cost"]) for j in on_bill) == billed
    assert sum(Decimal(j["cost"]) for j in on_bill) > billed
    assert sum(j["period_gpu_hours"] for j in on_bill) == pytest.approx(rollup["totals"]["gpu_hours"])
    assert sum(j["period_energy_kwh"] for j in on_bill) == pytest.approx(rollup["totals"]["energy_kwh"])
    assert sum(j["period_facility_kwh"] for j in on_bill) == pytest.approx(rollup["totals"]["facility_kwh"])
    kg = rollup["totals"]["operational_kg"] + rollup["totals"]["embodied_kg"]
    assert sum(j["period_co2e_kg"] for j in on_bill) == pytest.approx(kg)
    inside = next(j for j in jobs if j["job_key"] == "slurm/inside")
    assert inside["period_cost"] == inside["cost"] and inside["period_gpu_hours"] == 7
    both = next(j for j in jobs if j["job_key"] == "slurm/both")
    assert both["period_gpu_hours"] == 48
    assert Decimal(both["period_cost_exact"]) < Decimal(both["cost_exact"])


def test_the_streamed_csv_has_the_same_in_period_columns(client: APIClient) -> None:
    # when finance downloads the period's jobs as one CSV
    body = b"".join(client.get("/api/jobs/", {**PERIOD, "format": "csv"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    # then each row carries the in-period figures, the same as the JSON's
    paged = {j["job_key"]: j for j in _pages(client, PERIOD)}
    assert len(rows) == len(paged) == 5
    for row in rows:
        assert row["period_cost"] == paged[row["job_key"]]["period_cost"]
        assert float(row["period_gpu_hours"]) == pytest.approx(paged[row["job_key"]]["period_gpu_hours"])
    team = Job.objects.first().team  # type: ignore[union-attr]
    rollup = client.get(f"/api/teams/{team.pk}/rollup/", PERIOD, HTTP_ACCEPT="application/json").json()
    on_bill = [r for r in rows if r["excluded_from_bill"] == "False"]
    assert sum(Decimal(r["period_cost"]) for r in on_bill) == Decimal(rollup["totals"]["cost"])


def test_without_a_period_the_in_period_figures_are_null_not_zero(client: APIClient) -> None:
    # when the jobs are listed with no period
    jobs = _pages(client, {"team": "vision"})
    # then there is no in-period figure (null), rather than a zero that reads as "nothing in the period"
    assert len(jobs) == 7
    assert all(j["period_cost"] is None and j["period_gpu_hours"] is None for j in jobs)


def test_a_period_that_cannot_be_read_is_a_400_naming_it(client: APIClient) -> None:
    response = client.get("/api/jobs/", {"start": "yesterday", "end": "2026-11-05"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "start" in response.json()
