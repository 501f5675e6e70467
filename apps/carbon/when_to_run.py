"""When to run a flexible job group's next run (docs/arithmetic.md, "When to run"). Pure: no database.

- A zone's forecast: an imported one (apps.carbon.forecast), or, labelled as such, the zone's own profile, the
  mean of its stored intensity by UTC hour of the week over the last N weeks (`week_profile`, `profile_forecast`).
- The group's typical run: its recent runs' length and hourly facility energy (`typical_run`).
- The best start within the deadline by the forecast, and what it saves against starting now, in kg and %
  (`best_start`).
- The check of a past hint: what it claimed against what the intensity that came would have given, and the best
  that could have been saved in hindsight, the measured shift saving of apps.carbon.arithmetic (`hint_check`).

Unknown is None, never 0: an hour the forecast does not know makes every start whose run covers it unknown, and
such a start is never chosen.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .arithmetic import shift_saving_kg

HOUR = timedelta(hours=1)
HOURS_PER_WEEK = 168
MINUS = "\u2212"  # the minus sign (U+2212) of the hint's text, not a hyphen
# A later start must beat the earlier one by more than float noise: with equal intensities the earliest wins.
_BETTER = 1e-9


def hour_of_week(hour: datetime) -> int:
    """The UTC hour of the week, 0 (Monday 00:00 UTC) to 167 (Sunday 23:00 UTC)."""
    moment = hour.astimezone(UTC)
    return moment.weekday() * 24 + moment.hour


def week_profile(history: Iterable[tuple[datetime, float]]) -> dict[int, float]:
    """The mean intensity (kg/kWh) of each UTC hour of the week over `history` (hour, kg/kWh). An hour of the week
    with no figure in the history is absent (unknown), not 0."""
    sums: dict[int, float] = defaultdict(float)
    counts: dict[int, int] = defaultdict(int)
    for hour, kg in history:
        slot = hour_of_week(hour)
        sums[slot] += kg
        counts[slot] += 1
    return {slot: sums[slot] / counts[slot] for slot in sums}


def profile_forecast(profile: Mapping[int, float], hours: Sequence[datetime]) -> list[float | None]:
    """The profile's value for each of `hours` (None where the profile does not know that hour of the week)."""
    return [profile.get(hour_of_week(h)) for h in hours]


def forecast_pick(
    imported: Sequence[float | None], profile: Sequence[float | None], *, length_h: int
) -> tuple[list[float | None], str]:
    """The forecast a hint uses and its kind: the imported one where it knows every hour of the run started now
    (the hours beyond its reach stay unknown: a start that needs them is not considered), else the profile."""
    if length_h > 0 and len(imported) >= length_h and all(v is not None for v in imported[:length_h]):
        return list(imported), "imported"
    return list(profile), "profile"


@dataclass(frozen=True)
class TypicalRun:
    """A group's typical run: its facility energy (kWh) in each hour from its start, and how many runs it is from."""

    kwh: tuple[float, ...]
    runs: int

    @property
    def length_h(self) -> int:
        return len(self.kwh)

    @property
    def facility_kwh(self) -> float:
        return sum(self.kwh)


def typical_run(runs: Sequence[Sequence[float]]) -> TypicalRun | None:
    """The typical run of `runs`, each its facility kWh per hour from its first hour: as long as the median run
    (the lower median: a length some run had), and in each of its hours the mean over the runs of their energy in
    that hour (0 for a run that had ended). None without runs, or where the typical run used no energy."""
    lengths = [len(r) for r in runs]
    if not runs or max(lengths) == 0:
        return None
    length = statistics.median_low(lengths)
    if length == 0:
        return None
    kwh = tuple(sum(r[k] for r in runs if k < len(r)) / len(runs) for k in range(length))
    if sum(kwh) <= 0:
        return None
    return TypicalRun(kwh=kwh, runs=len(runs))


def run_kg(kwh: Sequence[float], forecast: Sequence[float | None], *, offset_h: int) -> float | None:
    """kg CO2e of a run with hourly energy `kwh` started `offset_h` hours after the forecast's first hour; None
    where the forecast does not know one of its hours."""
    values = forecast[offset_h : offset_h + len(kwh)]
    if len(values) < len(kwh):
        return None
    total = 0.0
    for energy, intensity in zip(kwh, values, strict=True):
        if intensity is None:
            return None
        total += energy * intensity
    return total


@dataclass(frozen=True)
class BestStart:
    """The cleanest start within the deadline, `offset_h` hours after now, by a forecast."""

    offset_h: int
    now_kg: float  # the run started now
    best_kg: float  # the run started at the best start

    @property
    def saving_kg(self) -> float:
        return self.now_kg - self.best_kg

    @property
    def saving_pct(self) -> float | None:
        return 100.0 * self.saving_kg / self.now_kg if self.now_kg > 0 else None


def best_start(kwh: Sequence[float], forecast: Sequence[float | None], *, deadline_h: int) -> BestStart | None:
    """The start, 0 to deadline_h - length hours after the forecast's first hour (so that the run ends within the
    deadline, as the measured shift saving moves it), whose run the forecast gives the least kg; the earliest of
    equal ones. Starts whose hours the forecast does not all know are skipped. None where starting now is not known
    (nothing to compare with), or the run is longer than the deadline."""
    length = len(kwh)
    if length == 0 or length > deadline_h:
        return None
    now_kg = run_kg(kwh, forecast, offset_h=0)
    if now_kg is None:
        return None
    offset, best_kg = 0, now_kg
    for candidate in range(1, deadline_h - length + 1):
        kg = run_kg(kwh, forecast, offset_h=candidate)
        if kg is not None and kg < best_kg - _BETTER * max(1.0, abs(best_kg)):
            offset, best_kg = candidate, kg
    return BestStart(offset_h=offset, now_kg=now_kg, best_kg=best_kg)


def kg_text(kg: float) -> str:
    """A mass of CO2e as the hints show it: one decimal from 1 kg, two significant digits below."""
    return f"{kg:.1f}" if abs(kg) >= 1 else f"{kg:.2g}"


def hint_text(best: BestStart, *, now: datetime, deadline_h: int) -> str:
    """The hint in a line: "start after 02:00 UTC (Tue 4 Jun): -1.2 kg, -18 %", or "start now" where no later start
    within the deadline is cleaner by the forecast. Times in UTC, saying so."""
    if best.offset_h == 0 or best.saving_kg <= 0:
        return f"start now: by the forecast no start within {deadline_h} h is cleaner"
    start = (now + best.offset_h * HOUR).astimezone(UTC)
    pct = best.saving_pct
    saving = f"{MINUS}{kg_text(best.saving_kg)} kg" + (f", {MINUS}{pct:.0f} %" if pct is not None else "")
    return f"start after {start:%H:%M} UTC ({start:%a} {start.day} {start:%b}): {saving}"


@dataclass(frozen=True)
class HintCheck:
    """A past hint against the intensity that came. Every figure None until the hours it needs are known."""

    claimed_kg: float  # what the hint said starting at its start would save, by its forecast
    claimed_pct: float | None
    real_kg: float | None  # what starting there instead of at once saved, by the intensity that came
    real_pct: float | None
    best_real_kg: float | None  # the best start in hindsight: the measured shift saving (arithmetic.shift_saving_kg)
    forecast_error_pct: float | None  # sum |forecast - came| / sum came over the window's hours both know, in %
    hours_compared: int


def hint_check(
    *,
    kwh: Sequence[float],
    forecast: Sequence[float | None],
    actual: Sequence[float | None],
    offset_h: int,
    made_at: datetime,
    deadline_h: int,
) -> HintCheck:
    """Check a hint made at `made_at` (its typical run `kwh`, its forecast and its start `offset_h` hours later)
    against `actual`, the intensity that came in each hour from `made_at` (None: not known, yet)."""
    forecast_now = run_kg(kwh, forecast, offset_h=0) or 0.0
    forecast_then = run_kg(kwh, forecast, offset_h=offset_h) or 0.0
    claimed = forecast_now - forecast_then
    real_now = run_kg(kwh, actual, offset_h=0)
    real_then = run_kg(kwh, actual, offset_h=offset_h)
    real = real_now - real_then if real_now is not None and real_then is not None else None
    profile = [(made_at + k * HOUR, e) for k, e in enumerate(kwh)]
    window = list(actual[:deadline_h])
    whole = len(window) == deadline_h and all(v is not None for v in window)  # hindsight needs every hour
    known = {made_at + k * HOUR: v for k, v in enumerate(window) if v is not None}
    pairs = [(f, a) for f, a in zip(forecast, actual, strict=False) if f is not None and a is not None]
    came = sum(a for _, a in pairs)
    return HintCheck(
        claimed_kg=claimed,
        claimed_pct=100.0 * claimed / forecast_now if forecast_now > 0 else None,
        real_kg=real,
        real_pct=100.0 * real / real_now if real is not None and real_now else None,
        best_real_kg=shift_saving_kg(profile, known, deadline_h=deadline_h) if whole else None,
        forecast_error_pct=100.0 * sum(abs(f - a) for f, a in pairs) / came if came > 0 else None,
        hours_compared=len(pairs),
    )
