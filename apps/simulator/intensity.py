"""Synthetic hourly grid intensity for a zone: a solar dip around local noon (deeper in summer), an evening
peak, a weekly wiggle (less demand at weekends), a few days of weather, and hourly noise. And a synthetic
forecast of it: the same curve off by an error that grows with the lead time, so that a hint made from it can be
checked against the intensity that came (docs/arithmetic.md, "When to run").

Pure and deterministic: an hour's value depends only on the zone, the hour, the mean and the seed, never
on the window asked for, so overlapping windows agree and re-importing them changes nothing.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
_EPOCH_MONDAY = datetime(1970, 1, 5, tzinfo=UTC)  # the first Monday after the Unix epoch


@dataclass(frozen=True)
class ZoneProfile:
    mean_kg_per_kwh: float  # a plausible annual mean, location-based
    solar_noon_utc: float  # hour of the day (UTC) when the sun is highest
    solar_depth: float  # how far the midday solar dip goes below the mean, at midsummer


# Rough, public-knowledge orders of magnitude; enough for a demo, not for accounting.
ZONES: dict[str, ZoneProfile] = {
    "DE": ZoneProfile(0.38, 11.4, 0.35),
    "FR": ZoneProfile(0.06, 11.9, 0.15),
    "GB": ZoneProfile(0.20, 12.0, 0.20),
    "NL": ZoneProfile(0.33, 11.7, 0.30),
    "PL": ZoneProfile(0.70, 10.8, 0.15),
    "SE": ZoneProfile(0.03, 11.0, 0.05),
    "NO": ZoneProfile(0.03, 11.3, 0.05),
    "ES": ZoneProfile(0.15, 12.2, 0.40),
    "US-CAL-CISO": ZoneProfile(0.25, 20.0, 0.45),
    "US-NY-NYIS": ZoneProfile(0.26, 17.0, 0.15),
    "US-MIDA-PJM": ZoneProfile(0.38, 17.2, 0.10),
}
DEFAULT_PROFILE = ZoneProfile(0.35, 12.0, 0.20)
MIN_KG_PER_KWH, MAX_KG_PER_KWH = 0.005, 1.95  # inside what import_intensity accepts (0..2)


def _uniform(*key: object) -> float:
    """A deterministic number in [-1, 1) for the key (random.Random hashes str seeds with SHA-512)."""
    return random.Random(":".join(map(str, key))).uniform(-1.0, 1.0)


def intensity_at(hour: datetime, *, zone: str, mean_kg_per_kwh: float | None = None, seed: int = 0) -> float:
    """Intensity in kg CO2e/kWh of the UTC hour starting at `hour` (aware)."""
    profile = ZONES.get(zone, DEFAULT_PROFILE)
    mean = profile.mean_kg_per_kwh if mean_kg_per_kwh is None else mean_kg_per_kwh
    hour = hour.astimezone(UTC)
    mid = hour + HOUR / 2
    from_noon = (mid.hour + mid.minute / 60 - profile.solar_noon_utc + 12) % 24 - 12  # in [-12, 12)
    sun = max(0.0, math.cos(math.pi * from_noon / 12))  # daylight between about 06:00 and 18:00 solar time
    season = 0.6 + 0.4 * math.cos(2 * math.pi * (mid.timetuple().tm_yday - 172) / 365.25)  # longest day: 1.0
    solar = -profile.solar_depth * season * (sun - 1 / math.pi)  # 1/pi: the daily mean of `sun`
    evening = 0.06 * (math.exp(-((from_noon - 7) ** 2) / 4) - math.sqrt(4 * math.pi) / 24)  # ~19:00, mean 0
    since_monday_h = ((mid - _EPOCH_MONDAY) / HOUR) % 168
    weekly = 0.05 * math.cos(2 * math.pi * (since_monday_h - 60) / 168)  # high midweek, low on Sunday
    # Weather: a value a day, linearly interpolated between day middles, so it drifts smoothly over days.
    day_pos = (mid - _EPOCH_MONDAY) / timedelta(days=1) - 0.5
    day = math.floor(day_pos)
    frac = day_pos - day
    weather = 0.15 * ((1 - frac) * _uniform(zone, seed, "day", day) + frac * _uniform(zone, seed, "day", day + 1))
    noise = 0.03 * _uniform(zone, seed, "hour", int((hour - _EPOCH_MONDAY) / HOUR))
    value = mean * (1 + solar + evening + weekly + weather + noise)
    return round(min(MAX_KG_PER_KWH, max(MIN_KG_PER_KWH, value)), 4)


def intensity_series(
    *, zone: str, start: datetime, end: datetime, mean_kg_per_kwh: float | None = None, seed: int = 0
) -> list[tuple[datetime, float]]:
    """(hour, kg/kWh) for every UTC hour in [start, end); start must be aware and on the hour."""
    if start.tzinfo is None:
        raise ValueError("start needs a time zone")
    start = start.astimezone(UTC)
    if (start.minute, start.second, start.microsecond) != (0, 0, 0):
        raise ValueError("start must be on the hour")
    if mean_kg_per_kwh is not None and not 0 < mean_kg_per_kwh <= 1.5:
        raise ValueError("the mean must be in (0, 1.5] kg/kWh")
    out: list[tuple[datetime, float]] = []
    hour = start
    while hour < end:
        out.append((hour, intensity_at(hour, zone=zone, mean_kg_per_kwh=mean_kg_per_kwh, seed=seed)))
        hour += HOUR
    return out


FORECAST_SPREAD_48H = 0.15  # a forecast's error two days ahead and beyond: up to +-15 %, growing from 0 at its issue


def forecast_at(
    hour: datetime, *, issued: datetime, zone: str, mean_kg_per_kwh: float | None = None, seed: int = 0
) -> float:
    """A forecast, made at `issued`, of the intensity of the UTC hour starting at `hour`: intensity_at off by up to
    FORECAST_SPREAD_48H x min(1, lead / 48 h), a deterministic draw per issue and hour."""
    truth = intensity_at(hour, zone=zone, mean_kg_per_kwh=mean_kg_per_kwh, seed=seed)
    lead_h = max(0.0, (hour.astimezone(UTC) - issued.astimezone(UTC)) / HOUR)
    spread = FORECAST_SPREAD_48H * min(1.0, lead_h / 48)
    made, at = int((issued - _EPOCH_MONDAY) // HOUR), int((hour - _EPOCH_MONDAY) // HOUR)
    value = truth * (1 + spread * _uniform(zone, seed, "forecast", made, at))
    return round(min(MAX_KG_PER_KWH, max(MIN_KG_PER_KWH, value)), 4)


def forecast_series(
    *, zone: str, issued: datetime, hours: int, mean_kg_per_kwh: float | None = None, seed: int = 0
) -> list[tuple[datetime, float]]:
    """(hour, kg/kWh) forecast at `issued` (aware, on the hour) for its `hours` hours from `issued` on."""
    if issued.tzinfo is None:
        raise ValueError("issued needs a time zone")
    issued = issued.astimezone(UTC)
    if (issued.minute, issued.second, issued.microsecond) != (0, 0, 0):
        raise ValueError("issued must be on the hour")
    return [
        (h, forecast_at(h, issued=issued, zone=zone, mean_kg_per_kwh=mean_kg_per_kwh, seed=seed))
        for h in (issued + k * HOUR for k in range(hours))
    ]
