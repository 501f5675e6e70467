"""python manage.py simulate_sacct --scenario NAME_OR_FILE --scenario-start ISO [sacct's arguments]

Slurm 22.05's `sacct` for a simulated fleet (apps.simulator.sacct): the demo's cluster runs it as its
`sacct_command`, so the scheduler sync reads the accounting of the very jobs whose history was backfilled.
It takes sacct's own arguments, reads `-S`/`-E` as sacct does (local wall-clock time: the caller sets
TZ=UTC), and answers as sacct would: an argument it does not know is exit status 2 with the message on
stderr, a bad time or field exit status 1 with sacct's line. It reads no database."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apps.core.web.command_args import aware_time_arg
from apps.simulator.sacct import (
    SacctUsageError,
    accounting_records,
    records_select,
    sacct_fields,
    sacct_json_render,
    sacct_parsable_render,
    sacct_time_parse,
)
from apps.simulator.scenario import ScenarioError, scenario_load


def _caller_zone_restore() -> None:
    """Make the process's local zone the caller's TZ again, as sacct's: Django replaced TZ with TIME_ZONE when
    it loaded its settings, but the environment the process started with still has it (Linux's /proc); without
    TZ there, the system's zone. Where /proc cannot be read, the local zone stays TIME_ZONE's (UTC)."""
    try:
        started_with = Path("/proc/self/environ").read_bytes().split(b"\0")
    except OSError:
        return
    zone = next((item[3:].decode(errors="replace") for item in started_with if item.startswith(b"TZ=")), None)
    if zone is None:
        os.environ.pop("TZ", None)  # the system's zone (/etc/localtime), as sacct without TZ
    else:
        os.environ["TZ"] = zone
    time.tzset()


class Command(BaseCommand):
    help = (
        "Print what Slurm 22.05's sacct prints (--json, or --parsable2 -o FIELDS) for a simulated scenario's "
        "Slurm jobs, as its accounting reads now: the demo cluster's sacct_command."
    )
    requires_system_checks: list[str] = []  # run by the sync every hour: no checks, no database
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        sacct = parser.add_argument_group("sacct's arguments")
        sacct.add_argument("--json", action="store_true", help="the openapi/dbv0.0.38 document")
        sacct.add_argument("-P", "--parsable2", action="store_true", help="fields separated by |")
        sacct.add_argument("-n", "--noheader", action="store_true")
        sacct.add_argument("-X", "--allocations", action="store_true", help="jobs only, no steps")
        sacct.add_argument("-o", "--format", help="fields, e.g. JobIDRaw,ExitCode")
        sacct.add_argument("-a", "--allusers", action="store_true", help="every user's jobs (always: run as root)")
        sacct.add_argument("-S", "--starttime", help="window start, local wall-clock (default: midnight)")
        sacct.add_argument("-E", "--endtime", help="window end, local wall-clock (default: now)")
        sacct.add_argument("-j", "--jobs", help="raw job ids, comma-separated")
        sim = parser.add_argument_group("the simulation")
        sim.add_argument("--scenario", default="demo", help="a shipped scenario's name or a YAML file")
        sim.add_argument(
            "--scenario-start",
            help="the scenario's start as the demo anchored it (ISO 8601 with zone; what `simulate --start` got); "
            "default: the scenario's own start",
        )
        sim.add_argument("--now", help="the moment the accounting is read at (ISO 8601 with zone; default: now)")

    def handle(self, *args: object, **options: Any) -> None:
        _caller_zone_restore()
        try:
            text = self._sacct(options)
        except (SacctUsageError, ScenarioError, ValueError) as exc:
            self.stderr.write(str(exc))
            sys.exit(1)
        self.stdout.write(text, ending="")

    def _sacct(self, options: dict[str, Any]) -> str:
        if not (options["json"] or options["parsable2"]):
            self.stderr.write("simulate_sacct: only --json and --parsable2 output is simulated")
            sys.exit(2)
        now = (
            aware_time_arg(options["now"], "simulate_sacct: --now", error=SacctUsageError).astimezone(UTC)
            if options["now"]
            else datetime.now(UTC)
        )
        anchor = (
            aware_time_arg(
                options["scenario_start"], "simulate_sacct: --scenario-start", error=SacctUsageError
            ).astimezone(UTC)
            if options["scenario_start"]
            else None
        )
        scenario = scenario_load(str(options["scenario"]), now=anchor)
        if anchor is not None:
            scenario.start = anchor  # as `simulate --start` does: the history and this accounting agree
        job_ids = [int(i) for i in str(options["jobs"] or "").split(",") if i.strip().isdigit()]
        if options["starttime"]:
            start: datetime | None = sacct_time_parse(options["starttime"], now=now)
        elif job_ids:
            start = None  # -j without -S: those jobs whenever they ran
        else:
            start = datetime.combine(now.astimezone().date(), datetime.min.time()).astimezone(UTC)  # midnight
        end = sacct_time_parse(options["endtime"], now=now) if options["endtime"] else now
        if start is not None and start > end:
            raise SacctUsageError(
                f"sacct: error: Start time ({start:%Y-%m-%dT%H:%M:%S}) requested is after end time "
                f"({end:%Y-%m-%dT%H:%M:%S})."
            )
        records = records_select(accounting_records(scenario, now=now), start=start, end=end, job_ids=job_ids)
        if options["json"]:
            return sacct_json_render(records, cluster=scenario.name, now=now, allocations_only=options["allocations"])
        return sacct_parsable_render(
            records,
            fields=sacct_fields(options["format"]),
            cluster=scenario.name,
            now=now,
            header=not options["noheader"],
            allocations_only=options["allocations"],
        )
