"""FOCUS rows from plain inputs (apps/rollups/focus.py, pure): a team-day's booked amount apportioned over its two
charges so they add up to it, the energy charge never more than the day's cost; each quantity on one charge only; a
booked amount without sums still booked; the split methods exact to rough and the coverage; each origin charge's
ratios adding up to 1, none for a viewer who may not see every team; a month's bounds; and the two encodings: CSV in
chunks with its header, Parquet with exact money. The export end to end: tests/rollups/test_focus_export.py."""

from __future__ import annotations

import csv
import io
import json
import random
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from apps.core.units.footprint import J_PER_KWH
from apps.rollups.focus import (
    ALLOCATED_METHOD,
    COLUMNS,
    ENERGY,
    GPU_HOURS,
    JOBS,
    FocusNames,
    TeamClusterDay,
    allocation_apply,
    apportion,
    csv_chunks,
    focus_rows,
    iso_z,
    month_bounds,
    origin_totals,
    parquet_bytes,
    parquet_schema,
)

D = Decimal
NAMES = FocusNames("acct", "GPU fleet", "Platform team", "Platform team", "Platform team")
NOV = date(2026, 11, 1)
DAY = date(2026, 11, 2)


def _usage(team_id: int = 1, team: str = "vision", cluster: str = "c1", *, cost: str = "1.666665",
           facility_kwh: float = 3.0, price: str = "0.20", **more: Any) -> TeamClusterDay:  # fmt: skip
    return TeamClusterDay(
        team_id=team_id, team=team, cluster=cluster, day=DAY, currency="EUR", gpu_hours=5.0, energy_j=9.0e6,
        facility_kwh=facility_kwh, operational_kg=0.9, embodied_kg=0.05, cost=D(cost), price_per_kwh=D(price),
        site="site-a", intensity_basis="location", **more,
    )  # fmt: skip


def _rows(usages: list[TeamClusterDay], targets: dict) -> list[dict[str, Any]]:
    return list(focus_rows(usages, targets, month=NOV, names=NAMES))


def test_a_month_runs_from_its_first_midnight_to_the_next_months() -> None:
    assert month_bounds(NOV) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    assert month_bounds(date(2026, 12, 1)) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert iso_z(datetime(2026, 11, 2, 1, 30, tzinfo=ZoneInfo("Europe/Berlin"))) == "2026-11-02T00:30:00Z"


def test_apportion_gives_the_units_left_to_the_largest_remainders_wherever_they_are() -> None:
    # the unit left over goes to the later part, whose remainder is the larger (0.0667 against 0.0333)
    assert apportion([D("1"), D("2")], D("0.10"), "EUR") == [D("0.03"), D("0.07")]
    # equal remainders: the earlier part first; all zero: shared equally
    assert apportion([D("0"), D("0"), D("0")], D("0.10"), "EUR") == [D("0.04"), D("0.03"), D("0.03")]
    assert apportion([], D("1.00"), "EUR") == []
    # any parts: they add up to the total exactly, each within a unit of its exact share
    rng = random.Random(12)
    for _ in range(200):
        exact = [D(rng.randint(0, 10**6)).scaleb(-6) for _ in range(rng.randint(1, 5))]
        total = D(rng.randint(0, 10**4)).scaleb(-2)
        parts = apportion(exact, total, "EUR")
        assert sum(parts, D(0)) == total
        whole = sum(exact, D(0))
        shares = [total * e / whole if whole else total / len(exact) for e in exact]
        assert all(abs(part - share) < D("0.01") for part, share in zip(parts, shares, strict=True))


def test_a_team_days_two_charges_add_up_to_its_booked_amount_each_quantity_on_one() -> None:
    # given a team-day of 1.666665 booked at 1.67, its 3 facility kWh at 0.20 (0.60 of it energy)
    gpu, energy = _rows([_usage()], {(1, DAY, "EUR"): D("1.67")})
    # then the GPU-hours charge first, the energy charge at its price, the two adding up to the amount booked
    assert (gpu["ChargeDescription"], energy["ChargeDescription"]) == (
        "GPU-hours of team vision on cluster c1",
        "Facility energy of team vision on cluster c1",
    )
    assert (gpu["BilledCost"], energy["BilledCost"]) == (D("1.07"), D("0.60"))
    assert all(r["BilledCost"] == r["EffectiveCost"] == r["ListCost"] == r["ContractedCost"] for r in (gpu, energy))
    # each quantity on one charge only
    assert (gpu["ConsumedQuantity"], gpu["ConsumedUnit"], gpu["x_EmbodiedKgCO2e"]) == (D("5.000000"), "GPU-Hours", 0.05)
    assert gpu["x_EnergyKWh"] is None and gpu["x_GpuEnergyKWh"] is None and gpu["x_OperationalKgCO2e"] is None
    assert (energy["ConsumedQuantity"], energy["PricingUnit"], energy["x_OperationalKgCO2e"]) == (
        D("3.000000"), "kWh", 0.9,
    )  # fmt: skip
    assert energy["x_GpuEnergyKWh"] == pytest.approx(9.0e6 / J_PER_KWH) and energy["x_EmbodiedKgCO2e"] is None
    # who it is of, when, and its origin charge
    assert (gpu["SubAccountId"], gpu["SubAccountName"], gpu["x_CostLine"]) == ("team-1", "vision", JOBS)
    assert (gpu["ChargePeriodStart"], gpu["ChargePeriodEnd"]) == ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    assert (gpu["BillingPeriodStart"], gpu["BillingPeriodEnd"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    assert (gpu["x_Origin"], energy["x_Origin"]) == (("c1", DAY, GPU_HOURS), ("c1", DAY, ENERGY))
    assert json.loads(gpu["Tags"]) == {"fleetwatt/team": "vision", "fleetwatt/charge": GPU_HOURS,
                                       "fleetwatt/cluster": "c1", "fleetwatt/site": "site-a"}  # fmt: skip


def test_the_energy_charge_is_never_more_than_the_days_cost() -> None:
    gpu, energy = _rows([_usage(price="10")], {(1, DAY, "EUR"): D("1.67")})
    assert (gpu["BilledCost"], energy["BilledCost"]) == (D("0.00"), D("1.67"))


def test_a_booked_amount_without_sums_is_still_booked_on_one_bare_row() -> None:
    (bare,) = _rows([], {(7, DAY, "EUR"): D("0.42"), (8, DAY, "EUR"): D("0.00")})
    assert (bare["BilledCost"], bare["SubAccountName"], bare["ResourceId"], bare["x_Origin"]) == (
        D("0.42"), "7", None, None,
    )  # fmt: skip
    assert bare["AllocatedMethodId"] is None and bare["ConsumedQuantity"] == D("0.000000")


def test_rows_come_by_team_day_cluster_and_charge() -> None:
    usages = [_usage(2, "vision", "c2"), _usage(2, "vision", "c1"), _usage(1, "audio", "c2")]
    targets = {(2, DAY, "EUR"): D("3.33"), (1, DAY, "EUR"): D("1.67")}
    rows = _rows(usages, targets)
    assert [(r["SubAccountName"], r["ResourceName"], r["x_Origin"][2]) for r in rows] == [
        ("audio", "c2", GPU_HOURS), ("audio", "c2", ENERGY),
        ("vision", "c1", GPU_HOURS), ("vision", "c1", ENERGY), ("vision", "c2", GPU_HOURS), ("vision", "c2", ENERGY),
    ]  # fmt: skip
    # a team-day over two clusters: its four charges add up to what it booked
    assert sum(r["BilledCost"] for r in rows if r["SubAccountName"] == "vision") == D("3.33")


def test_the_split_methods_go_exact_to_rough_and_the_coverage_leaves_the_estimate_out() -> None:
    by_method = {"estimated": 1.0e6, "sm_time": 3.0e6, "whole_gpu": 4.0e6, "memory": 0.0, "custom": 2.0e6}
    _, energy = _rows([_usage(energy_by_method_j=by_method)], {(1, DAY, "EUR"): D("1.67")})
    assert energy["x_SplitMethod"] == "whole_gpu,sm_time,estimated,custom"
    assert energy["x_Coverage"] == pytest.approx(1.0 - 1.0 / 10.0)
    assert json.loads(energy["AllocatedMethodDetails"])["x_SplitMethods"] == energy["x_SplitMethod"]
    _, nothing = _rows([_usage()], {(1, DAY, "EUR"): D("1.67")})
    assert (nothing["x_SplitMethod"], nothing["x_Coverage"]) == (None, None)


def test_each_origin_charges_ratios_add_up_to_one_and_a_partial_viewer_gets_none() -> None:
    # given two teams on one cluster-day (and so on its two origin charges)
    usages = [_usage(1, "audio", cost="1.00", facility_kwh=1.0), _usage(2, "vision", cost="3.00", facility_kwh=3.0)]
    targets = {(1, DAY, "EUR"): D("1.00"), (2, DAY, "EUR"): D("3.00")}
    rows = _rows(usages, targets)
    # when the allocation columns are filled in for whoever sees every team
    allocated = list(allocation_apply([dict(r) for r in rows], origin_totals(rows)))
    # then each row's ratio is its share of its origin charge, adding up to 1 per charge
    ratios: dict[str, list[float]] = {GPU_HOURS: [], ENERGY: []}
    for row in allocated:
        details = json.loads(row["AllocatedMethodDetails"])
        kind = json.loads(row["Tags"])["fleetwatt/charge"]
        ratios[kind].append(details["Elements"][0]["AllocatedRatio"])
        assert row["AllocatedMethodId"] == ALLOCATED_METHOD[kind] and "x_Origin" not in row
        assert (row["AllocatedResourceId"], json.loads(row["AllocatedTags"])) == (
            row["SubAccountId"], {"fleetwatt/team": row["SubAccountName"]},
        )  # fmt: skip
    assert ratios == {GPU_HOURS: [pytest.approx(0.25), pytest.approx(0.75)],
                      ENERGY: [pytest.approx(0.25), pytest.approx(0.75)]}  # fmt: skip
    # and for a viewer who may not see every team, the method but no ratio
    partial = list(allocation_apply([dict(r) for r in rows], None))
    assert all(r["AllocatedMethodDetails"] is None and r["AllocatedMethodId"] for r in partial)


def test_an_origin_charge_of_nothing_is_split_equally() -> None:
    rows = _rows([_usage(1, "audio", cost="0"), _usage(2, "vision", cost="0")], {})
    allocated = list(allocation_apply([dict(r) for r in rows], origin_totals(rows)))
    assert [json.loads(r["AllocatedMethodDetails"])["Elements"][0]["AllocatedRatio"] for r in allocated] == [0.5] * 4


def test_the_csv_is_its_header_then_the_rows_in_chunks() -> None:
    assert list(csv_chunks([])) == [",".join(COLUMNS) + "\r\n"]
    rows = [dict.fromkeys(COLUMNS) | {"BilledCost": D(f"{n}.10"), "ChargeCategory": "Usage"} for n in range(5)]
    chunks = list(csv_chunks(rows, every=2))
    assert [c.count("\r\n") for c in chunks] == [3, 2, 1]  # the header and two rows, two rows, the last row
    read = list(csv.DictReader(io.StringIO("".join(chunks))))
    assert [r["BilledCost"] for r in read] == ["0.10", "1.10", "2.10", "3.10", "4.10"]
    assert read[0]["ChargeClass"] == "" and list(read[0]) == list(COLUMNS)


def test_parquet_holds_the_rows_with_exact_money_and_utc_times() -> None:
    (gpu, energy) = (
        {k: v for k, v in r.items() if k != "x_Origin"} for r in _rows([_usage()], {(1, DAY, "EUR"): D("1.67")})
    )
    table = pq.read_table(io.BytesIO(parquet_bytes([gpu, energy])))
    # the columns in the file's order, typed as parquet_schema has them (Parquet keeps seconds as milliseconds)
    assert table.schema.names == parquet_schema().names == list(COLUMNS)
    assert table.schema.field("BilledCost").type == parquet_schema().field("BilledCost").type == pa.decimal128(18, 3)
    assert table.schema.field("ChargePeriodStart").type.tz == "UTC"
    assert table.column("BilledCost").to_pylist() == [D("1.070"), D("0.600")]
    assert table.column("ChargePeriodStart").to_pylist()[0] == datetime(2026, 11, 2, tzinfo=UTC)
    assert table.column("ConsumedQuantity").to_pylist() == [D("5.000000"), D("3.000000")]
    assert pq.read_table(io.BytesIO(parquet_bytes([]))).num_rows == 0
