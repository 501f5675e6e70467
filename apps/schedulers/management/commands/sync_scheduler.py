"""python manage.py sync_scheduler --start ISO --end ISO [--cluster NAME]"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.core.web.command_args import aware_time_arg
from apps.pipeline.scheduler import SchedulerSyncError, scheduler_clusters_select, scheduler_sync, sync_windows
from apps.schedulers.sources import SchedulerUnavailable

MAX_RANGE = timedelta(days=366)


class Command(BaseCommand):
    help = (
        "Read each job's record from the cluster's scheduler accounting for [start, end) and store it on its job "
        "(state, exit code, allocation), a day at a time. Safe to repeat."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--start", required=True, type=str, help="start of the window, ISO 8601 with zone")
        parser.add_argument("--end", required=True, type=str, help="end, exclusive, ISO 8601 with zone")
        parser.add_argument("--cluster", default=None, help="cluster name (default: every cluster with a scheduler)")

    def handle(self, *args: object, **options: Any) -> None:
        start, end = aware_time_arg(options["start"], "--start"), aware_time_arg(options["end"], "--end")
        if start >= end:
            raise CommandError(f"--start {options['start']} must be before --end {options['end']}.")
        if end - start > MAX_RANGE:
            raise CommandError(f"A sync covers at most {MAX_RANGE.days} days; split the range.")
        try:
            clusters = scheduler_clusters_select(options["cluster"])
        except SchedulerSyncError as exc:
            raise CommandError(str(exc)) from None
        if not clusters:
            raise CommandError("No cluster has a scheduler configured.")
        windows = 0
        for cluster in clusters:
            for first, last in sync_windows(start, end):
                try:
                    report = scheduler_sync(cluster=cluster, start=first, end=last)
                except SchedulerUnavailable as exc:
                    raise CommandError(f"{exc} (nothing written for this window)") from None
                windows += 1
                if int(options.get("verbosity", 1)) >= 1:
                    self.stdout.write(
                        f"{cluster.name} [{first.isoformat()}, {last.isoformat()}): {report.records} records, "
                        f"{report.created} jobs created, {report.updated} updated, {report.missing} missing"
                    )
        self.stdout.write(self.style.SUCCESS(f"Synced {windows} window(s)."))
