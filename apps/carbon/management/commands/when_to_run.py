"""python manage.py when_to_run [--team T] [--at ISO ...] [--record]: each team's when-to-run hints for its flexible
job groups (docs/arithmetic.md, "When to run"), as of now or of the hours given; `--record` keeps them as hints of
record, as beat does each hour, to be checked against the intensity that comes."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.carbon.when_selectors import group_hints, hour_floor
from apps.carbon.when_services import hints_record
from apps.core.web.command_args import utc_time_arg
from apps.fleet.models import Team


class Command(BaseCommand):
    help = "Show (and with --record keep) each team's when-to-run hints for its flexible job groups."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="one team, by name (default: every team)")
        parser.add_argument(
            "--at", action="append", default=[], help="as of this time (ISO 8601, UTC without a zone); repeatable"
        )
        parser.add_argument("--record", action="store_true", help="keep them as hints of record")

    def handle(self, *args: object, **options: object) -> None:
        teams = Team.objects.order_by("name")
        if options["team"]:
            teams = teams.filter(name=str(options["team"]))
            if not teams.exists():
                raise CommandError(f"--team {options['team']}: no such team")
        at: list[object] = options["at"] or []  # type: ignore[assignment]
        moments = [utc_time_arg(str(a), "--at", example="2024-06-03T14:00:00Z") for a in at] or [timezone.now()]
        for moment in moments:
            if options["record"]:
                kept = hints_record(now=moment, teams=list(teams))
                self.stdout.write(f"{hour_floor(moment):%Y-%m-%d %H}:00 UTC: {kept} hint(s) kept")
                continue
            for hint in group_hints(teams=list(teams), now=moment):
                self.stdout.write(
                    f"{hint.made_at:%Y-%m-%d %H}:00 UTC {hint.team} / {hint.group} ({hint.zone}): {hint.text} "
                    f"[typical run {hint.run.length_h} h, {hint.run.facility_kwh:.1f} kWh from {hint.run.runs} "
                    f"run(s); {hint.forecast.source}]"
                )
