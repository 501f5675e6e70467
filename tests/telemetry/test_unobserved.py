"""The estimates of time nobody saw, one GPU-hour at a time (apps.telemetry.unobserved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.telemetry.unobserved import (
    MIN_CLAIM_S,
    GpuHourGap,
    SeenPart,
    gap_estimates,
    gap_totals,
    held_seconds,
)

H = datetime(2026, 11, 9, 3, tzinfo=UTC)


def test_held_seconds_are_the_span_inside_the_hour() -> None:
    assert held_seconds(start=H - timedelta(hours=2), end=H + timedelta(hours=2), hour=H) == 3600.0
    assert held_seconds(start=H + timedelta(minutes=10), end=H + timedelta(minutes=40), hour=H) == 1800.0
    assert held_seconds(start=H + timedelta(hours=1), end=H + timedelta(hours=2), hour=H) == 0.0


def test_a_job_alone_through_an_outage_takes_the_meter_s_part_whole() -> None:
    gap = GpuHourGap(unoccupied_s=1800.0, unseen_s=1800.0, unobserved_j=900_000.0)
    [e] = gap_estimates(gap=gap, held_s={1: 3600.0}, seen={1: SeenPart(1800.0, 1800.0, 900_000.0)})
    assert (e.occupancy_s, e.energy_j) == (1800.0, 900_000.0)


def test_two_jobs_sharing_split_the_unseen_part_by_their_seen_power() -> None:
    # seen: 900 s each (shared), job 1 drew three times job 2's power
    gap = GpuHourGap(unoccupied_s=1800.0, unseen_s=1800.0, unobserved_j=720_000.0)
    seen = {1: SeenPart(1800.0, 900.0, 540_000.0), 2: SeenPart(1800.0, 900.0, 180_000.0)}
    one, two = gap_estimates(gap=gap, held_s={1: 3600.0, 2: 3600.0}, seen=seen)
    assert one.occupancy_s + two.occupancy_s == pytest.approx(1800.0)
    assert one.energy_j == pytest.approx(540_000.0) and two.energy_j == pytest.approx(180_000.0)


def test_a_job_that_left_during_the_outage_takes_what_it_draws_not_the_idle_rest() -> None:
    gap = GpuHourGap(unoccupied_s=3600.0, unseen_s=3600.0, unobserved_j=720_000.0)
    [e] = gap_estimates(gap=gap, held_s={1: 1200.0}, seen={}, seen_power_w={1: 450.0})
    assert e.occupancy_s == 1200.0
    assert e.energy_j == pytest.approx(450.0 * 1200.0)


def test_held_but_seen_idle_time_is_occupancy_without_energy() -> None:
    gap = GpuHourGap(unoccupied_s=3600.0, unseen_s=0.0, unobserved_j=0.0)
    [e] = gap_estimates(gap=gap, held_s={1: 3600.0}, seen={})
    assert (e.occupancy_s, e.energy_j) == (3600.0, 0.0)


def test_seconds_of_clock_disagreement_are_no_claim() -> None:
    gap = GpuHourGap(unoccupied_s=100.0, unseen_s=0.0, unobserved_j=0.0)
    assert gap_estimates(gap=gap, held_s={1: 3600.0}, seen={1: SeenPart(3600.0 - MIN_CLAIM_S / 2, 3590.0, 1.0)}) == []


parts = st.builds(
    SeenPart,
    sampled_s=st.floats(0, 3600),
    occupancy_s=st.floats(0, 3600),
    energy_j=st.floats(0, 3e6),
)


@given(
    unoccupied=st.floats(0, 3600),
    unseen_share=st.floats(0, 1),
    unobserved_j=st.floats(0, 3e6),
    held=st.dictionaries(st.integers(1, 5), st.floats(0, 3600), max_size=5),
    seen=st.dictionaries(st.integers(1, 5), parts, max_size=5),
    power=st.dictionaries(st.integers(1, 5), st.floats(0, 1000), max_size=5),
)
def test_estimates_never_charge_more_than_the_gap(
    unoccupied: float,
    unseen_share: float,
    unobserved_j: float,
    held: dict[int, float],
    seen: dict[int, SeenPart],
    power: dict[int, float],
) -> None:
    gap = GpuHourGap(unoccupied_s=unoccupied, unseen_s=unoccupied * unseen_share, unobserved_j=unobserved_j)
    estimates = gap_estimates(gap=gap, held_s=held, seen=seen, seen_power_w=power)
    seconds, joules = gap_totals(estimates)
    assert seconds <= unoccupied * (1 + 1e-9) + 1e-9
    assert joules <= unobserved_j * (1 + 1e-9) + 1e-9
    assert all(e.occupancy_s >= 0 and e.energy_j >= 0 for e in estimates)
    assert {e.job_id for e in estimates} <= set(held)


def test_a_sliver_of_seen_occupancy_does_not_make_an_infinite_power() -> None:
    # given a job seen for a float's sliver of a second with real energy (the agent samples once a second)
    gap = GpuHourGap(unoccupied_s=1800.0, unseen_s=1800.0, unobserved_j=0.0)
    seen = {1: SeenPart(sampled_s=0.0, occupancy_s=5e-324, energy_j=3e6), 2: SeenPart(0.0, 600.0, 1.2e5)}
    # when the gap's time is charged to the jobs that held the GPU
    estimates = gap_estimates(gap=gap, held_s={1: 3600.0, 2: 3600.0}, seen=seen)
    # then every figure is a number (it was NaN: infinite power times zero energy)
    assert all(e.energy_j == 0.0 and e.occupancy_s == 900.0 for e in estimates)
