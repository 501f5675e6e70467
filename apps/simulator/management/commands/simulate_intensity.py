"""python manage.py simulate_intensity --zone Z --start ISO --hours N --out FILE [--mean 0.35] [--seed 0]
[--forecast]: synthetic hourly grid intensity (apps.simulator.intensity) as a plain CSV that import_intensity reads;
with --forecast, a synthetic forecast of it made at --start, that import_forecast reads."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.carbon.intensity import plain_csv
from apps.simulator.intensity import DEFAULT_PROFILE, ZONES, forecast_series, intensity_series
from apps.simulator.scenario import ScenarioError, parse_duration


def start_parse(text: str, *, now: datetime | None = None) -> datetime:
    """An ISO time on the hour (UTC without an offset), or now / now-7d / now+1h rounded down to the hour."""
    if text.startswith("now"):
        base = (now or datetime.now(UTC)).replace(minute=0, second=0, microsecond=0)
        rest = text[3:].strip()
        if not rest:
            return base
        if rest[0] not in "+-":
            raise ValueError(f"{text!r}: expected now, now-<duration> or now+<duration>")
        try:
            seconds = parse_duration(rest[1:], "--start")
        except ScenarioError as exc:
            raise ValueError(str(exc)) from None
        moment = base + (-1 if rest[0] == "-" else 1) * timedelta(seconds=seconds)
        return moment.replace(minute=0, second=0, microsecond=0)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 time") from None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if (moment.minute, moment.second, moment.microsecond) != (0, 0, 0):
        raise ValueError(f"{text!r} is not on the hour")
    return moment


class Command(BaseCommand):
    help = "Write synthetic hourly grid intensity for a zone as datetime,kg_per_kwh (for import_intensity)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--zone", required=True, help=f"zone id; shapes known for {', '.join(ZONES)}")
        parser.add_argument("--start", required=True, help="first hour: ISO 8601 (UTC by default) or now-7d")
        parser.add_argument("--hours", type=int, required=True, help="how many hours")
        parser.add_argument("--out", required=True, help="CSV file to write, or - for standard output")
        parser.add_argument(
            "--mean",
            type=float,
            help=f"mean kg CO2e/kWh (default: the zone's, else {DEFAULT_PROFILE.mean_kg_per_kwh})",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--forecast",
            action="store_true",
            help="a forecast made at --start of its --hours hours (off by up to 15 %% two days ahead; import_forecast)",
        )

    def handle(self, *args: object, **options: object) -> None:
        hours = int(str(options["hours"]))
        if hours < 1:
            raise CommandError("--hours must be at least 1")
        try:
            start = start_parse(str(options["start"]))
            zone, seed = str(options["zone"]), int(str(options["seed"]))
            mean = float(str(options["mean"])) if options["mean"] is not None else None
            if options["forecast"]:
                series = forecast_series(zone=zone, issued=start, hours=hours, mean_kg_per_kwh=mean, seed=seed)
            else:
                end = start + timedelta(hours=hours)
                series = intensity_series(zone=zone, start=start, end=end, mean_kg_per_kwh=mean, seed=seed)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        text = plain_csv(series)
        out = str(options["out"])
        if out == "-":
            sys.stdout.write(text)
            return
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        kind = "forecast, made then, " if options["forecast"] else ""
        self.stdout.write(
            f"{path}: {len(series)} hours of {options['zone']} {kind}from {start:%Y-%m-%d %H:%M} UTC, "
            f"mean {sum(v for _, v in series) / len(series):.3f} kg/kWh"
        )
