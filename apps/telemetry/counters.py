"""Exact counter arithmetic over one closed hour (pure; DESIGN section 4, "Counter arithmetic").

A counter's rise over the hour (T0, T1] is the sum of its scrape-to-scrape rises over the samples in
that hour, starting from the last sample at or before T0 (the anchor). A sample lower than the one
before it is a reset (agent restart, driver reload): the counter restarted from 0, so the whole new
value is the rise. Prometheus's `increase()` is not used: it extrapolates at series edges.

The ingest fetches four cheap aggregates per series (last value, anchor, minimum, resets) and needs the
raw samples only for a series that reset, which is rare.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class CounterWindow:
    """What the ingest knows about one counter series over one hour."""

    last: float | None = None  # last sample in the hour (None: no sample in the hour)
    anchor: float | None = None  # last sample at or before the hour's start, within the look-back
    minimum: float | None = None  # smallest sample in the hour
    resets: float = 0.0  # number of decreases between samples of the hour
    raw: list[tuple[float, float]] | None = field(default=None)  # (unix time, value), when fetched

    def needs_raw_samples(self) -> bool:
        """A reset inside the hour, or between the anchor and the hour's first sample."""
        if self.last is None:
            return False
        if self.resets > 0:
            return True
        return self.anchor is not None and self.minimum is not None and self.minimum < self.anchor


def sum_of_rises(samples: Iterable[tuple[float, float]], *, anchor: float | None, new_series_from_zero: bool) -> float:
    """Sum of the rises of a counter over time-ordered samples that follow `anchor`.

    `new_series_from_zero`: a series with no anchor started at 0 within the hour (the agent's
    counters), so its first value is a rise; dcgm-exporter's energy counts since the driver loaded,
    so its first value is only the starting point.
    """
    total = 0.0
    previous = anchor
    for _, value in samples:
        if previous is None:
            rise = value if new_series_from_zero else 0.0
        elif value >= previous:
            rise = value - previous
        else:
            rise = value  # reset: the counter restarted from 0
        total += rise
        previous = value
    return total


def counter_increase(window: CounterWindow, *, hour_start: float, new_series_from_zero: bool) -> float:
    """The counter's exact rise over the hour (hour_start, hour_start + 3600]."""
    if window.raw is not None:
        in_hour = [(t, v) for t, v in window.raw if t > hour_start]
        return sum_of_rises(in_hour, anchor=window.anchor, new_series_from_zero=new_series_from_zero)
    if window.last is None:
        return 0.0
    if window.anchor is not None:
        return max(0.0, window.last - window.anchor)
    if new_series_from_zero:
        return window.last
    # A counter that does not start at 0 (dcgm) and has no earlier sample: count from its first value,
    # which, with no reset in the hour, is its minimum.
    return window.last - (window.minimum if window.minimum is not None else window.last)


def merge_copies(windows: Sequence[CounterWindow]) -> CounterWindow:
    """One GPU's counter read as one series from its copies (dcgm-exporter repeats the GPU's energy
    on every pod's and MIG instance's series): the highest value at each point, never a sum."""
    present = [w for w in windows if w.last is not None or w.anchor is not None]
    if not present:
        return CounterWindow()
    lasts = [w.last for w in present if w.last is not None]
    anchors = [w.anchor for w in present if w.anchor is not None]
    minimums = [w.minimum for w in present if w.minimum is not None]
    merged = CounterWindow(
        last=max(lasts) if lasts else None,
        anchor=max(anchors) if anchors else None,
        minimum=min(minimums) if minimums else None,
        resets=max(w.resets for w in present),
    )
    raws = [w.raw for w in present if w.raw is not None]
    if raws:
        by_time: dict[float, float] = {}
        for raw in raws:
            for t, v in raw:
                by_time[t] = max(v, by_time.get(t, v))
        merged.raw = sorted(by_time.items())
    return merged
