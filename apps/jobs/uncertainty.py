"""How far to trust a job's share of a shared GPU (pure): an interval around each job-GPU-hour's energy, from
the split method's error measured on the H200 and H100 (tests/agent/fixtures/accuracy), the job's share and
the samples it rests on (docs/accuracy.md, "Error bars"; docs/arithmetic.md, "Error bars").

The errors of a shared GPU's split are mostly bias, not noise (what a share of time or activity says of a
share of power; the measured runs of 6 to 55 s err as much as the longer ones), so a method's band is a
width in points of the GPU's energy, SHARE_HALF_WIDTH: what held, on runs the width was not fitted to, at
least 90 % of the measurements (`calibrate`). Beside it, the sampling of the hour itself:
z x sqrt(s (1 - s) / n) for a share s from n one-second samples, added in quadrature. A share is never below
0 nor above the GPU's whole: the interval is clipped to [0, the energy of the GPU's jobs]."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .methods import Method

# The band's coverage goal, and the quantile of the measured errors the width is taken at: the 95th of the
# errors gave 94.6 % coverage on held-out runs (sm_time, sm_mem), the 90th 86-88 % (docs/accuracy.md).
COVERAGE_GOAL = 0.90
WIDTH_QUANTILE = 0.95
Z_90 = 1.645  # the normal quantile of a two-sided 90 % interval, for the hour's sampling term

# Half-width of a job's share, in parts of the GPU's energy, per split method: calibrate's output on the H200
# and H100 fixtures, as the agent now replays them (tests/jobs/test_uncertainty.py checks that it still is).
# gpu_time's from nine runs, five of them recorded by the agent as it is now (held out: 93.0 %).
SHARE_HALF_WIDTH: dict[str, float] = {
    Method.SM_TIME: 0.1393,
    Method.SM_MEM: 0.1414,
    Method.GPU_TIME: 0.0538,
}
# One job on the GPU: all its energy, no band. Estimated: time nobody saw, flagged apart (its own line).
NO_BAND = frozenset({Method.WHOLE_GPU, Method.ESTIMATED})
# Methods never measured against the truth (engine busy time, memory held, equal shares): any share of the
# GPU's jobs' energy is possible, and the band says so.


@dataclass(frozen=True)
class ShareError:
    """One job of one measured mix: the run it was in, the method, the share given, and given - true."""

    run: str
    method: str
    share: float
    error: float


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of the values, the smallest value at or above that share of them (no interpolation)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Calibration:
    half_width: float  # from every run
    held_out_coverage: float | None  # each run's measurements against the width from the other runs
    held_out_mean_half_width: float | None
    measurements: int
    runs: int


def calibrate(errors: Iterable[ShareError], *, q: float = WIDTH_QUANTILE) -> dict[str, Calibration]:
    """Per method: the half-width (the q-quantile of |error| over every measurement) and how often a width fitted
    to the other runs held each run's errors (None with fewer than three runs: no honest hold-out)."""
    by_method: dict[str, list[ShareError]] = {}
    for e in errors:
        by_method.setdefault(e.method, []).append(e)
    out = {}
    for method, found in sorted(by_method.items()):
        runs = sorted({e.run for e in found})
        held, widths = 0, []
        if len(runs) >= 3:
            for run in runs:
                width = quantile([abs(e.error) for e in found if e.run != run], q)
                mine = [e for e in found if e.run == run]
                held += sum(abs(e.error) <= width for e in mine)
                widths += [width] * len(mine)
        out[method] = Calibration(
            half_width=quantile([abs(e.error) for e in found], q),
            held_out_coverage=held / len(found) if widths else None,
            held_out_mean_half_width=sum(widths) / len(widths) if widths else None,
            measurements=len(found),
            runs=len(runs),
        )
    return out


def share_half_width(method: str, share: float, samples: float) -> float | None:
    """The half-width of a share (parts of the GPU's energy): the method's, with the hour's sampling in
    quadrature; None for a method with no band; 1 (anything) for a method never measured."""
    if method in NO_BAND:
        return None
    bias = SHARE_HALF_WIDTH.get(method)
    if bias is None:
        return 1.0
    s = min(1.0, max(0.0, share))
    sampling = Z_90 * math.sqrt(s * (1.0 - s) / samples) if samples >= 1.0 else 1.0
    return math.hypot(bias, sampling)


def energy_band(*, energy_j: float, gpu_jobs_j: float, method: str, samples: float) -> tuple[float, float] | None:
    """The interval of one job-GPU-hour's energy by one method (J), clipped to [0, the GPU's jobs' energy];
    None where the method has none (whole GPU, estimated) or the GPU's jobs drew nothing."""
    if gpu_jobs_j <= 0.0:
        return None
    width = share_half_width(method, energy_j / gpu_jobs_j, samples)
    if width is None:
        return None
    return max(0.0, energy_j - width * gpu_jobs_j), min(gpu_jobs_j, energy_j + width * gpu_jobs_j)


def bands_sum(parts: Iterable[tuple[float, tuple[float, float] | None]]) -> tuple[float, float] | None:
    """A sum's interval from its parts' (energy, interval or None), as if their errors went the same way (a
    method's error is a bias that repeats hour after hour, so the parts' errors add up rather than cancel); a
    part without an interval counts as exact. None where no part has one."""
    low = high = 0.0
    banded = False
    for energy, band in parts:
        if band is None:
            low, high = low + energy, high + energy
        else:
            low, high, banded = low + band[0], high + band[1], True
    return (low, high) if banded else None


def share_errors(run: str, results: Mapping[str, Any]) -> list[ShareError]:
    """The measurements of one accuracy run (its results.json, agent/scripts/accuracy_analysis.py): each job of
    each mix and repetition, per split method replayed, its share and its error (parts of the GPU's energy)."""
    out = []
    for mix in results["mixes"].values():
        for rep in mix["reps"]:
            for method in results["methods"]:
                given = rep.get(method)
                if given:
                    out += [
                        ShareError(run, method, g / 100.0, (g - t) / 100.0)
                        for g, t in zip(given, rep["true"], strict=True)
                    ]
    return out


@dataclass(frozen=True)
class BandRow:
    """One job-GPU-hour's energy by one split method, with what its interval needs."""

    method: str
    energy_j: float
    gpu_jobs_j: float  # the energy of every job on that GPU in that hour
    samples: float  # the job's seconds sampled in that hour


def job_energy_band(energy_j: float, rows: Iterable[BandRow]) -> tuple[float, float] | None:
    """A job's interval (J): its rows on shared GPUs by their bands, the rest of its energy (one job on the GPU,
    estimated) as it is; None where no row has a band."""
    parts: list[tuple[float, tuple[float, float] | None]] = []
    banded_j = 0.0
    for r in rows:
        band = energy_band(energy_j=r.energy_j, gpu_jobs_j=r.gpu_jobs_j, method=r.method, samples=r.samples)
        if band is not None:
            parts.append((r.energy_j, band))
            banded_j += r.energy_j
    if not parts:
        return None
    return bands_sum([*parts, (max(0.0, energy_j - banded_j), None)])
