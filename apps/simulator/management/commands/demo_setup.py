"""python manage.py demo_setup: the demo's cluster, teams, rules and logins (idempotent)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from apps.fleet.models import Cluster, Team, TeamMembership, TeamRule

TEAMS = {
    "vision": [("slurm_account", "vision")],
    "nlp": [("slurm_account", "nlp")],
    "bio": [("slurm_account", "bio")],
    "search": [("k8s_namespace", "search")],
    "ads": [("k8s_namespace", "ads")],
}


class Command(BaseCommand):
    help = "Create the demo's cluster, teams and rules, an admin and a team member."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prometheus-url", default=settings.FLEETWATT_PROMETHEUS_URL)
        parser.add_argument("--scrape-interval", type=int, default=60)

    @transaction.atomic
    def handle(self, *args: object, **options: object) -> None:
        Cluster.objects.update_or_create(
            name=settings.FLEETWATT_CLUSTER,
            defaults={"prometheus_url": options["prometheus_url"], "scrape_interval_s": options["scrape_interval"]},
        )
        for name, rules in TEAMS.items():
            team, _ = Team.objects.get_or_create(name=name, defaults={"display_name": name.capitalize()})
            for kind, value in rules:
                TeamRule.objects.get_or_create(cluster=None, kind=kind, value=value, defaults={"team": team})
        User = get_user_model()
        admin, _ = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        admin.set_password("fleetwatt-admin")
        admin.save()
        ada, _ = User.objects.get_or_create(username="ada")
        ada.set_password("fleetwatt-demo")
        ada.save()
        TeamMembership.objects.get_or_create(user=ada, team=Team.objects.get(name="vision"))
        self.stdout.write("demo cluster, teams and logins ready")
