"""python manage.py apply_config FILE [--dry-run]: the fleet config (docs/config.md), validated as a whole,
then applied in one transaction (idempotent)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.config.parse import config_load
from apps.config.selectors import known_names_read
from apps.config.types import ConfigError
from apps.pipeline.inputs import config_apply


class Command(BaseCommand):
    help = "Apply a fleet config file: sites, server types, GPU models, clusters and nodes, teams, job groups."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the YAML file (docs/config.md)")
        parser.add_argument("--dry-run", action="store_true", help="validate and report the changes, write nothing")

    def handle(self, *args: object, **options: object) -> None:
        path = options["file"]
        assert isinstance(path, Path)
        limit = settings.FLEETWATT_CONFIG_MAX_BYTES
        try:
            if (size := path.stat().st_size) > limit:  # before reading it into memory
                raise CommandError(
                    f"{path}: {size:,} bytes; a config is at most {limit:,} (FLEETWATT_CONFIG_MAX_BYTES)"
                )
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it: {exc}") from None
        try:
            config = config_load(text, known=known_names_read(), max_bytes=limit)
            report = config_apply(config=config, dry_run=bool(options["dry_run"]))
        except ConfigError as exc:
            raise CommandError(f"{path}: {exc}\nNothing was written.") from None
        for line in report.lines():
            self.stdout.write(line)
        if report.dry_run:
            self.stdout.write("dry run: nothing was written")
        elif not report.changed:
            self.stdout.write("nothing to change")
