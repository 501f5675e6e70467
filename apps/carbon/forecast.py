"""Grid-intensity forecast files (docs/config.md, "Importing a forecast"): parse and validate a whole file into
rows. Pure: no database.

Two layouts, told apart by their first character:
- Electricity Maps' forecast, the JSON its API answers to `GET /v3/carbon-intensity/forecast?zone=DE` (saved as it
  came): `{"zone": "DE", "forecast": [{"carbonIntensity": 302, "datetime": "2024-06-03T14:00:00.000Z"}, ...],
  "updatedAt": "2024-06-03T13:42:11.000Z"}`, in gCO2eq/kWh, converted to kg. Its figures are life-cycle unless
  `emissionFactorType` (of the answer or of a point) says `direct`; `updatedAt` is when the forecast was made. A
  point whose `carbonIntensity` is null is not known: it is left out, never read as 0.
- a CSV, read as intensity files are (apps.carbon.intensity): `datetime,kg_per_kwh`, optionally with `zone`.
Every problem names its line (or point); nothing is returned unless there are none.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .intensity import INTENSITY_MAX_BYTES, MAX_KG_PER_KWH, IntensityError, IntensityRow, hour_parse, intensity_parse

# Electricity Maps' names of the two kinds of emission factors, by the import's --ema-column.
EMA_FACTOR_TYPES = {"lca": "lifecycle", "direct": "direct"}


class ForecastError(IntensityError):
    """The forecast file is wrong; `problems` lists every problem, each naming its line or point."""

    subject = "the forecast file"


@dataclass(frozen=True)
class ForecastFile:
    layout: str  # "electricitymaps-forecast", or the CSV's layout ("plain", "plain+zone", "electricitymaps")
    rows: tuple[IntensityRow, ...]  # sorted by hour; `line` is the CSV line or the JSON point's number (from 1)
    issued_at: datetime | None  # when the forecast was made, where the file says (Electricity Maps' updatedAt)
    left_out: int = 0  # points with no value (null): not known, not imported


def forecast_parse(
    text: str, *, zone: str, ema_column: str = "lca", max_bytes: int = INTENSITY_MAX_BYTES
) -> ForecastFile:
    """Validate a whole forecast file for `zone`. Raises ForecastError listing every problem."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ForecastError([f"the file is {size:,} bytes; a forecast file is at most {max_bytes:,}"])
    body = text.removeprefix("\ufeff").lstrip()
    if body.startswith(("{", "[")):
        return _electricitymaps_parse(body, zone=zone, ema_column=ema_column)
    try:
        parsed = intensity_parse(text, zone=zone, ema_column=ema_column, max_bytes=max_bytes)
    except IntensityError as exc:
        raise ForecastError(exc.problems) from None
    return ForecastFile(layout=parsed.layout, rows=parsed.rows, issued_at=None)


def _moment_parse(raw: Any, where: str) -> datetime:
    if not isinstance(raw, str) or not raw.strip() or len(raw) > 64:
        raise ValueError(f"{where}: expected an ISO 8601 time, got {json.dumps(raw)[:40]}")
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError(f"{where}: {raw!r} is not an ISO 8601 time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _grams_parse(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"carbonIntensity {json.dumps(raw)[:40]} is not a number")
    if not math.isfinite(raw):
        raise ValueError(f"carbonIntensity {raw} is not a finite number")
    if raw < 0:
        raise ValueError(f"negative intensity {raw:g} g/kWh")
    if raw / 1000 > MAX_KG_PER_KWH:
        raise ValueError(f"{raw:g} g/kWh is over {MAX_KG_PER_KWH:g} kg/kWh")
    return raw / 1000


def _factor_problem(found: Any, ema_column: str, where: str) -> str | None:
    wanted = EMA_FACTOR_TYPES[ema_column]
    if found is None or found == wanted:
        return None
    return (
        f"{where}: emissionFactorType {json.dumps(found)[:40]} is not the {wanted!r} figures imported "
        f"(--ema-column {ema_column}); ask the API for emissionFactorType={wanted} or import with the other column"
    )


def _electricitymaps_parse(body: str, *, zone: str, ema_column: str) -> ForecastFile:
    if ema_column not in EMA_FACTOR_TYPES:
        raise ForecastError([f"--ema-column: expected one of {', '.join(EMA_FACTOR_TYPES)}, got {ema_column!r}"])
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ForecastError([f"not readable JSON: {exc}"]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("forecast"), list):
        raise ForecastError(
            ['expected Electricity Maps\' forecast, an object with a "forecast" list of {"datetime", '
             '"carbonIntensity"} points (GET /v3/carbon-intensity/forecast)']
        )  # fmt: skip
    problems: list[str] = []
    if doc.get("zone") is not None and doc.get("zone") != zone:
        problems.append(f"zone {json.dumps(doc['zone'])[:40]} is not the zone imported ({zone!r})")
    granularity = doc.get("temporalGranularity")
    if granularity is not None and granularity != "hourly":
        problems.append(f"temporalGranularity {json.dumps(granularity)[:40]}: only hourly forecasts are imported")
    if problem := _factor_problem(doc.get("emissionFactorType"), ema_column, "the answer"):
        problems.append(problem)
    issued: datetime | None = None
    if doc.get("updatedAt") is not None:
        try:
            issued = _moment_parse(doc["updatedAt"], "updatedAt")
        except ValueError as exc:
            problems.append(str(exc))
    rows: list[IntensityRow] = []
    seen: dict[datetime, int] = {}
    left_out = 0
    for n, point in enumerate(doc["forecast"], start=1):
        where = f"point {n}"
        if not isinstance(point, dict):
            problems.append(f"{where}: expected an object with datetime and carbonIntensity")
            continue
        bad: list[str] = []
        hour: datetime | None = None
        try:
            hour = hour_parse(point["datetime"]) if isinstance(point.get("datetime"), str) else None
            if hour is None:
                bad.append("no datetime (an ISO 8601 time, e.g. 2024-06-03T14:00:00.000Z)")
        except ValueError as exc:
            bad.append(str(exc))
        if problem := _factor_problem(point.get("emissionFactorType"), ema_column, "its"):
            bad.append(problem.removeprefix("its: "))
        value: float | None = None
        if "carbonIntensity" not in point:
            bad.append("no carbonIntensity")
        elif point["carbonIntensity"] is None:
            left_out += 1  # not known: left out, never 0
        else:
            try:
                value = _grams_parse(point["carbonIntensity"])
            except ValueError as exc:
                bad.append(str(exc))
        if hour is not None and hour in seen:
            bad.append(f"{hour:%Y-%m-%d %H}:00 UTC is already given by point {seen[hour]}")
        elif hour is not None:
            seen[hour] = n
        if bad:
            problems.extend(f"{where}: {b}" for b in bad)
        elif hour is not None and value is not None:
            rows.append(IntensityRow(hour=hour, kg_per_kwh=value, line=n))
    if not problems and not rows:
        problems.append("no point with a value in the forecast")
    if problems:
        raise ForecastError(problems)
    return ForecastFile(
        layout="electricitymaps-forecast",
        rows=tuple(sorted(rows, key=lambda r: r.hour)),
        issued_at=issued,
        left_out=left_out,
    )
