"""python manage.py demo_setup: the demo cluster's Prometheus and the demo logins (idempotent). Only on the
demo's own database, with DEBUG on (apps/simulator/demo_database.py): the logins' passwords are public."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from apps.core.access import FINANCE_GROUP
from apps.fleet.models import Cluster, Team, TeamMembership
from apps.reports.models import ReportRecipient
from apps.simulator.demo_database import NotTheDemoDatabase, demo_database_check


class Command(BaseCommand):
    help = (
        "Point the demo cluster at its Prometheus; create an admin, a team member and a finance user "
        "(the fleet itself comes from apply_config demo-fleet.yaml)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prometheus-url", default=settings.FLEETWATT_PROMETHEUS_URL)
        parser.add_argument("--scrape-interval", type=int, default=60)

    @transaction.atomic
    def handle(self, *args: object, **options: Any) -> None:
        try:
            demo_database_check()
        except NotTheDemoDatabase as exc:
            raise CommandError(str(exc)) from exc
        Cluster.objects.update_or_create(
            name=settings.FLEETWATT_CLUSTER,
            defaults={"prometheus_url": options["prometheus_url"], "scrape_interval_s": options["scrape_interval"]},
        )
        User = get_user_model()
        admin, _ = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        admin.set_password("fleetwatt-admin")
        admin.save()
        ada, _ = User.objects.get_or_create(username="ada")
        ada.set_password("fleetwatt-demo")
        ada.save()
        TeamMembership.objects.get_or_create(user=ada, team=Team.objects.get(name="vision"))
        finance, _ = User.objects.get_or_create(username="fin")
        finance.set_password("fleetwatt-finance")
        finance.save()
        finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
        # Weekly reports: the default email backend prints them to the worker's log (var/log/worker.log).
        admin.email = "admin@example.org"
        admin.save()
        for team in Team.objects.exclude(name=Team.UNASSIGNED):
            ReportRecipient.objects.get_or_create(team=team, email=f"{team.name}-leads@example.org")
        self.stdout.write("demo cluster, teams and logins ready")
