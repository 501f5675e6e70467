"""python manage.py ingest --start ISO --end ISO [--cluster NAME]"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.pipeline.ingest import clusters_select, range_ingest
from apps.telemetry.prometheus import PrometheusUnavailable
from apps.telemetry.services import HourReport, IngestError


def _iso(value: str, flag: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{flag} {value!r} is not an ISO 8601 time such as 2026-11-02T00:00:00Z.") from None
    if moment.tzinfo is None:
        raise CommandError(f"{flag} {value} has no time zone; add Z or an offset such as +01:00.")
    return moment


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
        start, end = _iso(options["start"], "--start"), _iso(options["end"], "--end")
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
