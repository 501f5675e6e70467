"""The teams compared as finance reads them (issue 35, item 6): `/api/teams/compare/?format=csv` keeps its old columns
in their order and adds, after them, each team's display name, currency, the days summed and its cost as a whole
number of the currency's minor units (cents; yen have none), with no float noise in the quantities."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework.test import APIClient

from apps.carbon.models import Site
from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team
from apps.pipeline.derive import Fact, Scope, derive
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

PERIOD = {"start": "2026-11-02", "end": "2026-11-04"}
OLD_COLUMNS = ["team", "gpu_hours", "energy_j", "facility_kwh", "operational_kg", "embodied_kg", "cost",
               "energy_kwh", "cost_exact"]  # fmt: skip
NEW_COLUMNS = ["display_name", "currency", "period_start", "period_end", "cost_minor"]


@pytest.fixture(scope="module")
def finance(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """Vision on a site that bills in euros, nlp on one that bills in yen; finance's client. Rolled back after."""
    with django_db_blocker.unblock(), transaction.atomic():
        euros, yen = fleet_build(name="c1", servers=1, gpus_per_server=4), fleet_build(name="c2", servers=1,
                                                                                        gpus_per_server=4)  # fmt: skip
        Site.objects.filter(name="site-c2").update(currency="JPY")
        intensity_set("TEST", [0.3] * 48)
        vision, nlp = euros.team, Team.objects.create(name="nlp", display_name="Language models")
        Team.objects.filter(pk=vision.pk).update(display_name="Vision")
        for k in range(3):  # 121.7 W: costs with remainders under the cent
            job_run(euros, key=f"slurm/{k}", gpus=euros.gpus[k : k + 1], hours=5 + k, power_w=121.7,
                    start=T0 + k * 7 * HOUR)  # fmt: skip
            job = job_run(yen, key=f"slurm/y{k}", gpus=yen.gpus[k : k + 1], hours=3 + k, power_w=121.7)
            job.team = nlp
            job.save()
        with transaction.atomic():
            derive(Scope(), changed={Fact.FACTORS})
        user = User.objects.create_user("fin", password="pw-fin")
        user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
        client = APIClient()
        client.force_authenticate(user)
        yield {"client": client, "vision": vision, "nlp": nlp}
        transaction.set_rollback(True)


def _csv(answer: Any) -> tuple[list[str], list[dict[str, str]]]:
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    reader = csv.DictReader(io.StringIO(answer.content.decode()))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def test_the_csv_keeps_its_old_columns_first_and_adds_names_currency_period_and_minor_units(
    finance: dict[str, Any],
) -> None:
    client = finance["client"]
    columns, rows = _csv(client.get("/api/teams/compare/", {**PERIOD, "format": "csv"}))
    assert columns == OLD_COLUMNS + NEW_COLUMNS
    teams = {r["team"]: r for r in rows}
    assert teams["vision"]["display_name"] == "Vision" and teams["nlp"]["display_name"] == "Language models"
    assert (teams["vision"]["period_start"], teams["vision"]["period_end"]) == ("2026-11-02", "2026-11-04")
    # euros in cents, yen in yen: each equal to the team's rollup's bill
    for name, currency, places in (("vision", "EUR", 2), ("nlp", "JPY", 0)):
        team = teams[name]
        rollup = client.get(f"/api/teams/{finance[name].pk}/rollup/", PERIOD).json()
        assert team["currency"] == rollup["currency"] == currency
        assert team["cost"] == rollup["totals"]["cost"]
        assert len(team["cost"].partition(".")[2]) == places
        assert team["cost_minor"].isdigit() and int(team["cost_minor"]) == Decimal(team["cost"]).scaleb(places) > 0


def test_the_csvs_quantities_have_no_float_noise_and_the_json_has_the_same_figures(finance: dict[str, Any]) -> None:
    client = finance["client"]
    _, rows = _csv(client.get("/api/teams/compare/", {**PERIOD, "format": "csv"}))
    teams = {t["team"]: t for t in client.get("/api/teams/compare/", PERIOD).json()}
    for row in rows:
        for column in ("gpu_hours", "energy_j", "facility_kwh", "operational_kg", "embodied_kg", "energy_kwh"):
            assert len(row[column].partition(".")[2]) <= 6, (column, row[column])
            assert float(row[column]) == pytest.approx(teams[row["team"]][column], abs=1e-6)
        assert teams[row["team"]]["cost_minor"] == int(row["cost_minor"])
        assert teams[row["team"]]["display_name"] == row["display_name"]
