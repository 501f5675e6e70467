"""python manage.py ingest --start ISO --end ISO [--cluster NAME]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.command_args import aware_time_arg
from apps.pipeline.ingest import clusters_select, range_ingest
from apps.telemetry.prometheus import PrometheusUnavailable
from apps.telemetry.services import HourReport, IngestError


class Command(BaseCommand):
    help = "Ingest the closed hours h with start <= h < end from each cluster's Prometheus (safe to repeat)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--start", required=True, type=str, help="first hour, ISO 8601 (whole hour, with zone)")
        parser.add_argument("--end", required=True, type=str, help="end, exclusive, ISO 8601 (whole hour)")
        parser.add_argument("--cluster", default=None, help="cluster name (default: every cluster)")
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace stored hours even where the source now holds less of them (past its retention)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        start, end = aware_time_arg(options["start"], "--start"), aware_time_arg(options["end"], "--end")
        verbosity = int(options.get("verbosity", 1))
        try:
            clusters = clusters_select(options["cluster"])
            total = int((end - start).total_seconds() // 3600) * len(clusters) if end > start else 0

            done = [0]

            def progress(report: HourReport) -> None:
                done[0] += 1
                if verbosity >= 1:
                    self.stdout.write(
                        f"[{done[0]}/{total}] {report.cluster} {report.hour:%Y-%m-%d %H}:00  "
                        f"{report.gpus} GPUs, {report.jobs} jobs, {report.query_count} queries, "
                        f"{report.duration_s:.2f}s (Prometheus {report.prometheus_s:.2f}s)"
                    )

            reports = range_ingest(
                clusters=clusters, start=start, end=end, progress=progress, force=bool(options["force"])
            )
        except (IngestError, PrometheusUnavailable) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Ingested {len(reports)} cluster-hours."))
