"""python manage.py import_intensity FILE --zone Z --source S [--basis B]: hourly grid intensity from a
CSV (docs/config.md), validated as a whole, then stored in one transaction; the footprints it changes
are recomputed."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.carbon.intensity import BASES, EMA_COLUMNS, IntensityError, intensity_parse
from apps.core.web.command_args import text_file_arg
from apps.pipeline.inputs import intensity_import


class Command(BaseCommand):
    help = "Import hourly grid intensity (kg CO2e/kWh) for one zone and basis from a CSV file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="datetime,kg_per_kwh[,zone] or an Electricity Maps hourly export")
        parser.add_argument("--zone", required=True, help="the grid zone, as sites name it (e.g. DE)")
        parser.add_argument("--source", required=True, help="where the figures come from, shown on every number")
        parser.add_argument("--basis", choices=BASES, default="location", help="default: location")
        parser.add_argument(
            "--ema-column",
            choices=EMA_COLUMNS,
            default="lca",
            help="Electricity Maps exports: the life-cycle (lca, default) or the direct column",
        )
        parser.add_argument("--allow-unknown-zone", action="store_true", help="import a zone that no site uses (yet)")

    def handle(self, *args: object, **options: object) -> None:
        path = options["file"]
        assert isinstance(path, Path)
        zone, source, basis = str(options["zone"]), str(options["source"]), str(options["basis"])
        limit = settings.FLEETWATT_INTENSITY_MAX_BYTES
        text = text_file_arg(path, what="an intensity file", limit=limit, limit_setting="FLEETWATT_INTENSITY_MAX_BYTES")
        try:
            parsed = intensity_parse(text, zone=zone, ema_column=str(options["ema_column"]), max_bytes=limit)
            if parsed.layout == "electricitymaps" and basis != "location":
                self.stderr.write(
                    f"warning: Electricity Maps hourly exports are location-based figures; importing as {basis}"
                )
            report = intensity_import(
                rows=parsed.rows,
                zone=zone,
                source=source,
                basis=basis,
                allow_unknown_zone=bool(options["allow_unknown_zone"]),
            )
        except IntensityError as exc:
            raise CommandError(f"{path}: {exc}\nNothing was imported.") from None
        self.stdout.write(f"{path} ({parsed.layout}, {parsed.value_column}):")
        for line in report.lines():
            self.stdout.write(f"  {line}")
