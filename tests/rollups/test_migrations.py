"""The schema as the previous release left it, with data, migrates to this one: the teams' daily sums
(moved from the carbon app to rollups) keep every row, the hours and days stored before the unseen columns get them,
and days stored before the energy interval get it wherever their hour rows are still there."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline.inputs import footprints_recompute
from apps.rollups import selectors
from apps.rollups.models import ClusterDay, TeamDay
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

# The latest migrations of the previous release (TeamDay still in the carbon app, no rollups app).
BEFORE = [("carbon", "0003_team_days"), ("rollups", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
def test_team_days_survive_the_move_to_the_rollups_app() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    # given the previous schema with a team's day stored
    state = _migrate(BEFORE).loader.project_state(BEFORE[:1]).apps
    Team, Cluster = state.get_model("fleet", "Team"), state.get_model("fleet", "Cluster")
    team = Team.objects.create(name="vision", display_name="Vision")
    cluster = Cluster.objects.create(name="c1", prometheus_url="http://p:9090", scrape_interval_s=15)
    state.get_model("carbon", "TeamDay").objects.create(
        team_id=team.pk, cluster_id=cluster.pk, day=date(2026, 11, 2), energy_j=3.6e6, occupancy_s=7200,
        facility_kwh=1.2, operational_kg=0.4, embodied_kg=0.1, cost=Decimal("12.345678"),
        energy_by_method_j={"whole_gpu": 3.6e6},
    )  # fmt: skip
    try:
        # when it is migrated to this release
        state = _migrate(latest).loader.project_state(latest).apps
        # then the row is there, in the rollups app's table
        day = state.get_model("rollups", "TeamDay").objects.get()
        assert (day.team_id, day.cluster_id, day.day) == (team.pk, cluster.pk, date(2026, 11, 2))
        assert (day.energy_j, day.cost, day.energy_by_method_j) == (3.6e6, Decimal("12.345678"), {"whole_gpu": 3.6e6})
        assert "rollups_teamday" in connection.introspection.table_names()
        assert "carbon_teamday" not in connection.introspection.table_names()
    finally:
        _migrate(latest)  # the other tests need the latest schema whatever happened


UNSEEN = ("unseen_j", "unseen_s", "unseen_facility_kwh", "unseen_operational_kg", "unseen_embodied_kg", "unseen_cost")


@pytest.mark.django_db(transaction=True)
def test_hours_stored_before_the_unseen_columns_get_them_as_the_footprints_would() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    # given a GPU-hour with a job for half an hour and 20 minutes nobody saw, priced by this release
    fleet = fleet_build(servers=1, gpus_per_server=2)
    intensity_set("TEST", [0.3] * 4)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus[:1], hours=1, power_w=500.0)
    GpuHour.objects.filter(gpu=fleet.gpus[0], hour=T0).update(
        device_energy_j=500.0 * 1800 + 300.0 * 1200 + 80.0 * 600, jobs_energy_j=500.0 * 1800, occupied_s=1800,
        unobserved_j=300.0 * 1200, unobserved_s=1200, idle_energy_j=80.0 * 600,
    )  # fmt: skip
    footprints_recompute(cluster_ids=[fleet.cluster.pk], start=T0, end=T0 + HOUR)
    expected = GpuHour.objects.filter(gpu=fleet.gpus[0], hour=T0).values(*UNSEEN).get()
    expected_day = ClusterDay.objects.filter(cluster=fleet.cluster).values(*UNSEEN).get()
    assert expected["unseen_j"] == pytest.approx(300.0 * 1200) and expected["unseen_cost"] > 0
    # and the release before it, which left the columns at their default
    GpuHour.objects.update(**dict.fromkeys(UNSEEN, 0))
    ClusterDay.objects.update(**dict.fromkeys(UNSEEN, 0))
    try:
        _migrate([("telemetry", "0009_gpuhour_unseen")])
        # when it is migrated to this release
        _migrate(latest)
        # then the stored hour and its day hold the unseen part the footprints give it, not a zero
        got = GpuHour.objects.filter(gpu=fleet.gpus[0], hour=T0).values(*UNSEEN).get()
        day = ClusterDay.objects.filter(cluster=fleet.cluster).values(*UNSEEN).get()
        for name in UNSEEN[:-1]:
            assert got[name] == pytest.approx(expected[name], rel=1e-9), name
            assert day[name] == pytest.approx(expected_day[name], rel=1e-9), name
        assert abs(got["unseen_cost"] - expected["unseen_cost"]) <= Decimal("0.000002")
        assert abs(day["unseen_cost"] - expected_day["unseen_cost"]) <= Decimal("0.000002")
    finally:
        _migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_days_stored_before_the_energy_interval_get_it_where_their_rows_are_kept() -> None:
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    # given two days of a GPU shared by two jobs (split by SM time), their daily sums built by this release
    fleet = fleet_build(servers=1, gpus_per_server=1)
    intensity_set("TEST", [0.3] * 48)
    jobs = [Job.objects.create(cluster=fleet.cluster, job_key=f"slurm/{k}", team=fleet.team, start=T0) for k in (1, 2)]
    for hour in (T0, T0 + 25 * HOUR):
        for job, joules in zip(jobs, (9e5, 3e5), strict=True):
            JobGpuHour.objects.create(job=job, gpu=fleet.gpus[0], hour=hour, source="agent", energy_j=joules,
                                      sampled_s=3600, occupancy_s=1800)  # fmt: skip
            JobGpuHourEnergy.objects.create(job=job, gpu=fleet.gpus[0], hour=hour, method="sm_time", energy_j=joules)
        GpuHour.objects.create(gpu=fleet.gpus[0], hour=hour, source="agent", device_energy_j=1.2e6,
                               jobs_energy_j=1.2e6, sampled_s=3600, occupied_s=3600)  # fmt: skip
    footprints_recompute()
    expected = dict(TeamDay.objects.values_list("day", "energy_low_j"))
    assert len(expected) == 2 and all(low is not None and low < 1.2e6 for low in expected.values())
    try:
        # and the release before, which had no interval; the second day's hour rows since past retention
        _migrate([("telemetry", "0010_unseen_backfill"), ("rollups", "0005_clusterday_unseen")])
        for table in ("jobs_jobgpuhourenergy", "jobs_jobgpuhour", "telemetry_gpuhour"):
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {table} WHERE hour >= %s", [T0 + 24 * HOUR])
        # when it is migrated to this release
        _migrate(latest)
        # then the day whose rows are kept has the interval the daily sums give it, and the other none (not known)
        days = dict(TeamDay.objects.values_list("day", "energy_low_j"))
        first, second = sorted(days)
        assert days[first] == pytest.approx(expected[first], rel=1e-12) and days[second] is None
        # and a period over it says so, where a period over the first day alone has its interval
        whole = selectors.team_rollup(team=fleet.team, start=T0, end=T0 + 48 * HOUR, granularity="week")
        assert [p["energy_low_j"] for p in whole["periods"]] == [None]
        first_day = selectors.team_rollup(team=fleet.team, start=T0, end=T0 + 24 * HOUR, granularity="day")
        assert first_day["periods"][0]["energy_low_j"] == pytest.approx(expected[first], rel=1e-12)
    finally:
        _migrate(latest)
