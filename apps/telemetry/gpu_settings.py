"""A GPU-hour's power limit and SM clock, from the agent's gauges and dcgm-exporter's (pure).

The agent exports NVML's enforced power limit (W) and the SM clock (Hz) per GPU (docs/metrics.md, "Power limits
and clocks"); dcgm-exporter the enforced or management limit (W) and the SM clock (MHz) where a site added those
fields to its counters. Per GPU and field, the agent's word is taken, else dcgm-exporter's, else nothing: an
older agent and an exporter without the fields leave the value unknown (None), never 0.

The answers hold, per series, the hour's mean, least and most limit and its mean clock. A GPU with several
series (dcgm-exporter's copies for each pod, a series that changed labels within the hour, two scrape jobs of
one agent) takes the least of the least, the most of the most, and the means weighted by each series' samples
where they are known (dcgm-exporter's framebuffer series count them), else equally.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import promql

# What a GPU's power limit and SM clock can be: outside these (0, NaN, a driver's "not supported" sentinel) the
# sample says nothing.
POWER_LIMIT_MAX_W = 10_000.0
SM_CLOCK_MAX_MHZ = 10_000.0

Tagged = tuple[str, Mapping[str, str], float]


@dataclass(frozen=True)
class GpuSettings:
    """One GPU-hour's power limit (W: mean over the hour's samples, least and most) and mean SM clock (MHz).
    None: not known (no source exported it)."""

    power_limit_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    sm_clock_mhz: float | None = None


UNKNOWN = GpuSettings()


@dataclass
class _Series:
    """The settings one series gave, with its weight (samples) for the means."""

    weight: float = 1.0
    values: dict[str, float] = field(default_factory=dict)


def _plausible(tag: str, value: float) -> bool:
    if not math.isfinite(value) or value <= 0.0:
        return False
    return value <= (SM_CLOCK_MAX_MHZ if tag == "sm_clock" else POWER_LIMIT_MAX_W)


def _combine(series: Iterable[_Series]) -> dict[str, float]:
    """Least of the least, most of the most, weighted means of the means."""
    out: dict[str, float] = {}
    items = list(series)
    for tag in promql.SETTINGS_TAGS:
        given = [(s.weight, s.values[tag]) for s in items if tag in s.values]
        if not given:
            continue
        if tag == "power_limit_min":
            out[tag] = min(v for _, v in given)
        elif tag == "power_limit_max":
            out[tag] = max(v for _, v in given)
        else:
            total = sum(w for w, _ in given)
            out[tag] = sum(w * v for w, v in given) / total if total > 0 else sum(v for _, v in given) / len(given)
    return out


def _by_gpu(
    answers: Iterable[Tagged], *, uuid_of: str | tuple[str, ...], weights: Mapping[tuple[tuple[str, str], ...], float]
) -> dict[str, dict[str, float]]:
    names = (uuid_of,) if isinstance(uuid_of, str) else uuid_of
    series: dict[str, dict[tuple[tuple[str, str], ...], _Series]] = defaultdict(dict)
    for tag, labels, value in answers:
        if tag not in promql.SETTINGS_TAGS or not _plausible(tag, value):
            continue
        uuid = next((labels[n] for n in names if labels.get(n)), "")
        if not uuid:
            continue
        key = tuple(sorted(labels.items()))
        one = series[uuid].setdefault(key, _Series(weight=weights.get(key, 1.0)))
        one.values[tag] = value
    return {uuid: _combine(by_key.values()) for uuid, by_key in series.items()}


def gpu_settings(*, job_gauges: Iterable[Tagged], dcgm_series: Iterable[Tagged]) -> dict[str, GpuSettings]:
    """Each GPU's settings in the hour, by UUID, from the tagged answers of HourQueries.job_gauges (the agent's,
    the clock in Hz) and HourQueries.dcgm_series (dcgm-exporter's, the clock in MHz)."""
    dcgm = list(dcgm_series)
    samples = {tuple(sorted(labels.items())): value for tag, labels, value in dcgm if tag == "present" and value > 0}
    # The agent's clock in Hz, brought to MHz before its plausibility is checked.
    agent = _by_gpu(
        [(t, lb, v / 1e6 if t == "sm_clock" else v) for t, lb, v in job_gauges if "job_key" not in lb],
        uuid_of="uuid",
        weights={},
    )
    from_dcgm = _by_gpu(dcgm, uuid_of=("UUID", "uuid"), weights=samples)
    out: dict[str, GpuSettings] = {}
    for uuid in set(agent) | set(from_dcgm):
        mine, theirs = agent.get(uuid, {}), from_dcgm.get(uuid, {})
        values: dict[str, float] = {}
        # The limit's three figures come from one source, so that its least and most bracket its mean.
        limit_from = mine if "power_limit" in mine else theirs
        for tag in ("power_limit", "power_limit_min", "power_limit_max"):
            if tag in limit_from:
                values[tag] = limit_from[tag]
        clock_from = mine if "sm_clock" in mine else theirs
        if "sm_clock" in clock_from:
            values["sm_clock"] = clock_from["sm_clock"]
        out[uuid] = GpuSettings(
            power_limit_w=values.get("power_limit"),
            power_limit_min_w=values.get("power_limit_min"),
            power_limit_max_w=values.get("power_limit_max"),
            sm_clock_mhz=values.get("sm_clock"),
        )
    return out
