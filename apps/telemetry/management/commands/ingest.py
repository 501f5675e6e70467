"""python manage.py ingest --start ISO --end ISO [--cluster NAME]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.web.command_args import aware_time_arg
from apps.pipeline.ingest import IngestError, clusters_select, range_ingest
from apps.telemetry.prometheus import PrometheusUnavailable
from apps.telemetry.promql import DCGM_ENERGY, DCGM_POWER
from apps.telemetry.services import HourReport


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
            meterless: set[str] = set()

            def progress(report: HourReport) -> None:
                done[0] += 1
                if verbosity >= 1:
                    self.stdout.write(
                        f"[{done[0]}/{total}] {report.cluster} {report.hour:%Y-%m-%d %H}:00  "
                        f"{report.gpus} GPUs, {report.jobs} jobs, {report.query_count} queries, "
                        f"{report.duration_s:.2f}s (Prometheus {report.prometheus_s:.2f}s)"
                    )
                for gpu in report.meterless:  # said whatever the verbosity: their energy is not stored
                    self.stderr.write(
                        self.style.WARNING(
                            f"{report.cluster} {report.hour:%Y-%m-%d %H}:00: GPU {gpu.uuid} on "
                            f"{gpu.hostname or '?'} has no energy meter (missing {', '.join(gpu.missing)}): "
                            "no energy stored for it"
                        )
                    )
                meterless.update(f"{report.cluster}/{gpu.uuid}" for gpu in report.meterless)
                for pod in report.unclaimed:  # the GPU's energy went to idle or to the workload that held it
                    self.stderr.write(
                        self.style.WARNING(
                            f"{report.cluster} {report.hour:%Y-%m-%d %H}:00: dcgm-exporter labels GPU(s) "
                            f"{', '.join(pod.uuids)} with {pod.job_key}, which requests no GPU "
                            "(kube-state-metrics): not charged"
                        )
                    )

            reports = range_ingest(
                clusters=clusters, start=start, end=end, progress=progress, force=bool(options["force"])
            )
        except (IngestError, PrometheusUnavailable) as exc:
            raise CommandError(str(exc)) from None
        if meterless:
            # Exit non-zero: a GPU whose energy cannot be known is never a silent zero in a fleet's totals.
            raise CommandError(
                f"Ingested {len(reports)} cluster-hours, but {len(meterless)} GPU(s) have no energy meter "
                f"(no {DCGM_ENERGY} or {DCGM_POWER}: a vGPU guest, or dcgm-exporter configured without them): "
                f"{', '.join(sorted(meterless)[:10])}. Their energy is not counted (docs/metrics.md)."
            )
        self.stdout.write(self.style.SUCCESS(f"Ingested {len(reports)} cluster-hours."))
