"""Energy to carbon and money: DESIGN section 4's worked example and the accounting rules."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.carbon.arithmetic import HourFactors, footprint, intensity_fill, sci_kg, shift_saving_kg, tdp_estimate_j
from apps.carbon.models import JobGroup, Site
from apps.carbon.services import job_groups_assign
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.rollups.selectors import cluster_rollup, team_rollup
from apps.telemetry.models import GpuHour
from apps.waste.models import Flag

from .fleet_builder import HOUR, T0, fleet_build, idle_hours, intensity_set, job_run

pytestmark = pytest.mark.django_db


def test_worked_example_of_the_design() -> None:
    # given 64 GPUs on 8 servers for 30 h at 550 W, overhead 1.3, PUE 1.2, 0.35 kg/kWh, 3,000 kg a server
    fleet = fleet_build(pue=1.2, overhead=1.3)
    intensity_set("TEST", [0.35] * 30)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=30, power_w=550.0)
    # when
    footprints_recompute()
    job = Job.objects.get(job_key="slurm/1")
    # then, rounded as the design shows them, exact in the code
    assert job.energy_j == 0  # the summary is the ingest's; here only the footprint is computed
    assert round(job.server_kwh) == 1373 and job.server_kwh == pytest.approx(1056 * 1.3)
    assert round(job.facility_kwh) == 1647 and job.facility_kwh == pytest.approx(1056 * 1.3 * 1.2)
    assert round(job.operational_kg) == 577 and job.operational_kg == pytest.approx(1056 * 1.3 * 1.2 * 0.35)
    assert round(job.embodied_kg) == 16 and job.embodied_kg == pytest.approx(3000 / 43800 * 8 * 30)
    assert round(sci_kg(operational_kg=job.operational_kg, embodied_kg=job.embodied_kg, work_units=None)) == 593
    assert job.intensity_basis == "location" and job.intensity_source == "test" and job.currency == "EUR"
    # and at 0.05 kg/kWh
    intensity_set("TEST", [0.05] * 30)
    footprints_recompute()
    assert round(Job.objects.get(job_key="slurm/1").operational_kg) == 82


def test_cost_is_gpu_hours_at_the_rate_plus_facility_energy_at_the_price() -> None:
    fleet = fleet_build(pue=1.2, overhead=1.3, price="0.20", rate="2.50")
    intensity_set("TEST", [0.35] * 30)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=30, power_w=550.0)
    footprints_recompute()
    job = Job.objects.get(job_key="slurm/1")
    expected = Decimal("1920") * Decimal("2.50") + Decimal(repr(1056 * 1.3 * 1.2)) * Decimal("0.20")
    assert job.cost.quantize(Decimal("0.01")) == expected.quantize(Decimal("0.01"))
    assert Decimal("1920") * Decimal("2.50") > 10 * Decimal(repr(job.facility_kwh)) * Decimal(
        "0.20"
    )  # GPU-hours dominate


def test_a_run_in_clean_hours_emits_less_than_at_the_mean_and_the_hourly_figure_is_reported() -> None:
    fleet = fleet_build(servers=1)
    day = [0.5] * 10 + [0.1] * 4 + [0.5] * 10  # a clean midday window
    intensity_set("TEST", day)
    job_run(fleet, key="slurm/clean", gpus=fleet.gpus[:1], hours=4, power_w=500, start=T0 + 10 * HOUR)
    footprints_recompute()
    job = Job.objects.get(job_key="slurm/clean")
    at_mean = job.facility_kwh * (sum(day) / len(day))
    assert job.operational_kg == pytest.approx(job.facility_kwh * 0.1)
    assert job.operational_kg < at_mean


def test_a_provider_inclusive_site_never_gets_pue_twice() -> None:
    fleet = fleet_build(pue=1.0, provider_includes_overhead=True, overhead=None)
    Site.objects.filter(pk=fleet.cluster.site_id).update(pue=1.4, pue_by_month={"11": 1.5})
    intensity_set("TEST", [0.3] * 2)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:2], hours=2, power_w=500)
    footprints_recompute()
    job = Job.objects.get(job_key="slurm/1")
    assert job.facility_kwh == pytest.approx(job.server_kwh) == pytest.approx(2 * 2 * 0.5)


def test_missing_intensity_is_filled_never_zero_and_flagged() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.4, 0.4])  # hours 0 and 1 only
    job_run(fleet, key="slurm/late", gpus=fleet.gpus[:1], hours=2, power_w=500, start=T0 + 3 * HOUR)
    footprints_recompute()
    job = Job.objects.get(job_key="slurm/late")
    assert job.operational_kg == pytest.approx(job.facility_kwh * 0.4)  # nearest within 3 h, then the mean
    assert job.intensity_estimated
    assert Flag.objects.filter(kind="estimated_intensity", job=job).exists()
    assert "estimated_intensity" in job.flags


def test_fill_rule() -> None:
    known = {T0: 0.2, T0 + 5 * HOUR: 0.6}
    means = {(2026, 11): 0.3}
    assert intensity_fill(T0, known=known, monthly_mean=means, within_hours=3) == (0.2, False)
    assert intensity_fill(T0 + 2 * HOUR, known=known, monthly_mean=means, within_hours=3) == (0.2, True)
    assert intensity_fill(T0 + 3 * HOUR, known=known, monthly_mean=means, within_hours=3) == (0.6, True)
    assert intensity_fill(T0 - 10 * HOUR, known=known, monthly_mean=means, within_hours=3) == (0.3, True)
    assert intensity_fill(T0, known={}, monthly_mean={}, within_hours=3) == (None, False)


def test_idle_embodied_per_useful_gpu_hour_rises_as_utilisation_falls() -> None:
    busy = fleet_build(name="busy", servers=1, gpus_per_server=10)
    quiet = fleet_build(name="quiet", servers=1, gpus_per_server=10)
    intensity_set("TEST", [0.3] * 10)
    job_run(busy, key="slurm/b", gpus=busy.gpus[:9], hours=10, power_w=600)
    idle_hours(busy, gpus=busy.gpus[9:], hours=10)
    job_run(quiet, key="slurm/q", gpus=quiet.gpus[:4], hours=10, power_w=600)
    idle_hours(quiet, gpus=quiet.gpus[4:], hours=10)
    footprints_recompute()
    period = {"start": T0, "end": T0 + 10 * HOUR, "granularity": "day"}
    at_90 = cluster_rollup(cluster=busy.cluster, **period)["embodied_kg_per_useful_gpu_hour"]
    at_40 = cluster_rollup(cluster=quiet.cluster, **period)["embodied_kg_per_useful_gpu_hour"]
    assert at_40 > 2 * at_90


def test_cluster_rollup_is_its_jobs_plus_its_idle_line_to_the_joule_and_the_cent() -> None:
    fleet = fleet_build(servers=2)
    intensity_set("TEST", [0.25] * 48)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:6], hours=30, power_w=610)
    job_run(fleet, key="slurm/2", gpus=fleet.gpus[6:9], hours=5, power_w=420, start=T0 + 20 * HOUR)
    idle_hours(fleet, gpus=fleet.gpus[9:], hours=40)
    footprints_recompute()
    doc = cluster_rollup(cluster=fleet.cluster, start=T0, end=T0 + 48 * HOUR, granularity="day")
    jobs = list(Job.objects.filter(cluster=fleet.cluster))
    hours = list(GpuHour.objects.filter(gpu__node__cluster=fleet.cluster))
    energy = sum(p["energy_j"] + p["idle"]["energy_j"] for p in doc["periods"])
    assert energy == pytest.approx(sum(h.device_energy_j for h in hours), rel=1e-12)
    cost = sum(p["cost"] + p["idle"]["cost"] for p in doc["periods"])
    assert cost == sum(j.cost for j in jobs) + sum(h.idle_cost for h in hours)
    assert sum(p["cost"] for p in doc["periods"]) == sum(j.cost for j in jobs)
    team = team_rollup(team=fleet.team, start=T0, end=T0 + 48 * HOUR, granularity="day")
    assert sum(p["operational_kg"] for p in team["periods"]) == pytest.approx(sum(j.operational_kg for j in jobs))


def test_basis_and_source_on_every_job_rollup_and_csv_row_and_never_mixed() -> None:
    a = fleet_build(name="a", servers=1, basis="location")
    b = fleet_build(name="b", servers=1, zone="OTHER", basis="market")
    intensity_set("TEST", [0.3] * 3)
    intensity_set("OTHER", [0.2] * 3, basis="market")
    job_run(a, key="slurm/a", gpus=a.gpus[:1], hours=3, power_w=500)
    job_run(b, key="slurm/b", gpus=b.gpus[:1], hours=3, power_w=500)
    footprints_recompute()
    admin = User.objects.create_user("root", is_staff=True)
    client = APIClient()
    client.force_authenticate(admin)
    jobs = client.get("/api/jobs/").json()["results"]
    assert {(j["job_key"], j["intensity_basis"], j["intensity_source"]) for j in jobs} == {
        ("slurm/a", "location", "test"), ("slurm/b", "market", "test"),
    }  # fmt: skip
    query = {"start": "2026-11-02", "end": "2026-11-03"}
    rollup = client.get(f"/api/clusters/{a.cluster.pk}/rollup/", query).json()
    assert rollup["intensity_basis"] == "location"
    csv_rows = client.get(f"/api/clusters/{b.cluster.pk}/rollup/", {**query, "format": "csv"}).content.decode()
    assert "intensity_basis" in csv_rows.splitlines()[0] and all(",market" in r for r in csv_rows.splitlines()[1:])
    # one team with jobs on both bases: refused, not mixed
    mixed = client.get(f"/api/teams/{a.team.pk}/rollup/", query)
    assert mixed.status_code == 400 and "bases" in mixed.json()["detail"]


def test_rollup_arguments_are_checked() -> None:
    fleet = fleet_build(servers=1)
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    url = f"/api/teams/{fleet.team.pk}/rollup/"
    assert client.get(url, {"start": "2026-11-03", "end": "2026-11-02"}).status_code == 400
    assert client.get(url, {"start": "2026-01-01", "end": "2027-06-01"}).status_code == 400
    assert client.get(url, {"start": "2026-11-02", "end": "2026-11-03", "granularity": "hour"}).status_code == 400
    assert client.get(url, {"start": "nope", "end": "2026-11-03"}).status_code == 400
    assert client.get(url, {"start": "2026-11-02", "end": "2026-11-03"}).status_code == 200


def test_carbon_aware_hint_for_flexible_groups() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.5] * 6 + [0.1] * 6 + [0.5] * 12)
    JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep", flexible=True)
    job = job_run(fleet, key="slurm/s", gpus=fleet.gpus[:1], hours=3, power_w=600)
    Job.objects.filter(pk=job.pk).update(name="sweep-17")
    job_groups_assign()
    footprints_recompute()
    job.refresh_from_db()
    assert job.job_group.name == "sweeps"
    assert job.shift_saving_kg == pytest.approx(job.operational_kg * (0.5 - 0.1) / 0.5)


def test_shift_saving_is_zero_when_already_in_the_cleanest_window() -> None:
    hours = [T0 + k * HOUR for k in range(24)]
    intensity = {h: (0.1 if k < 3 else 0.4) for k, h in enumerate(hours)}
    assert shift_saving_kg([(hours[0], 2.0), (hours[1], 2.0)], intensity, deadline_h=24) == 0.0


def test_footprint_without_configuration_is_plain_energy() -> None:
    fp = footprint(energy_j=3.6e6, gpu_hours=1.0, factors=HourFactors())
    assert (fp.gpu_kwh, fp.server_kwh, fp.facility_kwh, fp.operational_kg, fp.embodied_kg) == (1, 1, 1, None, 0)


def test_job_group_rollup_includes_every_run_of_the_group() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    group = JobGroup.objects.create(name="llm-7b", match_kind="account", match_value="llm")
    runs = [job_run(fleet, key=f"slurm/{k}", gpus=fleet.gpus[k : k + 1], hours=3, power_w=500) for k in range(3)]
    Job.objects.filter(pk__in=[r.pk for r in runs]).update(account="llm")  # a delivered run and two failed ones
    job_groups_assign()
    footprints_recompute()
    admin = User.objects.create_user("fin", is_staff=True)
    client = APIClient()
    client.force_authenticate(admin)
    doc = client.get(f"/api/job-groups/{group.pk}/rollup/", {"start": "2026-11-02", "end": "2026-11-03"}).json()
    jobs = Job.objects.filter(job_group=group)
    assert jobs.count() == 3
    assert sum(p["operational_kg"] for p in doc["periods"]) == pytest.approx(sum(j.operational_kg for j in jobs))
    assert sum(Decimal(p["cost_exact"]) for p in doc["periods"]) == sum(j.cost for j in jobs)


def test_sci_per_unit_of_work_reported_through_the_api() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    job = job_run(fleet, key="slurm/inf", gpus=fleet.gpus[:1], hours=2, power_w=500)
    footprints_recompute()
    member = User.objects.create_user("ada")
    from apps.fleet.models import TeamMembership

    TeamMembership.objects.create(user=member, team=fleet.team)
    client = APIClient()
    client.force_authenticate(member)
    body = client.post(f"/api/jobs/{job.pk}/work/", {"work_units": 2000, "work_unit": "1k_tokens"}).json()
    job.refresh_from_db()
    assert body["functional_unit"] == "1k_tokens"
    assert body["sci_kg"] == pytest.approx((job.operational_kg + job.embodied_kg) / 2000)
    assert client.post(f"/api/jobs/{job.pk}/work/", {"work_units": -1, "work_unit": "x"}).status_code == 400


DAY = {"start": T0, "end": T0 + 24 * HOUR, "granularity": "day"}


def test_rollups_kept_rendered_follow_every_change_of_their_data() -> None:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.35] * 3)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:1], hours=3, power_w=500)
    footprints_recompute()
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    query = {"start": "2026-11-02", "end": "2026-11-03"}
    for url, rollup in (
        (f"/api/teams/{fleet.team.pk}/rollup/", lambda: team_rollup(team=fleet.team, **DAY)),
        (f"/api/clusters/{fleet.cluster.pk}/rollup/", lambda: cluster_rollup(cluster=fleet.cluster, **DAY)),
    ):
        intensity_set("TEST", [0.35] * 3)
        footprints_recompute()
        first = client.get(url, query).json()
        assert first == client.get(url, query).json()  # the second from the cache
        intensity_set("TEST", [0.05] * 3)
        footprints_recompute()
        after = client.get(url, query).json()
        assert [p["operational_kg"] for p in after["periods"]] == [p["operational_kg"] for p in rollup()["periods"]]
        assert after["periods"][0]["operational_kg"] < first["periods"][0]["operational_kg"]


def test_daily_energy_by_team_and_method_is_the_team_rollups_and_leaves_excluded_jobs_out() -> None:
    fleet = fleet_build(servers=1)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:1], hours=3, power_w=500)
    excluded = job_run(fleet, key="slurm/2", gpus=fleet.gpus[1:2], hours=2, power_w=400)
    Job.objects.filter(pk=excluded.pk).update(excluded_from_bill=True)
    footprints_recompute()
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    rows = client.get("/api/teams/daily-energy/", {"start": "2026-11-02", "end": "2026-11-03"}).json()
    assert rows == [
        {
            "day": "2026-11-02",
            "team": fleet.team.name,
            "method": "whole_gpu",
            "energy_j": 3 * 500 * 3600.0,
            "energy_kwh": 1.5,  # beside J, as everywhere in the API
        }
    ]
    by_method = team_rollup(team=fleet.team, **DAY)["periods"][0]["energy_by_method_j"]
    assert by_method == {"whole_gpu": rows[0]["energy_j"]}


def test_tdp_estimate_is_seconds_held_times_tdp_and_none_where_a_gpu_has_no_tdp() -> None:
    assert tdp_estimate_j([(3600.0, 700.0), (1800.0, 400.0)]) == 3600 * 700 + 1800 * 400
    assert tdp_estimate_j([(3600.0, 700.0), (900.0, None)]) is None
    assert tdp_estimate_j([(3600.0, 700.0), (0.0, None)]) == 3600 * 700  # a GPU not held: no matter
    assert tdp_estimate_j([]) == 0.0
