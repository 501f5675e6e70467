"""`manage.py hour_rows_expire [--keep-months N] [--dry-run]`: drop the per-hour tables' months past retention.

Jobs' totals, teams' daily sums, findings and the audit log stay; the jobs that had rows in those months are
marked rows_expired and no longer derived. Run as the database's owner where the app's role owns nothing
(`DATABASE_OWNER_URL`: the command then uses the `owner` connection)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.telemetry.partitions import expiry_horizon, hour_rows_expire


class Command(BaseCommand):
    help = "Drop the hour rows of the months past FLEETWATT_HOUR_ROWS_KEEP_MONTHS (jobs' totals stay)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--keep-months", type=int, default=None, help="Months to keep (default: the setting).")
        parser.add_argument("--dry-run", action="store_true", help="Say what would be dropped; drop nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        keep = options["keep_months"]
        if keep is None:
            keep = settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS
        if keep < 0:
            raise CommandError("--keep-months must be 0 (keep everything) or more.")
        horizon = expiry_horizon(now=timezone.now(), keep_months=keep)
        if horizon is None:
            self.stdout.write("FLEETWATT_HOUR_ROWS_KEEP_MONTHS is 0: every month is kept; nothing to drop.")
            return
        using = "owner" if "owner" in settings.DATABASES else "default"
        done = hour_rows_expire(horizon=horizon, dry_run=options["dry_run"], using=using)
        verb = "would drop" if options["dry_run"] else "dropped"
        self.stdout.write(
            f"hour rows before {done.horizon}: {verb} {done.partitions_dropped} monthly partitions "
            f"({done.bytes_freed / 1e6:,.1f} MB); {done.jobs_frozen} jobs keep their totals as they are (rows_expired)"
        )
