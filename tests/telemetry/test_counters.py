"""The counter arithmetic alone: exact rises, resets, anchors, copies (property-tested)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from apps.telemetry.counters import CounterWindow, counter_increase, merge_copies, sum_of_rises


def _window(samples: list[tuple[float, float]], anchor: float | None, t0: float) -> CounterWindow:
    in_hour = [(t, v) for t, v in samples if t > t0]
    values = [v for _, v in in_hour]
    resets = sum(1 for a, b in itertools.pairwise(values) if b < a)
    return CounterWindow(
        last=values[-1] if values else None,
        anchor=anchor,
        minimum=min(values) if values else None,
        resets=resets,
        raw=None,
    )


@st.composite
def counter_history(draw: st.DrawFn) -> tuple[list[float], list[int]]:
    """Per-step rises, and the steps at which the counter restarted from 0."""
    n = draw(st.integers(min_value=2, max_value=120))
    rises = draw(st.lists(st.floats(min_value=0, max_value=1e4), min_size=n, max_size=n))
    restarts = sorted(draw(st.sets(st.integers(min_value=1, max_value=n - 1), max_size=3)))
    return rises, restarts


@given(counter_history(), st.integers(min_value=1, max_value=119))
def test_hours_partition_the_total_exactly(history: tuple[list[float], list[int]], cut: int) -> None:
    rises, restarts = history
    cut = min(cut, len(rises) - 1)
    values, v, true_total = [], 0.0, 0.0
    for i, r in enumerate(rises):
        if i in restarts and v > 0:
            # The counter started again from 0 and rose less than it had: a visible drop (a restart
            # whose first value is not below the last one cannot be told from a rise, by anyone).
            r = min(r, v / 2)
            v = r
        else:
            v += r
        true_total += r
        values.append(v)
    samples = [(float(i + 1), x) for i, x in enumerate(values)]
    t0 = float(cut)  # hour boundary between sample cut and cut + 1
    first_hour = [(t, x) for t, x in samples if t <= t0]
    second = _window(samples, anchor=first_hour[-1][1], t0=t0)
    if second.needs_raw_samples():
        second.raw = samples
    first = _window(first_hour, anchor=None, t0=0.0)
    if first.needs_raw_samples():
        first.raw = first_hour
    total = counter_increase(first, hour_start=0.0, new_series_from_zero=True) + counter_increase(
        second, hour_start=t0, new_series_from_zero=True
    )
    assert abs(total - true_total) <= 1e-6 * max(1.0, true_total)


def test_a_reset_counts_the_whole_new_value() -> None:
    assert (
        sum_of_rises([(1, 10.0), (2, 15.0), (3, 4.0), (4, 9.0)], anchor=8.0, new_series_from_zero=True) == 2 + 5 + 4 + 5
    )


def test_a_counter_that_does_not_start_at_zero_counts_from_its_first_value() -> None:
    window = CounterWindow(last=1_000_500.0, anchor=None, minimum=1_000_000.0)
    assert counter_increase(window, hour_start=0, new_series_from_zero=False) == 500.0
    assert counter_increase(window, hour_start=0, new_series_from_zero=True) == 1_000_500.0


def test_copies_of_one_gpu_are_never_summed() -> None:
    gpu_level = CounterWindow(last=None, anchor=1000.0)
    pod_a = CounterWindow(last=1600.0, anchor=None, minimum=1100.0)
    pod_b = CounterWindow(last=1600.0, anchor=None, minimum=1300.0)
    merged = merge_copies([gpu_level, pod_a, pod_b])
    assert counter_increase(merged, hour_start=0, new_series_from_zero=False) == 600.0


def test_a_lone_sample_exactly_at_the_hour_start_belongs_to_the_hour_before() -> None:
    window = CounterWindow(last=50.0, anchor=50.0, minimum=50.0)
    assert counter_increase(window, hour_start=3600.0, new_series_from_zero=True) == 0.0
