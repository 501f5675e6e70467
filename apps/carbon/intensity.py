"""Hourly grid-intensity files (docs/config.md): parse and validate a whole CSV into rows. Pure: no database.

Three layouts, told apart by the header:
- plain: `datetime,kg_per_kwh`;
- plain with a zone column: `datetime,zone,kg_per_kwh` (any order); every row's zone must be the one imported;
- an Electricity Maps hourly export (`Datetime (UTC)`, `Zone Id`, `Carbon Intensity gCO₂eq/kWh (direct)`
  and `(LCA)` — `(Life cycle)` in the newer exports), in grams, converted to kg.
Timestamps without an offset are UTC. Every problem names its line; nothing is returned unless there are none.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)
# The bases of apps.carbon.models.Basis, repeated here so the module stays pure (a test checks they agree).
BASES = ("location", "market", "marginal")
MAX_KG_PER_KWH = 2.0  # the dirtiest grids are about 1.2; anything above is a wrong unit or a typo
EMA_COLUMNS = ("lca", "direct")

_EMA_DATETIME = "datetime (utc)"
_EMA_ZONE = "zone id"
_EMA_VALUE = {
    "direct": ("carbon intensity gco2eq/kwh (direct)",),
    "lca": (
        "carbon intensity gco2eq/kwh (lca)",
        "carbon intensity gco2eq/kwh (life cycle)",
        "carbon intensity gco2eq/kwh (life cycle assessment)",
    ),
}
_EMA_HEADER_SHOWN = "Datetime (UTC), Zone Id, Carbon Intensity gCO₂eq/kWh (direct) and (LCA)"
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_LISTED = 30


class IntensityError(ValueError):
    """The intensity file (or the import) is wrong; `problems` lists every problem, each naming its line."""

    subject = "the intensity file"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        n = len(self.problems)
        lines = [f"{n} problem{'s' if n != 1 else ''} with {self.subject}:"]
        lines += [f"  - {p}" for p in self.problems[:_MAX_LISTED]]
        if n > _MAX_LISTED:
            lines.append(f"  ... and {n - _MAX_LISTED} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class IntensityRow:
    """One hour's intensity: `hour` is the start of the UTC hour; `line` is where it was read."""

    hour: datetime
    kg_per_kwh: float
    line: int = 0


@dataclass(frozen=True)
class IntensityFile:
    layout: str  # "plain", "plain+zone" or "electricitymaps"
    value_column: str  # the column the values came from
    rows: tuple[IntensityRow, ...]  # sorted by hour

    @property
    def first_hour(self) -> datetime:
        return self.rows[0].hour

    @property
    def last_hour(self) -> datetime:
        return self.rows[-1].hour

    @property
    def missing_hours(self) -> int:
        """Hours between the first and the last that the file does not give (the fill rule covers them)."""
        return int((self.last_hour - self.first_hour) / HOUR) + 1 - len(self.rows)


def _normal(header: str) -> str:
    """Header names compared without case, the subscript ₂, a byte-order mark or repeated spaces."""
    return " ".join(header.replace("\ufeff", "").replace("₂", "2").strip().lower().split())


def hour_parse(text: str) -> datetime:
    """An ISO 8601 time on the hour -> the aware UTC hour. Without an offset it is UTC. Raises ValueError."""
    text = text.strip()
    if not text:
        raise ValueError("no timestamp")
    if _DATE_ONLY.match(text):
        raise ValueError(f"{text!r} is a date without a time")
    if len(text) > 64:
        raise ValueError(f"{text[:20]!r}... ({len(text):,} characters) is not an ISO 8601 time")
    try:
        moment = datetime.fromisoformat(text)
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time (e.g. 2024-06-03T14:00:00Z)") from None
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise ValueError(f"{text!r} is out of the range of dates") from None
    if (moment.minute, moment.second, moment.microsecond) != (0, 0, 0):
        raise ValueError(f"{text!r} is not on the hour (in UTC)")
    return moment


def _value(text: str, *, grams: bool) -> float:
    text = text.strip()
    if not text:
        raise ValueError("no value")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    kg = value / 1000 if grams else value
    unit = "g/kWh" if grams else "kg/kWh"
    if kg < 0:
        raise ValueError(f"negative intensity {value:g} {unit}")
    if kg > MAX_KG_PER_KWH:
        hint = "" if grams else " (this column is in kg/kWh: g/kWh values belong in an Electricity Maps export)"
        raise ValueError(f"{value:g} {unit} is over {MAX_KG_PER_KWH:g} kg/kWh{hint}")
    return kg


@dataclass(frozen=True)
class _Layout:
    name: str
    datetime_at: int
    value_at: int
    value_column: str
    zone_at: int | None
    grams: bool


def _layout(header: list[str], *, ema_column: str) -> _Layout:
    names = [_normal(h) for h in header]
    if _EMA_DATETIME in names:
        wanted = _EMA_VALUE[ema_column]
        value_at = next((names.index(n) for n in wanted if n in names), None)
        if value_at is None:
            other = next((n for n in _EMA_VALUE["direct" if ema_column == "lca" else "lca"] if n in names), None)
            hint = f" (the file has {header[names.index(other)]!r}: try --ema-column)" if other else ""
            raise ValueError(f"an Electricity Maps export without its {ema_column} carbon intensity column{hint}")
        return _Layout(
            name="electricitymaps",
            datetime_at=names.index(_EMA_DATETIME),
            value_at=value_at,
            value_column=header[value_at].strip(),
            zone_at=names.index(_EMA_ZONE) if _EMA_ZONE in names else None,
            grams=True,
        )
    if "datetime" in names and "kg_per_kwh" in names:
        extra = [h for h, n in zip(header, names, strict=True) if n not in ("datetime", "kg_per_kwh", "zone")]
        if extra:
            raise ValueError(f"unknown columns {', '.join(map(repr, extra))} (expected datetime, kg_per_kwh and zone)")
        if len(set(names)) != len(names):
            raise ValueError("a column is named twice")
        return _Layout(
            name="plain+zone" if "zone" in names else "plain",
            datetime_at=names.index("datetime"),
            value_at=names.index("kg_per_kwh"),
            value_column="kg_per_kwh",
            zone_at=names.index("zone") if "zone" in names else None,
            grams=False,
        )
    raise ValueError(
        f"unrecognised header {','.join(header)!r}: expected datetime,kg_per_kwh (optionally with zone) or an "
        f"Electricity Maps hourly export ({_EMA_HEADER_SHOWN})"
    )


INTENSITY_MAX_BYTES = 32 * 1024 * 1024  # 50 years of hourly rows with room to spare


def intensity_parse(
    text: str, *, zone: str, ema_column: str = "lca", max_bytes: int = INTENSITY_MAX_BYTES
) -> IntensityFile:
    """Validate a whole intensity CSV for `zone`. Raises IntensityError listing every problem by line."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise IntensityError([f"the file is {size:,} bytes; an intensity file is at most {max_bytes:,}"])
    try:
        return _intensity_parse(text, zone=zone, ema_column=ema_column)
    except csv.Error as exc:  # e.g. a cell over the csv module's field size limit (128 KiB)
        raise IntensityError([f"not a readable CSV file: {exc}"]) from None


def _intensity_parse(text: str, *, zone: str, ema_column: str) -> IntensityFile:
    if ema_column not in EMA_COLUMNS:
        raise IntensityError([f"--ema-column: expected one of {', '.join(EMA_COLUMNS)}, got {ema_column!r}"])
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    header: list[str] | None = None
    header_line = 1
    for record in reader:
        if any(cell.strip() for cell in record):
            header, header_line = record, reader.line_num
            break
    if header is None:
        raise IntensityError(["line 1: the file is empty (expected a header, e.g. datetime,kg_per_kwh)"])
    try:
        layout = _layout(header, ema_column=ema_column)
    except ValueError as exc:
        raise IntensityError([f"line {header_line}: {exc}"]) from None

    problems: list[str] = []
    rows: list[IntensityRow] = []
    seen: dict[datetime, int] = {}
    for record in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in record):
            continue  # blank lines (a trailing newline, a spreadsheet's empty rows)
        if len(record) != len(header):
            problems.append(f"line {line}: {len(record)} columns, the header has {len(header)}")
            continue
        bad: list[str] = []
        hour: datetime | None = None
        value: float | None = None
        try:
            hour = hour_parse(record[layout.datetime_at])
        except ValueError as exc:
            bad.append(str(exc))
        try:
            value = _value(record[layout.value_at], grams=layout.grams)
        except ValueError as exc:
            bad.append(str(exc))
        if layout.zone_at is not None and record[layout.zone_at].strip() != zone:
            found = record[layout.zone_at].strip()
            bad.append(f"zone {found!r} is not the zone imported ({zone!r}); import one zone per run")
        if hour is not None and hour in seen:
            bad.append(f"{hour:%Y-%m-%d %H}:00 UTC is already given on line {seen[hour]}")
        elif hour is not None:
            seen[hour] = line
        if bad:
            problems.extend(f"line {line}: {b}" for b in bad)
        elif hour is not None and value is not None:
            rows.append(IntensityRow(hour=hour, kg_per_kwh=value, line=line))
    if not problems and not rows:
        problems.append(f"line {header_line + 1}: no rows after the header")
    if problems:
        raise IntensityError(problems)
    return IntensityFile(
        layout=layout.name, value_column=layout.value_column, rows=tuple(sorted(rows, key=lambda r: r.hour))
    )


def plain_csv(series: Iterable[tuple[datetime, float]]) -> str:
    """The plain layout (`datetime,kg_per_kwh`, ISO UTC times) that intensity_parse reads back."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["datetime", "kg_per_kwh"])
    for hour, kg in series:
        writer.writerow([hour.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), f"{kg:.4f}"])
    return out.getvalue()
