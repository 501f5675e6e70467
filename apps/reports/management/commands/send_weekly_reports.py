"""python manage.py send_weekly_reports [--week YYYY-MM-DD] [--team NAME] [--dry-run]"""

from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apps.fleet.models import Team
from apps.reports.schedule import week_monday
from apps.reports.selectors import due_teams
from apps.reports.services import due_week, report_preview, team_addressees, weekly_reports_send
from apps.rollups.selectors import MixedBasisError


def _week(value: str) -> date:
    try:
        day = date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{value!r} is not a date such as 2026-11-02.") from None
    if day.weekday() != 0:
        raise CommandError(f"{value} is a {day:%A}: a report week starts on Monday ({week_monday(day)}).")
    return day


class Command(BaseCommand):
    help = (
        "Send the weekly waste reports that are due (or those of --week), each at most once per team and "
        "week, then the admins' fleet summary. --dry-run builds and prints them without sending."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--week", type=_week, default=None, help="Monday the week began (default: the due week)")
        parser.add_argument("--team", default=None, help="team name (default: every team with recipients)")
        parser.add_argument("--dry-run", action="store_true", help="build and print; claim and send nothing")

    def handle(self, *args: object, **options: object) -> None:
        week = options["week"]
        team_name = options["team"]
        if team_name is not None and not Team.objects.filter(name=team_name).exists():
            raise CommandError(f"No team named {team_name!r}.")
        if options["dry_run"]:
            self._dry_run(week, team_name)  # type: ignore[arg-type]
            return
        lines = weekly_reports_send(now=timezone.now(), week_start=week, team_name=team_name)  # type: ignore[arg-type]
        if not lines:
            self.stdout.write("No team has active recipients.")
        for line in lines:
            self.stdout.write(f"{line.label} week of {line.week_start}: {line.outcome} ({line.delivered} delivered)")

    def _dry_run(self, week: date | None, team_name: str | None) -> None:
        teams = [t for t in due_teams() if team_name is None or t.name == team_name]
        if team_name is not None and not teams:
            teams = list(Team.objects.filter(name=team_name))
        for team in teams:
            start = week or due_week(now=timezone.now(), team=team)
            try:
                _doc, rendered = report_preview(team=team, week_start=start)
            except MixedBasisError as exc:
                self.stdout.write(f"{team.name} week of {start}: cannot be built: {exc}")
                continue
            to = ", ".join(a.email for a in team_addressees(team)) or "nobody (no active recipient)"
            self.stdout.write(f"--- {team.name} week of {start}, to {to}\nSubject: {rendered.subject}\n")
            self.stdout.write(rendered.text)
