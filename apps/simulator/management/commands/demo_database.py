"""python manage.py demo_database [--reset]: the demo's own database (apps/simulator/demo_database.py)."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.simulator.demo_database import NotTheDemoDatabase, database_named, demo_database_ensure


class Command(BaseCommand):
    help = (
        "Create DATABASE_URL's database when it does not exist, marked as the demo's own; refuse any database "
        "the demo did not create. With --reset, migrate it and empty it (what `make demo` does first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reset", action="store_true", help="migrate, then empty every table")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            created = demo_database_ensure()
        except NotTheDemoDatabase as exc:
            raise CommandError(str(exc)) from exc
        if options["reset"]:
            call_command("migrate", verbosity=0)
            call_command("flush", interactive=False, verbosity=0)
        what = "created" if created else "the demo's own"
        self.stdout.write(f"{database_named()}: {what}{', migrated and emptied' if options['reset'] else ''}")
