"""A rollup as finance tools book it (apps/rollups/finance.py, pure): each period's cost its jobs' rounded costs, the
totals the sum of the periods' (never the exact sum rounded); an idle line rounded per period and its totals the sum
of those; a waste line rounded once over the periods; kWh beside J; the energy's interval added up, unknown once one
period's is; the new columns last; money as exact text; a CSV's quantities without float noise."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from apps.core.units.footprint import J_PER_KWH
from apps.core.units.money import round_minor
from apps.rollups.finance import BAND_KEYS, csv_quantity, for_finance, money_as_text

D = Decimal


def _figures(cost: str, energy_j: float = 3.6e6) -> dict[str, Any]:
    return {"energy_j": energy_j, "gpu_hours": 1.5, "facility_kwh": 1.2, "operational_kg": 0.4, "embodied_kg": 0.1,
            "cost": D(cost)}  # fmt: skip


def _period(day: str, cost: str, *, idle: str | None, unseen: str = "0", waste: str | None = None,
            band: tuple[float | None, float | None] = (3.0e6, 4.0e6)) -> dict[str, Any]:  # fmt: skip
    """A period as the rollups' selectors write it (apps.rollups.selectors)."""
    return {
        "period": day,
        **_figures(cost),
        "energy_by_method_j": {"whole_gpu": 3.6e6},
        "idle": _figures(idle) if idle is not None else None,
        "unobserved": _figures(unseen, 0.0) if idle is not None else None,
        "waste": _figures(waste) if waste is not None else None,
        "energy_low_j": band[0],
        "energy_high_j": band[1],
    }


def _doc(*periods: dict[str, Any], currency: str = "EUR") -> dict[str, Any]:
    return {"granularity": "day", "currency": currency, "intensity_basis": "location", "intensity_zones": ["DE"],
            "periods": list(periods)}  # fmt: skip


def test_the_totals_cost_is_the_sum_of_the_periods_booked_costs() -> None:
    # given two days whose jobs' rounded costs are 1.67 and 0.66 (exact: 1.666665 and 0.666666)
    doc = _doc(_period("2026-11-02", "1.666665", idle=None), _period("2026-11-03", "0.666666", idle=None))
    # when booked
    booked = for_finance(doc, {"2026-11-02": D("1.67"), "2026-11-03": D("0.66")})
    # then each period's cost is its jobs', the exact one beside it, and the totals add the booked ones up
    first, second = booked["periods"]
    assert (first["cost"], first["cost_exact"], second["cost"]) == (D("1.67"), D("1.666665"), D("0.66"))
    # (not the periods' exact costs rounded one by one: 1.67 + 0.67)
    assert booked["totals"]["cost"] == D("2.33") != sum(round_minor(p["cost_exact"], "EUR") for p in (first, second))
    assert booked["totals"]["cost_exact"] == D("2.333331")
    # kWh beside J, the periods' figures added up in the totals; the document's other keys kept
    assert first["energy_kwh"] == pytest.approx(first["energy_j"] / J_PER_KWH)
    assert booked["totals"]["gpu_hours"] == pytest.approx(3.0) and booked["totals"]["energy_j"] == pytest.approx(7.2e6)
    assert (booked["currency"], booked["intensity_zones"]) == ("EUR", ["DE"])
    assert booked["totals"]["idle"] is None and booked["totals"]["waste"] is None


def test_a_period_without_a_booked_cost_costs_zero_in_the_currencys_minor_unit() -> None:
    eur = for_finance(_doc(_period("2026-11-02", "0.001", idle=None)), {})
    jpy = for_finance(_doc(_period("2026-11-02", "0.4", idle=None), currency="JPY"), {})
    assert str(eur["periods"][0]["cost"]) == "0.00" and str(eur["totals"]["cost"]) == "0.00"
    assert str(jpy["periods"][0]["cost"]) == "0"


def test_an_idle_line_is_rounded_per_period_and_a_waste_line_once_over_the_periods() -> None:
    # given two days, each with an idle line of 0.015 (0.005 of it unseen) and waste of 0.125
    doc = _doc(*(_period(day, "1.00", idle="0.015", unseen="0.005", waste="0.125")
                 for day in ("2026-11-02", "2026-11-03")))  # fmt: skip
    # when booked
    booked = for_finance(doc, {"2026-11-02": D("1.00"), "2026-11-03": D("1.00")})
    first = booked["periods"][0]
    totals = booked["totals"]
    # then each idle line is its cost rounded (0.02, half to even), and the totals' the sum of those (0.04, not 0.03)
    assert (first["idle"]["cost"], first["idle"]["cost_exact"]) == (D("0.02"), D("0.015"))
    assert first["unobserved"]["cost"] == D("0.00") and totals["unobserved"]["cost"] == D("0.00")
    assert totals["idle"]["cost"] == D("0.04") and totals["idle"]["cost_exact"] == D("0.030")
    # waste is no bill: each period's rounded (0.12), the totals' the exact sum rounded once (0.25, not 0.24)
    assert first["waste"]["cost"] == D("0.12") and totals["waste"]["cost"] == D("0.25")
    assert totals["waste"]["energy_kwh"] == pytest.approx(2 * 3.6e6 / J_PER_KWH)


def test_the_energys_interval_is_added_up_and_unknown_once_a_periods_is() -> None:
    known = for_finance(_doc(_period("a", "1", idle=None), _period("b", "1", idle=None, band=(1.0e6, 2.0e6))), {})
    assert (known["totals"]["energy_low_j"], known["totals"]["energy_high_j"]) == (4.0e6, 6.0e6)
    assert known["totals"]["energy_low_kwh"] == pytest.approx(4.0e6 / J_PER_KWH)
    unknown = for_finance(_doc(_period("a", "1", idle=None), _period("b", "1", idle=None, band=(None, None))), {})
    assert [unknown["totals"][k] for k in BAND_KEYS] == [None] * 4
    assert [unknown["periods"][1][k] for k in BAND_KEYS] == [None] * 4
    assert unknown["periods"][0]["energy_high_kwh"] == pytest.approx(4.0e6 / J_PER_KWH)


def test_the_columns_added_later_come_last() -> None:
    booked = for_finance(_doc(_period("2026-11-02", "1.00", idle="0.01", waste="0.5")), {})
    period = booked["periods"][0]
    # the first columns as the selectors write them, then kWh and the exact cost, then waste and the interval
    assert list(period)[:2] == ["period", "energy_j"]
    assert list(period)[-7:] == ["energy_kwh", "cost_exact", "waste", *BAND_KEYS]


def test_money_is_written_as_exact_text_wherever_it_is() -> None:
    value = {"cost": D("0.10"), "lines": [{"cost": D("1E+1")}, 2.5, None], "name": "x"}
    assert money_as_text(value) == {"cost": "0.10", "lines": [{"cost": "1E+1"}, 2.5, None], "name": "x"}


def test_a_csv_quantity_is_rounded_to_its_places_without_a_negative_zero() -> None:
    assert csv_quantity(12.000000000000002) == 12.0
    assert csv_quantity(0.1 + 0.2) == 0.3
    assert csv_quantity(1.23456789, places=2) == 1.23
    assert csv_quantity(None) is None
    zero = csv_quantity(-0.0000001)
    assert zero == 0.0 and math.copysign(1.0, zero) == 1.0
