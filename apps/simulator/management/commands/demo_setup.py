"""python manage.py demo_setup: the demo cluster's Prometheus and scheduler, the local Slurm's cluster, and the
demo logins (idempotent). Only on the demo's own database, with DEBUG on (apps/simulator/demo_database.py): the
logins' passwords are public.

The demo cluster's accounting is the simulated one (`manage.py simulate_sacct`, apps/simulator/sacct.py) of the
scenario the history was simulated from, anchored where `simulate --start` was: its `sacct_command` runs this
checkout's python and manage.py by absolute path, so the worker finds it from any directory. The local Slurm
(scripts/slurm.sh) is a second, small cluster whose `sacct_command` is the real sacct with its SLURM_CONF."""

from __future__ import annotations

import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from apps.core.access.policy import FINANCE_GROUP
from apps.core.web.command_args import aware_time_arg
from apps.fleet.models import Cluster, Team, TeamMembership, TeamRule
from apps.reports.models import ReportRecipient
from apps.simulator.demo_database import NotTheDemoDatabase, demo_database_check

LOCAL_SLURM_CLUSTER = "slurm-local"
LOCAL_SLURM_ACCOUNT = "fwteam"  # scripts/slurm.sh's account; its jobs are vision's in the demo


def simulated_sacct_command(*, scenario: str, scenario_start: datetime) -> str:
    """The demo cluster's `sacct_command`: this checkout's python and manage.py, by absolute path (the venv's
    python as it was started, not resolved: resolving it would leave the venv)."""
    scenario_arg = str(Path(scenario).absolute()) if Path(scenario).exists() else scenario
    return shlex.join(
        [
            str(Path(sys.executable).absolute()),
            str(Path(settings.BASE_DIR, "manage.py").absolute()),
            "simulate_sacct",
            "--scenario",
            scenario_arg,
            "--scenario-start",
            scenario_start.isoformat().replace("+00:00", "Z"),
        ]
    )


def local_slurm_register(*, slurm_conf: Path, prometheus_url: str, like: Cluster) -> Cluster:
    """The local Slurm as a second cluster: its accounting through the real sacct (`env SLURM_CONF=... sacct`:
    no shell, and the worker needs no SLURM_CONF of its own), at the demo's site; on the demo's Prometheus
    with a selector no series has, since nothing exports its GPUs' energy (its GPUs are stand-in files). Its
    account's jobs are vision's, so that ada sees what she submits."""
    cluster, _ = Cluster.objects.update_or_create(
        name=LOCAL_SLURM_CLUSTER,
        defaults={
            "prometheus_url": prometheus_url,
            "selector": f'cluster="{LOCAL_SLURM_CLUSTER}"',
            "scrape_interval_s": like.scrape_interval_s,
            "site": like.site,
            "scheduler": Cluster.Scheduler.SLURM_SACCT,
            "sacct_command": shlex.join(["env", f"SLURM_CONF={slurm_conf}", "sacct"]),
        },
    )
    vision = Team.objects.filter(name="vision").first()
    if vision is not None:
        TeamRule.objects.update_or_create(
            cluster=cluster, kind=TeamRule.Kind.SLURM_ACCOUNT, value=LOCAL_SLURM_ACCOUNT, defaults={"team": vision}
        )
    return cluster


class Command(BaseCommand):
    help = (
        "Point the demo cluster at its Prometheus; create an admin, a team member and a finance user "
        "(the fleet itself comes from apply_config demo-fleet.yaml)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prometheus-url", default=settings.FLEETWATT_PROMETHEUS_URL)
        parser.add_argument("--scrape-interval", type=int, default=60)
        parser.add_argument("--scenario", default="demo", help="the scenario the history was simulated from")
        parser.add_argument(
            "--scenario-start",
            help="where the history was anchored (ISO 8601 with zone; what `simulate --start` got): the demo "
            "cluster's accounting is then the simulated sacct of that scenario; left out: no scheduler",
        )
        parser.add_argument(
            "--local-slurm-conf",
            help="the local Slurm's slurm.conf (scripts/slurm.sh env): registers the cluster "
            f"{LOCAL_SLURM_CLUSTER!r}, read with the real sacct",
        )

    @transaction.atomic
    def handle(self, *args: object, **options: Any) -> None:
        try:
            demo_database_check()
        except NotTheDemoDatabase as exc:
            raise CommandError(str(exc)) from exc
        defaults: dict[str, Any] = {
            "prometheus_url": options["prometheus_url"],
            "scrape_interval_s": options["scrape_interval"],
        }
        if options["scenario_start"]:
            defaults |= {
                "scheduler": Cluster.Scheduler.SLURM_SACCT,
                "kube_pods": True,  # its Kubernetes nodes' pods, from the simulator's kube-state-metrics series
                "sacct_command": simulated_sacct_command(
                    scenario=options["scenario"],
                    scenario_start=aware_time_arg(options["scenario_start"], "--scenario-start"),
                ),
            }
        demo, _ = Cluster.objects.update_or_create(name=settings.FLEETWATT_CLUSTER, defaults=defaults)
        if options["local_slurm_conf"]:
            local_slurm_register(
                slurm_conf=Path(options["local_slurm_conf"]).absolute(),
                prometheus_url=options["prometheus_url"],
                like=demo,
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
