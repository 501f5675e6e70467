"""The frontier of a recurring workload (pure): for a job group whose runs count their work, the time and energy per
unit of work of its runs at each power limit it ran at, the Pareto front of those points, advice with its evidence,
a measurement plan where the group never varied its limit, and what the advice would have saved in a month
(docs/arithmetic.md, "The frontier of a recurring workload").

A run is one finished job of the group: its wall time (end - start), its GPU energy, the units its own counter
counted (or the work it reported), and its power limit: the mean of its GPU-hours' enforced limits weighted by its
time on them. A run whose limit changed inside it (a GPU-hour's least and most differ, or its GPU-hours differ) is
at no one limit: it is counted apart (`varied_runs`), as are runs whose limit nobody exported (`unknown_runs`).

    time per unit    = wall seconds / units          per run; a point: the median of its runs (quartiles beside)
    energy per unit  = GPU joules / units

The current point is the limit most runs ran at (the higher on a tie). The advice is the point with the least
energy per unit among those with at least `min_runs` runs whose time per unit is within `slack` of the current
point's (Zeus's MaxSlowdownConstraint, here over the runs the fleet already made); the current point itself where
none is better. A group that ran at one limit only gets a plan instead: Zeus's GlobalPowerLimitOptimizer profiles
each limit inside a training run, `PLAN_WARMUP_STEPS` steps to settle and `PLAN_PROFILE_STEPS` measured.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

SLACK_DEFAULT = 0.10  # 10 % more time per unit at most
MIN_RUNS_DEFAULT = 3  # runs a point needs before it is advised (or advised against)
VARIED_W = 1.0  # a run whose limits differ by more than this (W) was not at one limit
# Zeus's GlobalPowerLimitOptimizer (ml-energy/zeus, zeus/optimizer/power_limit.py) defaults: 10 warmup and 40
# profiled steps at each limit. Its stride is 25 W; the plan here steps 100 W, each step a whole set of runs apart.
PLAN_WARMUP_STEPS = 10
PLAN_PROFILE_STEPS = 40
PLAN_STEP_W = 100.0
PLAN_FLOOR_OF_TOP = 0.5  # the plan goes down to half the GPU's TDP (rounded up to the step)
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Run:
    """One finished run of a group: what the frontier reads of it."""

    job_id: int
    seconds: float  # wall time, end - start
    units: float  # work units counted (or reported)
    energy_j: float  # GPU energy
    cap_w: float | None  # its power limit, time-weighted; None: not known
    varied: bool = False  # its limit changed inside it
    gpus: int = 1
    ended: datetime | None = None  # when it ended (the month's saving counts the runs that ended in it)

    @property
    def s_per_unit(self) -> float:
        return self.seconds / self.units

    @property
    def j_per_unit(self) -> float:
        return self.energy_j / self.units


@dataclass(frozen=True)
class Spread:
    """A median with its quartiles (both the value itself for one run)."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        ordered = sorted(values)
        if len(ordered) == 1:
            return cls(ordered[0], ordered[0], ordered[0])
        q1, q2, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        return cls(q2, q1, q3)


@dataclass(frozen=True)
class Point:
    """The runs of a group at one power limit."""

    cap_w: float
    runs: int
    s_per_unit: Spread
    j_per_unit: Spread
    on_front: bool = False


@dataclass(frozen=True)
class Advice:
    """The chosen point against the current one, with its evidence."""

    current: Point
    chosen: Point
    energy_change_pct: float  # (chosen - current) / current x 100: negative is less energy
    time_change_pct: float
    text: str

    @property
    def changes(self) -> bool:
        return self.chosen.cap_w != self.current.cap_w


@dataclass(frozen=True)
class Plan:
    """How to measure a group that ran at one limit: which limits, how many steps each, what the trial covers."""

    caps_w: list[float]
    measured_w: float  # the limit its runs already ran at
    warmup_steps: int
    profile_steps: int
    trial_units: float  # the steps of the limits not measured yet
    trial_s: float  # at the current pace
    trial_j: float  # at the current energy per unit
    text: str


@dataclass
class Frontier:
    """A group's frontier over its finished runs."""

    unit: str
    slack: float
    min_runs: int
    points: list[Point] = field(default_factory=list)  # by limit, highest first
    current: Point | None = None
    advice: Advice | None = None
    plan: Plan | None = None
    varied_runs: int = 0
    unknown_runs: int = 0
    text: str = ""  # the advice, the plan, or why there is neither

    @property
    def front(self) -> list[Point]:
        return [p for p in self.points if p.on_front]


def percent_text(value: float) -> str:
    return f"{abs(value):.0f} %"


def watts_text(value: float) -> str:
    return f"{value:,.0f} W"


def pareto_front(points: Iterable[Point]) -> set[float]:
    """The limits of the points no other point beats on both time and energy per unit (medians) and ties on
    neither: lower is better on both."""
    pts = list(points)
    front = set()
    for p in pts:
        t, e = p.s_per_unit.median, p.j_per_unit.median
        dominated = any(
            q is not p
            and q.s_per_unit.median <= t
            and q.j_per_unit.median <= e
            and (q.s_per_unit.median < t or q.j_per_unit.median < e)
            for q in pts
        )
        if not dominated:
            front.add(p.cap_w)
    return front


def _points(runs: Sequence[Run]) -> list[Point]:
    by_cap: dict[float, list[Run]] = defaultdict(list)
    for run in runs:
        assert run.cap_w is not None
        by_cap[float(round(run.cap_w))].append(run)
    points = [
        Point(
            cap_w=cap,
            runs=len(group),
            s_per_unit=Spread.of([r.s_per_unit for r in group]),
            j_per_unit=Spread.of([r.j_per_unit for r in group]),
        )
        for cap, group in by_cap.items()
    ]
    front = pareto_front(points)
    return sorted(
        (Point(p.cap_w, p.runs, p.s_per_unit, p.j_per_unit, on_front=p.cap_w in front) for p in points),
        key=lambda p: -p.cap_w,
    )


def usable(run: Run) -> bool:
    """A run the frontier places: finished with work, time and energy, at one known limit."""
    return run.units > 0 and run.seconds > 0 and run.energy_j > 0 and run.cap_w is not None and not run.varied


def advise(points: Sequence[Point], current: Point, *, slack: float, min_runs: int, unit: str) -> Advice | None:
    """The point with the least energy per unit among those with `min_runs` runs or more whose time per unit is at
    most (1 + slack) x the current point's; None where the current point has fewer runs than that."""
    if current.runs < min_runs:
        return None
    limit_s = current.s_per_unit.median * (1.0 + slack)
    candidates = [p for p in points if p.runs >= min_runs and p.s_per_unit.median <= limit_s]
    chosen = min(candidates, key=lambda p: (p.j_per_unit.median, -p.cap_w))
    energy = (chosen.j_per_unit.median / current.j_per_unit.median - 1.0) * 100.0
    time = (chosen.s_per_unit.median / current.s_per_unit.median - 1.0) * 100.0
    if chosen is current:
        text = (
            f"stay at {watts_text(current.cap_w)}: no limit with {min_runs} runs or more used less energy per {unit} "
            f"within {percent_text(slack * 100)} more time ({current.runs} runs at {watts_text(current.cap_w)})"
        )
    else:
        more_or_less = "less" if energy <= 0 else "more"
        longer = f"took {percent_text(time)} longer" if time > 0 else f"took {percent_text(time)} less time"
        text = (
            f"at {watts_text(chosen.cap_w)} instead of {watts_text(current.cap_w)} this group's runs used "
            f"{percent_text(energy)} {more_or_less} energy per {unit} and {longer} "
            f"({chosen.runs} runs at {watts_text(chosen.cap_w)}, {current.runs} at {watts_text(current.cap_w)})"
        )
    return Advice(current=current, chosen=chosen, energy_change_pct=energy, time_change_pct=time, text=text)


def plan_caps(*, top_w: float, step_w: float = PLAN_STEP_W) -> list[float]:
    """The limits to try: from the top (the GPU's TDP) down in steps of `step_w` to half of it, rounded up."""
    floor = math.ceil(top_w * PLAN_FLOOR_OF_TOP / step_w) * step_w
    caps, cap = [], top_w
    while cap >= floor - 1e-9:
        caps.append(cap)
        cap -= step_w
    return caps


def measurement_plan(current: Point, *, top_w: float | None, unit: str, step_w: float = PLAN_STEP_W) -> Plan:
    """Zeus's manner: each limit from the top down, warmup then profiled steps, inside the group's next run. The
    trial's figures are the steps of the limits not measured yet, at the current pace and energy per unit (lower
    limits draw less and run slower; the steps are training steps the run makes anyway)."""
    caps = plan_caps(top_w=top_w or current.cap_w, step_w=step_w)
    steps = PLAN_WARMUP_STEPS + PLAN_PROFILE_STEPS
    new = [c for c in caps if abs(c - current.cap_w) > VARIED_W]
    units = float(steps * len(new))
    trial_s = units * current.s_per_unit.median
    trial_j = units * current.j_per_unit.median
    text = (
        f"every run so far at {watts_text(current.cap_w)}: try {', '.join(watts_text(c) for c in caps)}, "
        f"{PLAN_WARMUP_STEPS} {unit}s to settle and {PLAN_PROFILE_STEPS} measured at each, in the group's next run; "
        f"the {units:,.0f} {unit}s at the limits not tried yet take about {trial_s / 60:,.1f} min and "
        f"{trial_j / J_PER_KWH:,.2f} kWh of GPU energy at the current pace"
    )
    return Plan(
        caps_w=caps, measured_w=current.cap_w, warmup_steps=PLAN_WARMUP_STEPS, profile_steps=PLAN_PROFILE_STEPS,
        trial_units=units, trial_s=trial_s, trial_j=trial_j, text=text,
    )  # fmt: skip


def frontier(
    runs: Iterable[Run],
    *,
    unit: str,
    slack: float = SLACK_DEFAULT,
    min_runs: int = MIN_RUNS_DEFAULT,
    top_w: float | None = None,
) -> Frontier:
    """A group's points, front, current point and advice (or plan), from its finished runs counted in `unit`."""
    if slack < 0:
        raise ValueError("slack: 0 or more")
    if min_runs < 1:
        raise ValueError("min_runs: 1 or more")
    runs = list(runs)
    out = Frontier(unit=unit, slack=slack, min_runs=min_runs)
    out.varied_runs = sum(1 for r in runs if r.varied)
    out.unknown_runs = sum(1 for r in runs if r.cap_w is None and not r.varied)
    placed = [r for r in runs if usable(r)]
    if not placed:
        out.text = "no finished run with counted work at one known power limit"
        return out
    out.points = _points(placed)
    out.current = max(out.points, key=lambda p: (p.runs, p.cap_w))
    if len(out.points) == 1:
        out.plan = measurement_plan(out.current, top_w=top_w, unit=unit)
        out.text = out.plan.text
        return out
    out.advice = advise(out.points, out.current, slack=slack, min_runs=min_runs, unit=unit)
    if out.advice is None:
        out.text = (
            f"not yet: {out.current.runs} run{'s' if out.current.runs != 1 else ''} at the most used limit, "
            f"{watts_text(out.current.cap_w)}; advice needs {min_runs}"
        )
    else:
        out.text = out.advice.text
    return out


@dataclass(frozen=True)
class Saving:
    """What a group's runs of a period would have saved at its chosen point: GPU energy, and the runs and units
    counted (runs at the chosen limit, or at no one known limit, save nothing and are not counted)."""

    energy_j: float
    runs: int
    units: float
    extra_s: float  # the longer wall time it costs, summed over the runs (negative: shorter)
    extra_gpu_h: float  # the same in GPU-hours held


def saving(result: Frontier, runs: Iterable[Run]) -> Saving:
    """Σ over the period's placed runs not at the chosen limit of units x (their point's energy per unit - the
    chosen one's), and of units x (the chosen time per unit - their point's), the latter also x the run's GPUs in
    GPU-hours: zero where there is no advice."""
    if result.advice is None or not result.advice.changes:
        return Saving(0.0, 0, 0.0, 0.0, 0.0)
    chosen = result.advice.chosen
    points = {p.cap_w: p for p in result.points}
    energy = extra = extra_gpu_h = units = 0.0
    count = 0
    for run in runs:
        if not usable(run):
            continue
        point = points.get(float(round(run.cap_w or 0.0)))
        if point is None or point.cap_w == chosen.cap_w:
            continue
        energy += run.units * (point.j_per_unit.median - chosen.j_per_unit.median)
        longer = run.units * (chosen.s_per_unit.median - point.s_per_unit.median)
        extra += longer
        extra_gpu_h += longer * run.gpus / 3600.0
        units += run.units
        count += 1
    return Saving(energy_j=energy, runs=count, units=units, extra_s=extra, extra_gpu_h=extra_gpu_h)
