"""Energy to carbon and money (apps/carbon/arithmetic.py, pure): the footprint's chain of factors, the SCI per unit,
the fill rule of missing intensity, the carbon-shift hint and the TDP-based estimate. The worked example of the
design through the database is tests/carbon/test_footprint.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.carbon.arithmetic import (
    HourFactors,
    footprint,
    intensity_fill,
    money,
    sci_kg,
    shift_saving_kg,
    tdp_estimate_j,
)

T0 = datetime(2026, 11, 2, tzinfo=UTC)
H = timedelta(hours=1)
KWH = 3.6e6

FACTORS = HourFactors(
    overhead=1.25,
    pue=1.2,
    intensity_kg_per_kwh=0.4,
    embodied_kg_per_gpu_hour=0.05,
    gpu_rate_per_hour=Decimal("2.50"),
    price_per_kwh=Decimal("0.20"),
)


# money


def test_money_is_the_float_to_the_millionth() -> None:
    assert money(0.1 + 0.2) == Decimal("0.300000")
    assert money(1 / 3) == Decimal("0.333333")
    assert money(Decimal("2.5")) == Decimal("2.500000")


# footprint


def test_the_chain_gpu_to_server_to_facility_to_carbon() -> None:
    # given 1 kWh drawn by the GPU over one GPU-hour
    fp = footprint(energy_j=KWH, gpu_hours=1.0, factors=FACTORS)
    # then each step multiplies by its factor
    assert fp.gpu_kwh == pytest.approx(1.0)
    assert fp.server_kwh == pytest.approx(1.25)
    assert fp.facility_kwh == pytest.approx(1.25 * 1.2)
    assert fp.operational_kg == pytest.approx(1.25 * 1.2 * 0.4)
    assert fp.embodied_kg == pytest.approx(0.05)
    # and the cost is the GPU-hour's rate plus the facility energy at the site's price
    assert fp.cost == money(2.5 + 1.25 * 1.2 * 0.2)


def test_no_intensity_is_unknown_carbon_not_zero() -> None:
    fp = footprint(energy_j=KWH, gpu_hours=1.0, factors=HourFactors(pue=1.3))
    assert fp.operational_kg is None
    assert fp.facility_kwh == pytest.approx(1.3)


def test_embodied_and_the_rate_follow_gpu_hours_not_energy() -> None:
    # given a GPU held for half an hour that drew nothing
    fp = footprint(energy_j=0.0, gpu_hours=0.5, factors=FACTORS)
    # then
    assert (fp.facility_kwh, fp.operational_kg) == (0.0, 0.0)
    assert fp.embodied_kg == pytest.approx(0.025)
    assert fp.cost == Decimal("1.250000")


@settings(max_examples=60, deadline=None)
@given(
    energy_j=st.floats(min_value=0, max_value=1e10),
    gpu_hours=st.floats(min_value=0, max_value=1e3),
    overhead=st.floats(min_value=1, max_value=3),
    pue=st.floats(min_value=1, max_value=3),
    intensity=st.floats(min_value=0, max_value=2),
)
def test_footprints_add_as_their_energies_do(
    energy_j: float, gpu_hours: float, overhead: float, pue: float, intensity: float
) -> None:
    # given one hour's factors
    factors = HourFactors(overhead=overhead, pue=pue, intensity_kg_per_kwh=intensity)
    # when the hour is split in two halves, or taken whole
    half = footprint(energy_j=energy_j / 2, gpu_hours=gpu_hours / 2, factors=factors)
    whole = footprint(energy_j=energy_j, gpu_hours=gpu_hours, factors=factors)
    # then the halves add up to the whole, and no step loses energy
    assert (half + half).facility_kwh == pytest.approx(whole.facility_kwh)
    assert (half + half).operational_kg == pytest.approx(whole.operational_kg)
    assert whole.gpu_kwh <= whole.server_kwh * (1 + 1e-12) <= whole.facility_kwh * (1 + 1e-12) ** 2


# sci_kg


def test_sci_is_per_run_unless_the_job_reported_its_work() -> None:
    assert sci_kg(operational_kg=3.0, embodied_kg=1.0, work_units=None) == 4.0
    assert sci_kg(operational_kg=3.0, embodied_kg=1.0, work_units=8.0) == 0.5
    # no work, or nonsense work, is a run
    assert sci_kg(operational_kg=3.0, embodied_kg=1.0, work_units=0.0) == 4.0
    assert sci_kg(operational_kg=3.0, embodied_kg=1.0, work_units=-2.0) == 4.0


def test_sci_is_unknown_where_the_carbon_is() -> None:
    assert sci_kg(operational_kg=None, embodied_kg=1.0, work_units=8.0) is None


# intensity_fill


def test_the_earlier_neighbour_wins_a_tie() -> None:
    known = {T0 - H: 0.1, T0 + H: 0.9}
    assert intensity_fill(T0, known=known, monthly_mean={}, within_hours=2) == (0.1, True)


def test_a_neighbour_past_the_fill_distance_is_not_used() -> None:
    known = {T0 - 4 * H: 0.1}
    assert intensity_fill(T0, known=known, monthly_mean={(2026, 11): 0.5}, within_hours=3) == (0.5, True)
    assert intensity_fill(T0, known=known, monthly_mean={}, within_hours=0) == (None, False)


def test_a_month_without_figures_takes_the_nearest_months_mean() -> None:
    means = {(2026, 8): 0.2, (2027, 1): 0.6}
    # November 2026 is 2 months from January 2027, 3 from August
    assert intensity_fill(T0, known={}, monthly_mean=means, within_hours=3) == (0.6, True)


def test_a_known_hour_is_never_estimated_even_at_zero() -> None:
    assert intensity_fill(T0, known={T0: 0.0}, monthly_mean={(2026, 11): 0.5}, within_hours=3) == (0.0, False)


# shift_saving_kg


def _day(values: list[float]) -> dict[datetime, float]:
    return {T0 + k * H: v for k, v in enumerate(values)}


def test_the_saving_is_the_cleanest_window_within_the_deadline() -> None:
    # given a two-hour run at 1 kWh an hour in dirty hours, a clean window 4 hours later
    intensity = _day([0.5, 0.5, 0.5, 0.5, 0.1, 0.1, 0.5, 0.5])
    run = [(T0, 1.0), (T0 + H, 1.0)]
    # then within 6 hours it could have moved there, within 5 half-way there; the window must end by the deadline
    assert shift_saving_kg(run, intensity, deadline_h=6) == pytest.approx(0.8)
    assert shift_saving_kg(run, intensity, deadline_h=5) == pytest.approx(0.4)
    assert shift_saving_kg(run, intensity, deadline_h=4) == pytest.approx(0.0)


def test_no_saving_is_claimed_without_the_runs_own_intensity() -> None:
    intensity = _day([0.5, 0.1, 0.1])
    assert shift_saving_kg([(T0 - H, 1.0), (T0, 1.0)], intensity, deadline_h=3) is None
    assert shift_saving_kg([], intensity, deadline_h=3) is None


def test_windows_with_unknown_hours_are_skipped() -> None:
    # given clean hours after a hour nobody gave a figure for
    intensity = {T0: 0.5, T0 + H: 0.5, T0 + 3 * H: 0.1, T0 + 4 * H: 0.1}
    run = [(T0, 1.0), (T0 + H, 1.0)]
    # then the windows across the hole are not compared, the one after it is
    assert shift_saving_kg(run, intensity, deadline_h=4) == 0.0
    assert shift_saving_kg(run, intensity, deadline_h=5) == pytest.approx(0.8)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0, max_value=1), min_size=6, max_size=30),
    kwh=st.lists(st.floats(min_value=0, max_value=10), min_size=1, max_size=5),
    deadline_h=st.integers(min_value=0, max_value=30),
)
def test_a_saving_is_never_negative_nor_more_than_the_run_emitted(
    values: list[float], kwh: list[float], deadline_h: int
) -> None:
    intensity = _day(values)
    run = [(T0 + k * H, e) for k, e in enumerate(kwh) if T0 + k * H in intensity]
    saving = shift_saving_kg(run, intensity, deadline_h=deadline_h)
    assert saving is not None
    emitted = sum(e * intensity[h] for h, e in run)
    assert -1e-12 <= saving <= emitted + 1e-12


# tdp_estimate_j


def test_the_tdp_estimate_is_seconds_held_at_the_rated_power() -> None:
    assert tdp_estimate_j([(3600.0, 700.0), (1800.0, 400.0)]) == 3600 * 700 + 1800 * 400


def test_no_tdp_estimate_is_guessed_for_a_gpu_without_a_rating() -> None:
    assert tdp_estimate_j([(3600.0, 700.0), (60.0, None)]) is None
    # a GPU the job never held does not matter
    assert tdp_estimate_j([(3600.0, 700.0), (0.0, None)]) == 3600 * 700
    assert tdp_estimate_j([]) == 0
