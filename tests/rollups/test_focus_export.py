"""The FOCUS export (`/api/focus/?month=`, docs/api.md "FOCUS export"): FOCUS 1.2 rows per team, cluster, day
and charge whose BilledCost adds up to the teams' rollups to the cent, CSV and Parquet, each team's rows to
whoever may see the team; the clusters' idle seen and unobserved cost as unallocated rows apart, adding up to
their rollups' idle lines, to whoever sees every team; and the file checked by the FinOps Foundation's
focus-validator.

The validator (PyPI focus-validator, pinned in requirements-focus.txt, installed by scripts/bootstrap.sh in its
own venv `.venv-focus/`: it needs pandas 2 and numpy 1) knows the rules of FOCUS 0.5, 1.0-preview and 1.0 only,
so the file is validated against 1.0, the newest it knows, and the 1.2 requirements it cannot check (the
mandatory columns, their types, nulls and formats) are checked here besides."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from datetime import date
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.test import APIClient

from apps.core.units.footprint import Footprint
from apps.core.units.money import minor_exponent
from apps.fleet.models import TeamMembership
from apps.jobs.models import Job
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups.focus import (
    ALLOCATED_METHOD,
    ALLOCATION_COLUMNS,
    COLUMNS,
    IDLE,
    JOBS,
    MANDATORY_1_2,
    UNOBSERVED,
    ClusterIdleDay,
    FocusNames,
    apportion,
    unallocated_booked,
    unallocated_rows,
)
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import HOUR, T0, idle_hours, job_run
from tests.rollups.outcomes_world import OutcomesWorld, outcomes_world_build

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / ".venv-focus" / "bin" / "focus-validator"
# The rules of the validator's 1.0 set that still speak of columns by their pre-1.0 names, skipped (the file
# has the columns by their 1.0 and 1.2 names, checked below): Provider, Publisher, InvoiceIssuer (now
# ProviderName, PublisherName, InvoiceIssuerName), ResourceID (ResourceId), and SkuPriceId's rule, a query on
# ChargeType (now ChargeCategory). Every other rule of the set runs.
OVERRIDES = [
    *(f"{c}_{k}" for c in ("Provider", "Publisher", "InvoiceIssuer") for k in ("Required", "IsString", "NotNull")),
    "ResourceID_Required",
    "SkuPriceId_Nullable",
]
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
MONTH = {"month": "2026-11"}


@pytest.fixture
def world(db) -> OutcomesWorld:
    return outcomes_world_build()


UNSEEN_W, UNSEEN_S, SEEN_IDLE_W = 300.0, 1800.0, 75.0


def _unseen_hours(gpu, *, hours: range) -> None:
    """GPU-hours whose agent missed half of each (DCGM metered it) with no job seen and no scheduler's word:
    300 W the whole hour, half of it nobody saw."""
    for h in hours:
        GpuHour.objects.update_or_create(
            gpu=gpu, hour=T0 + h * HOUR,
            defaults={"source": "agent", "device_energy_j": UNSEEN_W * 3600, "agent_energy_j": UNSEEN_W * 1800,
                      "dcgm_energy_j": UNSEEN_W * 3600, "idle_energy_j": UNSEEN_W * 1800,
                      "unobserved_j": UNSEEN_W * UNSEEN_S, "unobserved_s": UNSEEN_S, "sampled_s": 3600 - UNSEEN_S},
        )  # fmt: skip


@pytest.fixture
def idle_world(db) -> OutcomesWorld:
    """The outcomes world (its jobs on 12 of the cluster's 16 GPUs, 2 Nov) with a cluster-level idle line on two
    days: GPUs seen idle with no job, and GPU-hours half of which nobody saw; an nlp job on 3 Nov, so that day
    has its daily sums too."""
    world = outcomes_world_build()
    gpus = world.fleet.gpus
    idle_hours(world.fleet, gpus=gpus[12:14], hours=10, power_w=SEEN_IDLE_W)  # 2 Nov, 00:00-10:00
    _unseen_hours(gpus[14], hours=range(0, 3))
    late = job_run(world.fleet, key="slurm/41", gpus=gpus[15:16], hours=2, power_w=500, start=T0 + 26 * HOUR)
    Job.objects.filter(pk=late.pk).update(team=world.nlp, last_seen=T0 + 28 * HOUR)
    idle_hours(world.fleet, gpus=gpus[12:13], hours=6, power_w=SEEN_IDLE_W, start=T0 + 24 * HOUR)  # 3 Nov
    _unseen_hours(gpus[14], hours=range(27, 28))
    with transaction.atomic():  # the footprints, their idle lines and the daily sums, as after an ingest
        derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
    return world


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _csv(response) -> list[dict[str, str]]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_billed_cost_adds_up_to_each_teams_rollup_to_the_cent(world: OutcomesWorld) -> None:
    # given finance's client
    client = _client(world.finance)
    # when it reads the month's FOCUS file and each team's rollup of the month
    rows = _csv(client.get("/api/focus/", MONTH))
    # then each team's BilledCost adds up to its rollup's totals.cost exactly, day by day too
    for team in (world.vision, world.nlp):
        mine = [r for r in rows if r["SubAccountName"] == team.name]
        rollup = client.get(
            f"/api/teams/{team.pk}/rollup/", {**MONTH, "granularity": "day"}, HTTP_ACCEPT="application/json"
        ).json()
        assert mine and sum(Decimal(r["BilledCost"]) for r in mine) == Decimal(rollup["totals"]["cost"])
        for period in rollup["periods"]:
            day = [r for r in mine if r["ChargePeriodStart"] == f"{period['period']}T00:00:00Z"]
            assert sum(Decimal(r["BilledCost"]) for r in day) == Decimal(period["cost"])
    # and the teams' comparison agrees, as do the other cost columns (no discount, no price list)
    start, end = date(2026, 11, 1), date(2026, 12, 1)
    compare = client.get("/api/teams/compare/", {"start": start, "end": end}, HTTP_ACCEPT="application/json").json()
    for t in compare:
        mine = [r for r in rows if r["SubAccountName"] == t["team"]]
        assert sum(Decimal(r["BilledCost"]) for r in mine) == Decimal(t["cost"])
    assert all(r["BilledCost"] == r["EffectiveCost"] == r["ListCost"] == r["ContractedCost"] for r in rows)


def test_every_amount_is_in_the_minor_unit_and_each_quantity_is_on_one_charge(world: OutcomesWorld) -> None:
    rows = _csv(_client(world.finance).get("/api/focus/", MONTH))
    assert {r["PricingUnit"] for r in rows} == {"GPU-Hours", "kWh"}
    for r in rows:
        places = -Decimal(r["BilledCost"]).as_tuple().exponent
        assert places == minor_exponent(r["BillingCurrency"])
        if r["PricingUnit"] == "GPU-Hours":
            assert r["x_EnergyKWh"] == r["x_OperationalKgCO2e"] == "" and r["x_EmbodiedKgCO2e"] != ""
        else:
            assert r["x_EmbodiedKgCO2e"] == "" and float(r["x_EnergyKWh"]) > float(r["x_GpuEnergyKWh"]) > 0
        assert r["x_SplitMethod"] == "whole_gpu" and float(r["x_Coverage"]) == 1.0
        assert r["x_IntensityBasis"] == "location"
        assert json.loads(r["Tags"])["fleetwatt/cluster"] == world.fleet.cluster.name


def test_focus_1_3_allocation_columns_split_each_cluster_day_between_the_teams(idle_world: OutcomesWorld) -> None:
    # given finance's file: its 1.2 columns first, 1.3's allocation columns after them, x_CostLine last
    rows = _csv(_client(idle_world.finance).get("/api/focus/", MONTH))
    assert list(rows[0]) == list(COLUMNS) and COLUMNS[-6:] == (*ALLOCATION_COLUMNS, "x_CostLine")
    origins: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        origins.setdefault((r["ResourceId"], r["ChargePeriodStart"], r["PricingUnit"]), []).append(r)
    for (_, _, unit), parts in origins.items():
        whole = sum(Decimal(r["BilledCost"]) for r in parts)
        for r in parts:
            # each row names the method of its charge (FOCUS 1.3, "Allocated*")
            assert r["AllocatedMethodId"] == ALLOCATED_METHOD["gpu-hours" if unit == "GPU-Hours" else "facility-energy"]
            if r["x_CostLine"] == JOBS:  # and the team it went to
                assert r["AllocatedResourceName"] == r["SubAccountName"] != ""
                assert r["AllocatedResourceId"] == r["SubAccountId"] != ""
                assert json.loads(r["AllocatedTags"]) == {"fleetwatt/team": r["SubAccountName"]}
            else:  # or none: the unallocated portion of the origin charge (FOCUS 1.3: AllocatedResource* null)
                assert r["x_CostLine"] in {IDLE, UNOBSERVED}
                assert r["AllocatedResourceId"] == r["AllocatedResourceName"] == r["AllocatedTags"] == ""
            (element,) = json.loads(r["AllocatedMethodDetails"])["Elements"]
            # its ratio is its share of the cluster-day's charge, its quantity the row's own
            assert element["AllocatedRatio"] == pytest.approx(float(Decimal(r["BilledCost"]) / whole))
            assert element["UsageUnit"] == unit
            assert element["UsageQuantity"] == pytest.approx(float(r["ConsumedQuantity"]))
        # and the ratios of one origin charge, its unallocated rows included, add up to 1 (FOCUS 1.3: AllocatedRatio
        # over every allocated charge of an origin, the unused or unallocated usage as separate allocated charges)
        ratios = [json.loads(r["AllocatedMethodDetails"])["Elements"][0]["AllocatedRatio"] for r in parts]
        assert sum(ratios) == pytest.approx(1.0, abs=1e-12)
    assert {len(parts) for parts in origins.values()} >= {4}  # both teams, idle and unobserved: a real split


def test_a_member_gets_the_allocation_method_but_not_the_ratio_of_other_teams_charges(world: OutcomesWorld) -> None:
    rows = _csv(_client(world.member).get("/api/focus/", MONTH))
    assert rows and all(r["AllocatedMethodId"] and r["AllocatedResourceName"] == "vision" for r in rows)
    assert all(r["AllocatedMethodDetails"] == "" for r in rows)


def test_a_member_gets_their_teams_rows_only(world: OutcomesWorld) -> None:
    rows = _csv(_client(world.member).get("/api/focus/", MONTH))
    assert rows and {r["SubAccountName"] for r in rows} == {"vision"}
    everyone = _csv(_client(world.finance).get("/api/focus/", MONTH))
    assert {r["SubAccountName"] for r in everyone} == {"vision", "nlp"}


def test_parquet_has_the_same_rows_with_exact_money(idle_world: OutcomesWorld) -> None:
    client = _client(idle_world.finance)
    rows = _csv(client.get("/api/focus/", MONTH))
    for response in (
        client.get("/api/focus/", {**MONTH, "format": "parquet"}),
        client.get("/api/focus/", MONTH, HTTP_ACCEPT="application/vnd.apache.parquet"),
    ):
        assert response.status_code == 200 and response["Content-Type"] == "application/vnd.apache.parquet"
        table = pq.read_table(io.BytesIO(response.content))
        assert table.column_names == list(COLUMNS) and table.num_rows == len(rows)
        assert sum(table.column("BilledCost").to_pylist()) == sum(Decimal(r["BilledCost"]) for r in rows)
        assert table.schema.field("ChargePeriodStart").type.tz == "UTC"  # Parquet keeps it in ms
        lines = table.column("x_CostLine").to_pylist()
        assert lines == [r["x_CostLine"] for r in rows] and set(lines) == {JOBS, IDLE, UNOBSERVED}
        assert table.column("SubAccountId").to_pylist() == [r["SubAccountId"] or None for r in rows]


def test_a_bad_month_is_a_400_and_an_empty_month_a_header_only_file(world: OutcomesWorld) -> None:
    client = _client(world.finance)
    for bad in ({"month": "2026-13"}, {"month": "november"}, {}):
        response = client.get("/api/focus/", bad)
        assert response.status_code == 400 and "month" in response.json()
    body = b"".join(client.get("/api/focus/", {"month": "2025-01"}).streaming_content).decode()
    assert body == ",".join(COLUMNS) + "\r\n"
    empty = client.get("/api/focus/", {"month": "2025-01", "format": "parquet"})
    assert pq.read_table(io.BytesIO(empty.content)).num_rows == 0


def test_apportion_gives_the_total_exactly_by_largest_remainder() -> None:
    # given three charges whose exact costs do not split the booked total in whole cents
    parts = [Decimal("1.333333"), Decimal("1.333333"), Decimal("0.333334")]
    # then the cents go to the largest remainders, and add up to the total
    assert apportion(parts, Decimal("3.01"), "EUR") == [Decimal("1.34"), Decimal("1.34"), Decimal("0.33")]
    assert apportion([Decimal(0), Decimal(0)], Decimal("0.03"), "EUR") == [Decimal("0.02"), Decimal("0.01")]
    assert apportion([Decimal("5")], Decimal("7"), "JPY") == [Decimal("7")]


def _check_focus_1_2(rows: list[dict[str, str]]) -> None:
    """What the validator cannot check of FOCUS 1.2: the mandatory columns are there and filled (ChargeClass
    null: nothing is a correction), date/times in extended ISO 8601 UTC ending in Z, ISO 4217 codes,
    ServiceCategory an allowed value, the costs equal (no unit price: List/Contracted match Billed)."""
    assert rows
    for r in rows:
        missing = [c for c in MANDATORY_1_2 if c != "ChargeClass" and not r[c]]
        assert not missing, missing
        assert r["ChargeClass"] == "" and r["ChargeCategory"] == "Usage"
        assert all(ISO_Z.match(r[c]) for c in ("BillingPeriodStart", "BillingPeriodEnd",
                                                 "ChargePeriodStart", "ChargePeriodEnd"))  # fmt: skip
        assert re.fullmatch(r"[A-Z]{3}", r["BillingCurrency"])
        assert r["ServiceCategory"] in {"AI and Machine Learning", "Compute"}
        if r["x_CostLine"] == JOBS:
            assert r["SubAccountId"] and r["SubAccountName"]
        else:  # the cluster's unallocated cost: no team's (FOCUS: SubAccountId null where a charge applies to none)
            assert r["x_CostLine"] in {IDLE, UNOBSERVED} and r["SubAccountId"] == r["SubAccountName"] == ""
            assert "unallocated" in r["ChargeDescription"] and r["ResourceId"]
        assert r["ConsumedUnit"] == r["PricingUnit"]
        assert isinstance(json.loads(r["Tags"]), dict)


# The Parquet file keeps money and quantities as Parquet decimals (exact to the cent); the validator's
# IsDecimal rules only take a float column (and an override does not stop a type rule), so on that file they
# are the known failures, and they pass on the CSV file (the same values).
PARQUET_DECIMALS = [f"{c}_IsDecimal" for c in ("BilledCost", "ConsumedQuantity", "ContractedCost", "EffectiveCost",
                                               "ListCost", "PricingQuantity")]  # fmt: skip


def _validate(path: Path, tmp_path: Path) -> ET.Element:
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("overrides:\n" + "".join(f"  - {o}\n" for o in OVERRIDES))
    report = tmp_path / f"{path.name}.xml"
    # It reads its list of ISO 4217 codes from a path relative to the working directory: its package's parent.
    (packages,) = (ROOT / ".venv-focus" / "lib").glob("python3*/site-packages")
    done = subprocess.run(
        [str(VALIDATOR), "--data-file", str(path), "--validate-version", "1.0", "--override-file", str(overrides),
         "--output-type", "unittest", "--output-destination", str(report)],
        capture_output=True, text=True, timeout=300, check=False, cwd=packages,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return ET.parse(report).getroot()


def test_the_file_passes_the_finops_foundation_validator(idle_world: OutcomesWorld, tmp_path: Path) -> None:
    if not VALIDATOR.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{VALIDATOR} is missing: scripts/bootstrap.sh installs it (requirements-focus.txt)")
        pytest.skip(f"focus-validator not installed ({VALIDATOR}): run scripts/bootstrap.sh")
    # given the month's file from finance's client, as CSV and as Parquet, the clusters' unallocated rows in it
    client = _client(idle_world.finance)
    csv_path, parquet_path = tmp_path / "focus.csv", tmp_path / "focus.parquet"
    csv_path.write_bytes(b"".join(client.get("/api/focus/", MONTH).streaming_content))
    parquet_path.write_bytes(client.get("/api/focus/", {**MONTH, "format": "parquet"}).content)
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert {r["x_CostLine"] for r in rows} == {JOBS, IDLE, UNOBSERVED}
    # then the validator finds no failure and no error in either (its newest rules: FOCUS 1.0)
    for path in (csv_path, parquet_path):
        report = _validate(path, tmp_path)
        cases = report.findall(".//testcase")
        bad = {
            c.get("name", "").split(" ")[0]: c.find("failure") or c.find("error")
            for c in cases
            if c.find("failure") is not None or c.find("error") is not None
        }
        known = set(PARQUET_DECIMALS) if path.suffix == ".parquet" else set()
        assert len(cases) > 100 and set(bad) == known, f"{path.name}: {sorted(bad)}"
    # and the 1.2 requirements it does not know hold
    _check_focus_1_2(rows)


# --- the clusters' cost no team's jobs carry: idle seen and unobserved, apart ------------------------------


def _money(rows: list[dict[str, str]]) -> Decimal:
    return sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))


def _rollup(client: APIClient, path: str) -> dict:
    answer = client.get(path, {**MONTH, "granularity": "day"}, HTTP_ACCEPT="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def _charge(rows: list[dict[str, str]], unit: str) -> dict[str, str]:
    (row,) = [r for r in rows if r["PricingUnit"] == unit]
    return row


def test_idle_seen_and_unobserved_are_rows_apart_adding_up_to_the_clusters_idle_line(idle_world: OutcomesWorld) -> None:
    # given finance's month file and the cluster's daily rollup
    client = _client(idle_world.finance)
    rows = _csv(client.get("/api/focus/", MONTH))
    cluster = idle_world.fleet.cluster
    rollup = _rollup(client, f"/api/clusters/{cluster.pk}/rollup/")
    lines_found = 0
    for period in rollup["periods"]:
        idle, unobserved = period["idle"], period["unobserved"]
        day = [r for r in rows if r["ChargePeriodStart"] == f"{period['period']}T00:00:00Z"]
        seen = [r for r in day if r["x_CostLine"] == IDLE]
        unseen = [r for r in day if r["x_CostLine"] == UNOBSERVED]
        # then the day's idle line is two lines apart, in money to the cent: what nobody saw is the rollup's
        # `unobserved`, the idle seen with it the whole `idle` line
        assert _money(unseen) == Decimal(unobserved["cost"])
        assert _money(seen) + _money(unseen) == Decimal(idle["cost"])
        # and in every quantity, each on one charge (GPU-hours and embodied CO2e; GPU and facility energy, CO2e)
        seen_figures = {k: idle[k] - unobserved[k] for k in ("gpu_hours", "energy_kwh", "facility_kwh",
                                                             "operational_kg", "embodied_kg")}  # fmt: skip
        for part, figures in ((seen, seen_figures), (unseen, unobserved)):
            if not part:
                continue
            lines_found += 1
            hours, energy = _charge(part, "GPU-Hours"), _charge(part, "kWh")
            assert float(hours["ConsumedQuantity"]) == pytest.approx(figures["gpu_hours"], abs=1e-6)
            assert float(hours["x_EmbodiedKgCO2e"]) == pytest.approx(figures["embodied_kg"], abs=1e-9)
            assert hours["x_EnergyKWh"] == hours["x_GpuEnergyKWh"] == hours["x_OperationalKgCO2e"] == ""
            assert float(energy["ConsumedQuantity"]) == pytest.approx(figures["facility_kwh"], abs=1e-6)
            assert float(energy["x_GpuEnergyKWh"]) == pytest.approx(figures["energy_kwh"], abs=1e-9)
            assert float(energy["x_OperationalKgCO2e"]) == pytest.approx(figures["operational_kg"], abs=1e-9)
            assert energy["x_EmbodiedKgCO2e"] == ""
    assert lines_found == 4  # both lines on both days
    # and what nobody saw on 2 Nov is the half of three GPU-hours the agent missed, at 300 W
    unseen_2nov = [r for r in rows if r["x_CostLine"] == UNOBSERVED and r["ChargePeriodStart"].startswith("2026-11-02")]
    assert Decimal(_charge(unseen_2nov, "GPU-Hours")["ConsumedQuantity"]) == Decimal("1.500000")
    assert float(_charge(unseen_2nov, "kWh")["x_GpuEnergyKWh"]) == pytest.approx(3 * UNSEEN_W * UNSEEN_S / 3.6e6)


def test_the_months_file_is_the_teams_bills_plus_the_clusters_idle_and_unobserved(idle_world: OutcomesWorld) -> None:
    # given finance's month file, each team's rollup and the cluster's (day by day, as the file books them)
    client = _client(idle_world.finance)
    rows = _csv(client.get("/api/focus/", MONTH))
    billed = sum(
        (Decimal(_rollup(client, f"/api/teams/{t.pk}/rollup/")["totals"]["cost"]) for t in (idle_world.vision,
                                                                                            idle_world.nlp)),
        Decimal(0),
    )  # fmt: skip
    totals = _rollup(client, f"/api/clusters/{idle_world.fleet.cluster.pk}/rollup/")["totals"]
    idle, unobserved = Decimal(totals["idle"]["cost"]), Decimal(totals["unobserved"]["cost"])
    assert unobserved > 0 and idle - unobserved > 0
    # then the file's total is the teams' bills plus the idle line (idle seen and unobserved), to the cent
    assert _money(rows) == billed + idle
    by_line = {line: _money([r for r in rows if r["x_CostLine"] == line]) for line in (JOBS, IDLE, UNOBSERVED)}
    assert by_line == {JOBS: billed, IDLE: idle - unobserved, UNOBSERVED: unobserved}


def test_idle_and_unobserved_rows_go_only_to_whoever_sees_every_team(idle_world: OutcomesWorld) -> None:
    # given a member and a lead of vision, who may not see nlp
    lead = User.objects.create_user("lea", password="pw-lea")
    TeamMembership.objects.create(user=lead, team=idle_world.vision, role=TeamMembership.Role.LEAD)
    for user in (idle_world.member, lead):
        # then their file has their team's rows only: the cluster's idle line is no team's (and would tell the
        # cluster's whole)
        rows = _csv(_client(user).get("/api/focus/", MONTH))
        assert rows and {r["x_CostLine"] for r in rows} == {JOBS}
        assert {r["SubAccountName"] for r in rows} == {"vision"}
        table = pq.read_table(io.BytesIO(_client(user).get("/api/focus/", {**MONTH, "format": "parquet"}).content))
        assert set(table.column("x_CostLine").to_pylist()) == {JOBS}
    # and finance and admins, who see every team, get the cluster's idle seen and unobserved too
    for user in (idle_world.finance, idle_world.admin):
        rows = _csv(_client(user).get("/api/focus/", MONTH))
        assert {r["x_CostLine"] for r in rows} == {JOBS, IDLE, UNOBSERVED}


def test_the_idle_line_is_booked_whole_and_its_unseen_part_on_its_own_as_the_rollup_books_them() -> None:
    # given an idle line of 10.005 EUR of which 3.335 nobody saw (rounded apart: 6.67 + 3.34 = 10.01)
    booked = unallocated_booked(idle_cost=Decimal("10.005000"), unseen_cost=Decimal("3.335000"), currency="EUR")
    # then what nobody saw is its own cost rounded (the rollup's `unobserved.cost`), and the idle seen the rest of
    # the whole line rounded (the rollup's `idle.cost`, 10.00): the two add up to the line to the cent
    assert booked == {UNOBSERVED: Decimal("3.34"), IDLE: Decimal("6.66")}
    assert unallocated_booked(idle_cost=Decimal("100.5"), unseen_cost=Decimal("0.5"), currency="JPY") == {
        UNOBSERVED: Decimal("0"), IDLE: Decimal("100"),
    }  # fmt: skip


def test_a_line_with_nothing_in_it_has_no_rows_and_a_line_with_some_books_its_cost_over_its_two_charges() -> None:
    # given two days of a cluster: one with idle seen and no unseen part, one without any idle
    names = FocusNames("acct", "GPU fleet", "Platform", "Platform", "Platform")
    idle = Footprint(
        energy_j=7.2e6, gpu_hours=3.0, facility_kwh=2.6, operational_kg=0.78, embodied_kg=0.02, cost=Decimal("8.020004")
    )  # 3 GPU-hours at 2.50 and 2.6 kWh at 0.20 (+ a remainder)
    days = [
        ClusterIdleDay("c1", date(2026, 11, 3), "EUR", idle=idle, unseen=Footprint(), price_per_kwh=Decimal("0.20"),
                       site="site-a", intensity_basis="location"),
        ClusterIdleDay("c1", date(2026, 11, 2), "EUR", idle=Footprint(), unseen=Footprint(),
                       price_per_kwh=Decimal("0.20")),
    ]  # fmt: skip
    # when they are made rows
    rows = list(unallocated_rows(days, month=date(2026, 11, 1), names=names))
    # then only the idle seen of 3 Nov has rows: its GPU-hours and its facility energy, adding up to the line
    assert [(r["x_CostLine"], r["PricingUnit"], r["BilledCost"]) for r in rows] == [
        (IDLE, "GPU-Hours", Decimal("7.50")), (IDLE, "kWh", Decimal("0.52")),
    ]  # fmt: skip
    assert [r["ConsumedQuantity"] for r in rows] == [Decimal("3.000000"), Decimal("2.600000")]
    assert all(r["SubAccountId"] is None and r["AllocatedResourceId"] is None for r in rows)
    assert rows[0]["x_Origin"] == ("c1", date(2026, 11, 3), "gpu-hours")
