"""Writes of "when to run" (docs/arithmetic.md, "When to run"): imported grid-intensity forecasts, and the hints of
record, kept each hour so that they can be checked against the intensity that comes. Both are safe to run again:
an hour already stored is replaced (a forecast's later import wins; a hint of the same hour is the same hint).

A forecast is kept apart from the measured intensity (ForecastHour, not IntensityHour) and enters no footprint:
importing one recomputes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from apps.fleet.models import Team

from .forecast import ForecastError
from .hourly_import import header_problems, rows_problems
from .intensity import IntensityRow
from .models import ForecastHour, WhenToRunHint
from .when_selectors import group_hints
from .when_to_run import HOUR


@dataclass
class ForecastReport:
    """What forecast_write stored."""

    zone: str
    basis: str
    source: str
    rows: int
    first_hour: datetime
    last_hour: datetime
    issued_at: datetime | None
    created: int = 0
    replaced: int = 0
    unchanged: int = 0

    def lines(self) -> list[str]:
        made = f", made {self.issued_at:%Y-%m-%d %H:%M} UTC" if self.issued_at else ""
        return [
            f"{self.zone} ({self.basis}) forecast from {self.source}{made}: {self.rows} hours, "
            f"{self.first_hour:%Y-%m-%d %H}:00 .. {self.last_hour:%Y-%m-%d %H}:00 UTC",
            f"{self.created} new, {self.replaced} replaced, {self.unchanged} unchanged (footprints unchanged: a "
            "forecast is never a measurement)",
        ]


def forecast_write(
    *,
    rows: Sequence[IntensityRow],
    zone: str,
    source: str,
    basis: str,
    issued_at: datetime | None = None,
    allow_unknown_zone: bool = False,
) -> ForecastReport:
    """Store a forecast of one zone and basis in one transaction; an hour already forecast is replaced. Raises
    ForecastError, having written nothing, if the zone is used by no site (unless allowed) or the rows are not one
    per UTC hour."""
    problems = header_problems(zone=zone, basis=basis, source=source, source_example="Electricity Maps forecast")
    if issued_at is not None and (issued_at.tzinfo is None or issued_at.utcoffset() is None):
        problems.append("--issued: a time with its zone (e.g. 2024-06-03T13:42:00Z)")
    row_problems, first = rows_problems(rows, zone=zone, allow_unknown_zone=allow_unknown_zone)
    problems += row_problems
    if problems:
        raise ForecastError(problems)
    hours = sorted(first)
    report = ForecastReport(
        zone=zone, basis=basis, source=source, rows=len(rows), first_hour=hours[0], last_hour=hours[-1],
        issued_at=issued_at,
    )  # fmt: skip
    with transaction.atomic():
        stored = {
            f.hour: (f.kg_per_kwh, f.source, f.issued_at)
            for f in ForecastHour.objects.filter(zone=zone, basis=basis, hour__gte=hours[0], hour__lte=hours[-1])
        }
        write = []
        for row in rows:
            before = stored.get(row.hour)
            if before == (row.kg_per_kwh, source, issued_at):
                report.unchanged += 1
                continue
            report.created += before is None
            report.replaced += before is not None
            write.append(
                ForecastHour(
                    zone=zone, basis=basis, hour=row.hour, kg_per_kwh=row.kg_per_kwh, source=source, issued_at=issued_at
                )
            )
        ForecastHour.objects.bulk_create(
            write,
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["zone", "basis", "hour"],
            update_fields=["kg_per_kwh", "source", "issued_at", "imported_at"],
        )
    return report


def hints_record(*, now: datetime, teams: Iterable[Team] | None = None) -> int:
    """Keep every team's hints as of the hour of `now` (those with a best start) as hints of record; a hint of the
    same team, group, zone and hour is replaced (running it twice in an hour stores it once). Returns how many."""
    kept = []
    for hint in group_hints(teams=list(teams if teams is not None else Team.objects.order_by("name")), now=now):
        if hint.best is not None:
            kept.append(
                WhenToRunHint(
                    team_id=hint.team_id, job_group_id=hint.group_id, zone=hint.zone, basis=hint.basis,
                    made_at=hint.made_at, deadline_h=hint.deadline_h, runs=hint.run.runs, run_kwh=list(hint.run.kwh),
                    forecast_kind=hint.forecast.kind, forecast_source=hint.forecast.source[:300],
                    forecast=hint.forecast.values, best_start=hint.made_at + hint.best.offset_h * HOUR,
                    now_kg=hint.best.now_kg, best_kg=hint.best.best_kg,
                )
            )  # fmt: skip
    WhenToRunHint.objects.bulk_create(
        kept,
        update_conflicts=True,
        unique_fields=["team", "job_group", "zone", "basis", "made_at"],
        update_fields=[
            "deadline_h", "runs", "run_kwh", "forecast_kind", "forecast_source", "forecast", "best_start", "now_kg",
            "best_kg",
        ],
    )  # fmt: skip
    return len(kept)
