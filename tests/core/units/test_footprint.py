"""The footprint value type (apps.core.units.footprint): direct tests, and hypothesis for its algebra."""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.core.units.footprint import FOOTPRINT_COLUMNS, J_PER_KWH, Footprint, FootprintSum, kwh

UNITS = {
    "energy_j", "gpu_hours", "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost", "energy_kwh",
    "co2e_kg",
}  # fmt: skip

amounts = st.floats(min_value=0.0, max_value=1e9, allow_nan=False, allow_infinity=False)
money = st.decimals(min_value=0, max_value=Decimal("1e9"), places=6, allow_nan=False, allow_infinity=False)
footprints = st.builds(
    Footprint,
    energy_j=amounts,
    gpu_hours=amounts,
    server_kwh=amounts,
    facility_kwh=amounts,
    operational_kg=st.none() | amounts,
    embodied_kg=amounts,
    cost=money,
)
known = footprints.filter(lambda fp: fp.operational_kg is not None)
unknown = footprints.map(lambda fp: dataclasses.replace(fp, operational_kg=None))


def assert_close(a: Footprint, b: Footprint) -> None:
    """Equal up to float rounding; money (Decimal, 6 places) exactly."""
    for f in dataclasses.fields(Footprint):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is None or y is None or isinstance(x, Decimal):
            assert x == y, f.name
        else:
            assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-6), (f.name, x, y)


# Direct tests


def test_kwh_is_joules_over_3_6_megajoules() -> None:
    assert J_PER_KWH == 3.6e6
    assert kwh(3.6e6) == 1.0
    assert kwh(900_000.0) == 0.25


def test_an_empty_footprint_is_zero_with_operational_co2e_unknown() -> None:
    # when
    fp = Footprint()
    # then
    assert (fp.energy_j, fp.gpu_hours, fp.server_kwh, fp.facility_kwh, fp.embodied_kg) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert fp.operational_kg is None
    assert fp.cost == Decimal(0) and isinstance(fp.cost, Decimal)


def test_adding_sums_every_figure() -> None:
    # given
    a = Footprint(7.2e6, 1.5, 2.0, 2.5, 0.5, 0.125, Decimal("1.25"))
    b = Footprint(3.6e6, 0.5, 1.0, 1.25, 0.25, 0.25, Decimal("0.75"))
    # when
    total = a + b
    # then
    assert total == Footprint(10.8e6, 2.0, 3.0, 3.75, 0.75, 0.375, Decimal("2.00"))


def test_a_footprint_adds_only_to_a_footprint() -> None:
    with pytest.raises(TypeError):
        Footprint() + 1  # type: ignore[operator]


def test_a_footprint_is_immutable() -> None:
    fp = Footprint(energy_j=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp.energy_j = 2.0  # type: ignore[misc]


def test_gpu_kwh_and_co2e_kg() -> None:
    # given
    fp = Footprint(energy_j=1.8e6, operational_kg=0.3, embodied_kg=0.2)
    # then
    assert fp.gpu_kwh == 0.5
    assert fp.co2e_kg == pytest.approx(0.5)


def test_co2e_counts_unknown_operational_as_zero() -> None:
    assert Footprint(operational_kg=None, embodied_kg=0.2).co2e_kg == 0.2


def test_scaled_takes_a_share_of_every_figure_and_money_exactly() -> None:
    # given
    fp = Footprint(4e6, 2.0, 3.0, 4.0, 1.0, 0.5, Decimal("10.00"))
    # when
    tenth = fp.scaled(0.1)
    # then: the share enters money as its shortest decimal (0.1), not its binary expansion
    assert tenth.cost == Decimal("1.000")
    assert tenth.energy_j == pytest.approx(4e5)
    assert tenth.gpu_hours == pytest.approx(0.2)
    assert tenth.server_kwh == pytest.approx(0.3)
    assert tenth.facility_kwh == pytest.approx(0.4)
    assert tenth.operational_kg == pytest.approx(0.1)
    assert tenth.embodied_kg == pytest.approx(0.05)


def test_scaled_keeps_unknown_operational_unknown() -> None:
    assert Footprint(operational_kg=None, energy_j=10.0).scaled(0.5).operational_kg is None


def test_total_of_nothing_is_the_empty_footprint() -> None:
    assert Footprint.total([]) == Footprint()


def test_from_sums_reads_the_named_columns_and_occupancy_in_hours() -> None:
    # given: a row of database sums
    row = {
        "energy_j": 7.2e6, "occupancy_s": 5400.0, "server_kwh": 2.6, "facility_kwh": 3.12, "operational_kg": 0.9,
        "embodied_kg": 0.07, "cost": Decimal("4.123456"),
    }  # fmt: skip
    # when
    fp = Footprint.from_sums(row)
    # then
    assert fp == Footprint(7.2e6, 1.5, 2.6, 3.12, 0.9, 0.07, Decimal("4.123456"))


def test_from_sums_prefers_gpu_hours_over_occupancy_seconds() -> None:
    assert Footprint.from_sums({"gpu_hours": 2.0, "occupancy_s": 3600.0}).gpu_hours == 2.0


def test_from_sums_reads_prefixed_keys_only() -> None:
    # given
    row = {"idle_energy_j": 3.6e6, "energy_j": 99.0, "idle_operational_kg": 0.4, "idle_cost": Decimal("2")}
    # when
    fp = Footprint.from_sums(row, prefix="idle_")
    # then
    assert (fp.energy_j, fp.operational_kg, fp.cost) == (3.6e6, 0.4, Decimal("2"))


def test_from_sums_of_null_sums_is_zero_with_operational_unknown() -> None:
    # given: what Sum() gives over no rows
    row = dict.fromkeys(
        ("energy_j", "occupancy_s", "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost")
    )
    # when
    fp = Footprint.from_sums(row)
    # then
    assert fp == Footprint()
    assert fp.operational_kg is None
    assert Footprint.from_sums({}) == Footprint()


def test_from_sums_keeps_a_zero_operational_sum_known() -> None:
    assert Footprint.from_sums({"operational_kg": 0.0}).operational_kg == 0.0


def test_as_dict_names_every_figure_with_its_unit() -> None:
    # given
    fp = Footprint(energy_j=3.6e6, operational_kg=0.25, embodied_kg=0.5, cost=Decimal("1.50"))
    # when
    out = fp.as_dict()
    # then
    assert set(out) == UNITS
    assert out["energy_kwh"] == 1.0
    assert out["co2e_kg"] == 0.75
    assert out["cost"] == Decimal("1.50")


# Properties


@settings(max_examples=60)
@given(footprints, footprints)
def test_addition_is_commutative(a: Footprint, b: Footprint) -> None:
    assert a + b == b + a


@settings(max_examples=60)
@given(footprints, footprints, footprints)
def test_addition_is_associative(a: Footprint, b: Footprint, c: Footprint) -> None:
    assert_close((a + b) + c, a + (b + c))


@settings(max_examples=60)
@given(footprints)
def test_the_empty_footprint_is_neutral(fp: Footprint) -> None:
    assert Footprint() + fp == fp
    assert fp + Footprint() == fp


@settings(max_examples=40)
@given(st.lists(footprints, max_size=6))
def test_total_is_repeated_addition(fps: list[Footprint]) -> None:
    # given
    by_hand = Footprint()
    for fp in fps:
        by_hand = by_hand + fp
    # then
    assert Footprint.total(fps) == by_hand
    assert Footprint.total(iter(fps)) == by_hand  # any iterable, once


@settings(max_examples=40)
@given(unknown, unknown)
def test_unknown_plus_unknown_operational_stays_unknown(a: Footprint, b: Footprint) -> None:
    assert (a + b).operational_kg is None


@settings(max_examples=40)
@given(unknown, known)
def test_unknown_plus_known_operational_is_the_known(a: Footprint, b: Footprint) -> None:
    assert (a + b).operational_kg == b.operational_kg
    assert (b + a).operational_kg == b.operational_kg


@settings(max_examples=40)
@given(footprints)
def test_scaled_by_one_is_itself(fp: Footprint) -> None:
    assert fp.scaled(1.0) == fp


@settings(max_examples=40)
@given(footprints, st.floats(min_value=0.0, max_value=1.0))
def test_a_share_and_its_complement_add_back_to_the_whole(fp: Footprint, share: float) -> None:
    # when
    parts = fp.scaled(share) + fp.scaled(1.0 - share)
    # then: floats to rounding, money to a millionth of a cent
    assert math.isclose(parts.energy_j, fp.energy_j, rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(parts.facility_kwh, fp.facility_kwh, rel_tol=1e-9, abs_tol=1e-6)
    assert abs(parts.cost - fp.cost) <= Decimal("1e-8") * max(1, fp.cost)


@settings(max_examples=40)
@given(footprints)
def test_as_dict_round_trips_through_from_sums(fp: Footprint) -> None:
    # when
    out = fp.as_dict()
    # then
    assert set(out) == UNITS
    assert out["energy_kwh"] == kwh(fp.energy_j)
    assert out["co2e_kg"] == fp.co2e_kg
    assert Footprint.from_sums(out) == fp


@given(st.lists(footprints, max_size=12))
@settings(max_examples=200)
def test_a_sum_in_place_is_repeated_addition_to_the_last_bit(fps: list[Footprint]) -> None:
    # when footprints are added up in place, one after the other
    added = FootprintSum()
    for fp in fps:
        added.add(fp)
    # then the figures are those of adding them with `+` from the empty footprint, bit for bit
    by_hand = Footprint()
    for fp in fps:
        by_hand = by_hand + fp
    assert added.footprint() == by_hand


def test_a_cursor_s_tuple_of_sums_reads_as_the_row_of_them_by_name() -> None:
    sums = (7.2e6, 5400, 2.5, 3.0, None, 0.4, "12.34")
    row = dict(zip(FOOTPRINT_COLUMNS, sums, strict=True))
    assert Footprint.from_sum_columns(*sums) == Footprint.from_sums(row)
    assert Footprint.from_sum_columns(None, None, None, None, 1, None, None) == Footprint.from_sums(
        dict.fromkeys(FOOTPRINT_COLUMNS) | {"operational_kg": 1}
    )
