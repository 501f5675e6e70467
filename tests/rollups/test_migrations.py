"""The schema as the previous release left it, with data, migrates to this one: the teams' daily sums
(moved from the carbon app to rollups) keep every row."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
