"""The power model of the `sm_mem` split: board power P = p0 + a x sm + b x mem, per GPU model.

`sm` and `mem` are a job's summed per-process SM and memory utilisation in percent (NVML's per-process
samples, `smUtil` and `memUtil`). The agent calibrates the model itself, online, from the samples where
exactly one job was on a GPU and the driver gave its utilisation: then the whole board power is that
job's, so each such sample is one (sm, mem, P) point. Every GPU of a model shares the model (keyed by
the driver's name, e.g. "NVIDIA H200").

Nothing is stored per sample: the state is the count, the means and the co-moments (sums of products
of deviations from the means) of (sm, mem, P), updated by Welford's method (exact, and without the
cancellation that raw sums of squares suffer at 700 W over millions of samples). Pure functions over
frozen dataclasses, so they can be tested exhaustively; the file functions at the end are the only I/O.

The fit is least squares with a light ridge in standardised units (RIDGE x each term's own variance
added to the diagonal; scale-free). sm and mem are correlated in real workloads (a streaming copy is high
in both, a matmul high in sm and moderate in mem), and where they move together the data cannot tell a
from b: plain least squares then trades a huge a against a huge negative b. The ridge damps exactly that
direction and barely touches a well-determined fit (by 1 / (1 + RIDGE), 1 %). The model is used only once
it is *calibrated* (thresholds below), and it says why not otherwise.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

# Calibration thresholds (docs/arithmetic.md, "The sm_mem split"):
MIN_SAMPLES = 60  # single-job samples: a minute of one job alone on a GPU of the model, at 1 Hz
MIN_SPREAD_PCT = 5.0  # standard deviation of sm and of mem over the samples, percentage points
MAX_CORRELATION = 0.95  # |corr(sm, mem)| above this: a and b cannot be told apart (variance inflated 10x)
RIDGE = 0.01  # ridge penalty in units of each term's variance
# A job's own power (JobSolo): from its samples alone on the GPU with the SMs busy at least this much, once
# it has this many. Below it a job's power is mostly the GPU kept awake between its kernels (a duty cycle,
# a notebook), which another job fills when they share: per point of SM time it would be overcharged.
SOLO_MIN_SM_PCT = 50.0
SOLO_MIN_SAMPLES = 3

FILE_FORMAT = "fleetwatt-agent-power-model"
FILE_VERSION = 1


@dataclass(frozen=True)
class PowerStats:
    """Running statistics of the calibration samples of one GPU model."""

    n: int = 0
    mean_sm: float = 0.0
    mean_mem: float = 0.0
    mean_power: float = 0.0
    c_ss: float = 0.0  # sum of (sm - mean_sm)^2
    c_sm: float = 0.0  # sum of (sm - mean_sm) (mem - mean_mem)
    c_mm: float = 0.0  # sum of (mem - mean_mem)^2
    c_sp: float = 0.0  # sum of (sm - mean_sm) (P - mean_power)
    c_mp: float = 0.0  # sum of (mem - mean_mem) (P - mean_power)
    c_pp: float = 0.0  # sum of (P - mean_power)^2


@dataclass(frozen=True)
class PowerFit:
    """The model fitted so far. `calibrated`: enough evidence to split by it; else `reason` says what is
    missing ("samples", "sm_spread", "mem_spread", "correlated", "no_rise")."""

    p0_w: float  # W: the board power of a present job at 0 % sm and 0 % mem (static power)
    sm_w_per_pct: float  # a, W per percentage point of SM utilisation
    mem_w_per_pct: float  # b, W per percentage point of memory utilisation
    rms_w: float  # root mean square residual of the fit over its samples, W
    samples: int
    calibrated: bool
    reason: str = ""

    def dynamic_w(self, sm_pct: float, mem_pct: float) -> float:
        """A job's activity-driven power above p0, at least 0 (a negative term cannot give energy back)."""
        return max(self.sm_w_per_pct * sm_pct + self.mem_w_per_pct * mem_pct, 0.0)


@dataclass(frozen=True)
class JobSolo:
    """One job's own calibration samples on one GPU (it alone there): its power per point of SM time.

    In a shared sample the driver apportions the device's memory activity by the processes' SM samples
    (docs/accuracy.md, "What limits a split from NVML"), so the GPU model's a x sm + b x mem is then
    proportional to SM time whatever the job does. The seconds a job had the GPU to itself are the only
    ones where its power is its own: (sum of P - n p0) / sum of sm over those with sm >= SOLO_MIN_SM_PCT
    is what it draws above p0 per point of SM time while it computes, a tensor-core job more than a
    memory-bound one."""

    n: float = 0  # the sums' weight: samples, weighted where a kernel takes its part of one (solo_add_gpu_time)
    power_w_sum: float = 0.0
    sm_pct_sum: float = 0.0
    samples: int = 0  # samples taken, whatever their weight: "enough of it alone" counts these

    def dynamic_w_per_sm_pct(self, p0_w: float) -> float | None:
        """W above p0 per SM percentage point, or None until there is enough of the job alone."""
        if self.samples < SOLO_MIN_SAMPLES or self.sm_pct_sum <= 0.0:
            return None
        return max(self.power_w_sum - self.n * p0_w, 0.0) / self.sm_pct_sum


def solo_add(solo: JobSolo, *, sm_pct: float, power_w: float) -> JobSolo:
    """One more sample of the job alone; one with the SMs less busy than SOLO_MIN_SM_PCT is not counted."""
    if sm_pct < SOLO_MIN_SM_PCT:
        return solo
    return JobSolo(solo.n + 1, solo.power_w_sum + power_w, solo.sm_pct_sum + sm_pct, solo.samples + 1)


def solo_add_gpu_time(solo: JobSolo, *, gpu_time_pct: float, power_w: float, weight: float = 1.0) -> JobSolo:
    """One more sample of a job alone with its exact GPU time (the `gpu_time` split), whatever its
    busy share: exact time makes (sum of P - n p0) / sum of GPU time the job's energy above p0 per point
    of its kernels' time, the power that keeps the GPU awake through its pauses included, which is what
    the job costs alone (docs/accuracy.md's truth).

    `weight` < 1: a kernel's part of such a sample (its share of the job's kernel time there), so that a
    kernel learns the figure of the jobs that ran it alone: one that a job runs alone learns it exactly,
    a mix is spread over its kernels by time. The weight scales a sample's parts, not its count: a kernel
    that ran in three samples alone has been seen in three, whatever its part of each (a job that runs ten
    kernels teaches each of them in every sample, none of them a whole sample's weight)."""
    return JobSolo(
        solo.n + weight,
        solo.power_w_sum + weight * power_w,
        solo.sm_pct_sum + weight * max(gpu_time_pct, 0.0),
        solo.samples + 1,
    )


def stats_add(stats: PowerStats, *, sm_pct: float, mem_pct: float, power_w: float) -> PowerStats:
    """One more calibration sample (Welford's update of the means and co-moments)."""
    n = stats.n + 1
    ds, dm, dp = sm_pct - stats.mean_sm, mem_pct - stats.mean_mem, power_w - stats.mean_power
    k = stats.n / n  # d_i x (x_j - new mean_j) = d_i x d_j x (n - 1) / n
    return PowerStats(
        n=n,
        mean_sm=stats.mean_sm + ds / n,
        mean_mem=stats.mean_mem + dm / n,
        mean_power=stats.mean_power + dp / n,
        c_ss=stats.c_ss + ds * ds * k,
        c_sm=stats.c_sm + ds * dm * k,
        c_mm=stats.c_mm + dm * dm * k,
        c_sp=stats.c_sp + ds * dp * k,
        c_mp=stats.c_mp + dm * dp * k,
        c_pp=stats.c_pp + dp * dp * k,
    )


def power_fit(stats: PowerStats) -> PowerFit | None:
    """The ridge fit of P = p0 + a sm + b mem, or None before there are 3 samples.

    A term without variance (always the same value) gets coefficient 0 and its mean goes into p0."""
    n = stats.n
    if n < 3:
        return None
    tiny = 1e-9 * n  # variance below 1e-9 (percent^2): no variance
    has_s, has_m = stats.c_ss > tiny, stats.c_mm > tiny
    a11, a22 = stats.c_ss * (1.0 + RIDGE), stats.c_mm * (1.0 + RIDGE)
    if has_s and has_m:
        det = a11 * a22 - stats.c_sm * stats.c_sm  # > 0: |c_sm| <= sqrt(c_ss c_mm) < (1 + RIDGE) sqrt(...)
        a = (a22 * stats.c_sp - stats.c_sm * stats.c_mp) / det
        b = (a11 * stats.c_mp - stats.c_sm * stats.c_sp) / det
    elif has_s:
        a, b = stats.c_sp / a11, 0.0
    elif has_m:
        a, b = 0.0, stats.c_mp / a22
    else:
        a, b = 0.0, 0.0
    p0 = stats.mean_power - a * stats.mean_sm - b * stats.mean_mem
    # residual sum of squares around the fit (the intercept makes the residuals' mean 0)
    sse = stats.c_pp - 2.0 * (a * stats.c_sp + b * stats.c_mp) + a * a * stats.c_ss + 2.0 * a * b * stats.c_sm
    sse += b * b * stats.c_mm
    rms = math.sqrt(max(sse, 0.0) / n)
    reason = _not_calibrated(stats, a, b, has_s and has_m)
    return PowerFit(p0, a, b, rms, n, calibrated=not reason, reason=reason)


def _not_calibrated(stats: PowerStats, a: float, b: float, both_vary: bool) -> str:
    n = stats.n
    if n < MIN_SAMPLES:
        return "samples"
    if math.sqrt(stats.c_ss / n) < MIN_SPREAD_PCT:
        return "sm_spread"
    if math.sqrt(stats.c_mm / n) < MIN_SPREAD_PCT:
        return "mem_spread"
    if not both_vary or abs(stats.c_sm) > MAX_CORRELATION * math.sqrt(stats.c_ss * stats.c_mm):
        return "correlated"
    if max(a, b) <= 0.0:
        return "no_rise"  # power does not rise with either: nothing to split by
    return ""


def calibrated_fit(stats: PowerStats | None) -> PowerFit | None:
    """The fit where it is calibrated, else None (what the split takes)."""
    fit = power_fit(stats) if stats is not None else None
    return fit if fit is not None and fit.calibrated else None


# -- the state as JSON, and its file (--power-model-file) ----------------------------------------------
def stats_to_json(stats: PowerStats) -> dict[str, float | int]:
    return asdict(stats)


def stats_from_json(data: Mapping[str, Any]) -> PowerStats:
    """The inverse of `stats_to_json`; ValueError on anything that is not a valid state."""
    values: dict[str, Any] = {}
    for f in fields(PowerStats):
        value = data.get(f.name)
        if f.name == "n":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"power model state: n must be a non-negative integer, got {value!r}")
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"power model state: {f.name} must be a finite number, got {value!r}")
        values[f.name] = value if f.name == "n" else float(value)
    stats = PowerStats(**values)
    if min(stats.c_ss, stats.c_mm, stats.c_pp) < 0.0:
        raise ValueError("power model state: a variance is negative")
    if stats.n == 0 and stats != PowerStats():
        raise ValueError("power model state: statistics without samples")
    return stats


def state_to_json(models: Mapping[str, PowerStats]) -> dict[str, Any]:
    return {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        "models": {name: stats_to_json(stats) for name, stats in sorted(models.items())},
    }


def state_from_json(doc: Any) -> dict[str, PowerStats]:
    if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
        raise ValueError(f"not a {FILE_FORMAT} document")
    if doc.get("version") != FILE_VERSION:
        raise ValueError(f"unsupported {FILE_FORMAT} version {doc.get('version')!r}")
    models = doc.get("models")
    if not isinstance(models, dict):
        raise ValueError("power model state: no models")
    out: dict[str, PowerStats] = {}
    for name, data in models.items():
        if not isinstance(data, dict):
            raise ValueError(f"power model state: {name!r} is not an object")
        out[str(name)] = stats_from_json(data)
    return out


def state_load(path: str | Path) -> dict[str, PowerStats]:
    """The saved state, or {} when the file does not exist yet. OSError, ValueError otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    return state_from_json(doc)


def state_save(path: str | Path, models: Mapping[str, PowerStats]) -> None:
    """Write the state atomically: a temporary file in the same directory, flushed, then renamed over the
    old one, so a crash leaves either the old state or the new one, never half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state_to_json(models), f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
