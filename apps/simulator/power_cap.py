"""How a training job answers a power limit in the simulated fleet: its clock, its pace and its draw under a cap
(docs/arithmetic.md, "The frontier of a recurring workload", "The simulator's cap curve").

A GPU holds its draw under the limit by lowering its SM clock. The model has two parts, each from a published
relation, and one parameter a scenario may set:

- **Power against the clock.** A CMOS chip's dynamic power is activity x capacitance x voltage^2 x frequency
  (Hennessy & Patterson, *Computer Architecture: A Quantitative Approach*, 6th ed., section 1.5, "Trends in Power
  and Energy in Integrated Circuits"); over the range where DVFS lowers the voltage with the clock, that is the cube
  of the clock. With the GPU's idle draw I as the part that does not scale, a job that draws D at full clock draws
  P(f) = I + (D - I) x f^3 at the clock ratio f. Under a limit L below D the GPU settles where P(f) = L:
  f = ((L - I) / (D - I))^(1/3), and draws L. A limit at or above D changes nothing.
- **Pace against the clock.** A step's time is the part the SM clock speeds up and the part it does not (memory,
  communication, input): t(f) = m + (1 - m) / f, in units of its time at full clock, so its pace is 1 / t(f). m is
  the job's `work.memory_bound` (0 by default: a compute-bound training step).

The energy per unit of work relative to the uncapped run is then (L / D) x t(f). As a check against a published
measurement, not a fit: McDonald et al., "Great Power, Great Responsibility: Recommendations for Reducing Energy for
Training Language Models" (Findings of NAACL 2022, arXiv:2205.09646), report 13.7 % less energy on average for
language-model training under a 150 W limit on 250 W GPUs (0.6 of the default). This model, for a compute-bound job
drawing 0.76 of the default uncapped with an idle draw of 75 W of 700 W, gives f = 0.911 at 0.6: 9.8 % longer and
13.3 % less energy per unit (`tests/simulator/test_power_cap.py`).

Pure: no Django, only arithmetic on floats and numpy arrays.
"""

from __future__ import annotations

import numpy as np


def clock_ratio(*, draw_w: float, limit_w: float, idle_w: float) -> float:
    """The SM clock, as a share of its full clock, at which a job that draws `draw_w` at full clock keeps under
    `limit_w`: 1 where the limit is at or above its draw."""
    if limit_w >= draw_w or draw_w <= idle_w:
        return 1.0
    return float(max(limit_w - idle_w, 0.0) / (draw_w - idle_w)) ** (1.0 / 3.0)


def capped_draw_w(*, draw_w: float, limit_w: float) -> float:
    """What the job draws under the limit: the limit where it would draw more."""
    return min(draw_w, limit_w)


def pace(*, draw_w: float, limit_w: float, idle_w: float, memory_bound: float = 0.0) -> float:
    """The job's work a second under the limit, as a share of its work a second uncapped: 1 / (m + (1 - m) / f)."""
    f = clock_ratio(draw_w=draw_w, limit_w=limit_w, idle_w=idle_w)
    if f <= 0.0:
        return 0.0
    return 1.0 / (memory_bound + (1.0 - memory_bound) / f)


def energy_per_unit_ratio(*, draw_w: float, limit_w: float, idle_w: float, memory_bound: float = 0.0) -> float:
    """Energy per unit of work under the limit over that uncapped: (draw under the limit / draw) / pace."""
    speed = pace(draw_w=draw_w, limit_w=limit_w, idle_w=idle_w, memory_bound=memory_bound)
    return capped_draw_w(draw_w=draw_w, limit_w=limit_w) / draw_w / speed if speed > 0 else float("inf")


def paced_integral(since_start: np.ndarray, *, segments: list[tuple[float, float]], end_s: float) -> np.ndarray:
    """The integral of a piecewise-constant rate from 0 to each time (seconds since the job's start), flat after
    `end_s`: `segments` are (from, rate), the first from 0, each rate holding until the next one's start."""
    x = np.clip(since_start, 0.0, end_s)
    total = np.zeros(len(x))
    for i, (t, rate) in enumerate(segments):
        upto = segments[i + 1][0] if i + 1 < len(segments) else np.inf
        total += rate * np.clip(np.minimum(x, upto) - t, 0.0, None)
    return total
