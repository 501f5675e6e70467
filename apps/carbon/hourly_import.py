"""What an import of hourly figures of one zone (measured intensity, or a forecast) must hold before anything is
written: a basis, a zone id, a source, and one row per UTC hour, of a zone some site uses. Shared by
services.intensity_write and when_services.forecast_write; each problem names its option or its line."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .intensity import BASES, IntensityRow
from .models import Site


def header_problems(*, zone: str, basis: str, source: str, source_example: str) -> list[str]:
    problems: list[str] = []
    if basis not in BASES:
        problems.append(f"--basis: expected one of {', '.join(BASES)}, got {basis!r}")
    if not zone.strip() or len(zone) > 50:
        problems.append("--zone: a zone id of 1 to 50 characters, e.g. DE or US-CAL-CISO")
    if not source.strip() or len(source) > 200:
        problems.append(f"--source: a name of 1 to 200 characters, e.g. {source_example!r}")
    return problems


def rows_problems(
    rows: Sequence[IntensityRow], *, zone: str, allow_unknown_zone: bool
) -> tuple[list[str], dict[datetime, int]]:
    """The rows' problems, and {hour: the line it is given on} of the hours given once."""
    problems: list[str] = []
    if not rows:
        problems.append("no rows to import")
    first: dict[datetime, int] = {}
    for row in rows:
        if row.hour.tzinfo is None or row.hour.utcoffset() != timedelta(0) or row.hour.minute or row.hour.second:
            problems.append(f"line {row.line}: {row.hour} is not the start of a UTC hour")
        elif row.hour in first:
            problems.append(
                f"line {row.line}: {row.hour:%Y-%m-%d %H}:00 UTC is already given on line {first[row.hour]}"
            )
        else:
            first[row.hour] = row.line
    if zone.strip() and not allow_unknown_zone and not Site.objects.filter(grid_zone=zone).exists():
        used = sorted(set(Site.objects.values_list("grid_zone", flat=True)))
        problems.append(
            f"--zone {zone}: no site uses this zone (sites use: {', '.join(used) or 'none yet'}); "
            "pass --allow-unknown-zone to import it anyway"
        )
    return problems, first
