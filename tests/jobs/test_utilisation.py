"""A job's use of its GPUs from its rows (apps.jobs.utilisation): SM busy, memory, power, time on a shared GPU."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.jobs.utilisation import PEAK_HOUR_MIN_S, UtilisationRow, job_utilisation, shared_seconds

T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
HOUR = timedelta(hours=1)
GIB = 1024**3


def _row(hour: int = 0, *, gpu_id: int = 1, estimated: bool = False, power_w: float = 500.0, sampled_s: float = 3600.0,
         sm_s: float = 1800.0, occupancy_s: float | None = None, memory_gib: int = 10) -> UtilisationRow:  # fmt: skip
    return UtilisationRow(
        gpu_id=gpu_id, gpu=f"node-a/{gpu_id}", hour=T0 + hour * HOUR, estimated=estimated,
        energy_j=power_w * sampled_s, sampled_s=sampled_s, sm_s=sm_s,
        occupancy_s=sampled_s if occupancy_s is None else occupancy_s, peak_memory_bytes=memory_gib * GIB,
    )  # fmt: skip


def test_two_jobs_sharing_a_gpu_hour_give_its_shared_time_exactly() -> None:
    # given half an hour shared with one other job: occupancy 30 min alone + 30 min / 2 = 45 min
    # then the shared time is the shortfall x 2
    assert shared_seconds(sampled_s=3600, occupancy_s=2700, jobs_on_gpu_hour=2) == pytest.approx(1800)


def test_with_more_jobs_on_the_gpu_hour_the_shared_time_is_the_least_it_can_be() -> None:
    # given the same shortfall with three jobs on the GPU-hour: if all three were there at once, 1350 s
    assert shared_seconds(sampled_s=3600, occupancy_s=2700, jobs_on_gpu_hour=3) == pytest.approx(1350)


@pytest.mark.parametrize(
    ("sampled_s", "occupancy_s", "jobs"),
    [(3600, 3600, 2), (3600, 3590, 2), (3600, 1800, 1), (0, 0, 2)],
    ids=["occupied-whole", "within-1-percent", "alone-on-the-gpu-hour", "never-seen"],
)
def test_a_job_alone_shared_nothing(sampled_s: float, occupancy_s: float, jobs: int) -> None:
    assert shared_seconds(sampled_s=sampled_s, occupancy_s=occupancy_s, jobs_on_gpu_hour=jobs) == 0.0


def test_shared_time_is_never_more_than_the_time_seen() -> None:
    assert shared_seconds(sampled_s=600, occupancy_s=0, jobs_on_gpu_hour=2) == 600


def test_the_summary_of_a_job_half_shared_for_an_hour() -> None:
    # given an hour at 400 W, half of it beside one other job, and an hour alone at 600 W, busier, with more memory
    rows = [
        _row(0, power_w=400, sm_s=1800, occupancy_s=2700, memory_gib=20),
        _row(1, power_w=600, sm_s=3600, memory_gib=30),
        _row(2, estimated=True, power_w=900, sm_s=0, memory_gib=0),  # time nobody saw: no measurement in it
    ]
    # when it is summed
    u = job_utilisation(rows, jobs_on_gpu_hour={(1, T0): 2, (1, T0 + HOUR): 1})
    # then each figure is over the two hours seen
    assert u.seen_s == 7200
    assert u.sm_busy == pytest.approx(0.75)
    assert u.peak_memory_bytes == 30 * GIB
    assert u.mean_power_w == pytest.approx(500)
    assert (u.peak_hour_power_w, u.peak_hour, u.peak_gpu) == (pytest.approx(600), T0 + HOUR, "node-a/1")
    assert u.shared_s == pytest.approx(1800) and u.shared_exact
    assert u.shared_share == pytest.approx(0.25)


def test_an_hour_seen_for_a_moment_is_no_peak_and_sampled_seconds_past_the_hour_count_as_the_hour() -> None:
    rows = [_row(0, power_w=300, sampled_s=3615), _row(1, power_w=2000, sampled_s=PEAK_HOUR_MIN_S - 1)]
    u = job_utilisation(rows, jobs_on_gpu_hour={})
    assert u.seen_s == pytest.approx(3600 + PEAK_HOUR_MIN_S - 1)
    assert u.peak_hour == T0 and u.peak_hour_power_w == pytest.approx(300 * 3615 / 3600)


def test_a_shared_hour_with_three_jobs_makes_the_shared_time_a_lower_bound() -> None:
    u = job_utilisation([_row(0, occupancy_s=2700)], jobs_on_gpu_hour={(1, T0): 3})
    assert u.shared_s == pytest.approx(1350) and not u.shared_exact


def test_a_job_never_seen_has_no_figures() -> None:
    u = job_utilisation([_row(0, estimated=True)], jobs_on_gpu_hour={})
    assert (u.seen_s, u.sm_busy, u.mean_power_w, u.peak_hour_power_w, u.shared_share) == (0, None, None, None, None)
    assert u.peak_memory_bytes == 0
