"""python manage.py import_forecast FILE --zone Z --source S [--basis B] [--issued ISO]: a forecast of a zone's
hourly grid intensity, from Electricity Maps' forecast (its API's JSON answer) or a plain CSV (docs/config.md,
"Importing a forecast"), validated as a whole, then stored in one transaction apart from the measured intensity.
Nothing is written when anything is wrong."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.carbon.forecast import EMA_FACTOR_TYPES, ForecastError, forecast_parse
from apps.carbon.intensity import BASES
from apps.carbon.when_services import forecast_write
from apps.core.web.command_args import text_file_arg, utc_time_arg


class Command(BaseCommand):
    help = "Import a forecast of hourly grid intensity for one zone and basis (Electricity Maps JSON or a CSV)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "file", type=Path, help="Electricity Maps' forecast (JSON) or datetime,kg_per_kwh[,zone] (CSV)"
        )
        parser.add_argument("--zone", required=True, help="the grid zone, as sites name it (e.g. DE)")
        parser.add_argument("--source", required=True, help="where the forecast comes from, shown on every hint")
        parser.add_argument("--basis", choices=BASES, default="location", help="default: location")
        parser.add_argument(
            "--ema-column",
            choices=list(EMA_FACTOR_TYPES),
            default="lca",
            help="Electricity Maps: the life-cycle (lca, default) or the direct figures the file must hold",
        )
        parser.add_argument(
            "--issued", help="when the forecast was made (ISO 8601; UTC without a zone); default: the file's updatedAt"
        )
        parser.add_argument("--allow-unknown-zone", action="store_true", help="import a zone that no site uses (yet)")

    def handle(self, *args: object, **options: object) -> None:
        path = options["file"]
        assert isinstance(path, Path)
        zone, source, basis = str(options["zone"]), str(options["source"]), str(options["basis"])
        issued = (
            utc_time_arg(str(options["issued"]), "--issued", example="2024-06-03T13:42:00Z")
            if options["issued"]
            else None
        )
        limit = settings.FLEETWATT_INTENSITY_MAX_BYTES
        text = text_file_arg(path, what="a forecast file", limit=limit, limit_setting="FLEETWATT_INTENSITY_MAX_BYTES")
        try:
            parsed = forecast_parse(text, zone=zone, ema_column=str(options["ema_column"]), max_bytes=limit)
            report = forecast_write(
                rows=parsed.rows,
                zone=zone,
                source=source,
                basis=basis,
                issued_at=issued or parsed.issued_at,
                allow_unknown_zone=bool(options["allow_unknown_zone"]),
            )
        except ForecastError as exc:
            raise CommandError(f"{path}: {exc}\nNothing was imported.") from None
        self.stdout.write(f"{path} ({parsed.layout}):")
        for line in report.lines():
            self.stdout.write(f"  {line}")
        if parsed.left_out:
            self.stdout.write(f"  {parsed.left_out} hour(s) with no value (null) left out: not known, not 0")
