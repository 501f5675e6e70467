"""A small fleet for the fleet page's tests, built once per module (`module_world`): two clusters, two teams, four
GPUs over two hours, waste findings, a low-coverage job, a cluster whose scheduler sync fails, a GPU with no energy
meter, and each role.

c1 (site, EUR): GPU 0 runs vision's job A (2 h, 500 W), GPU 1 nlp's job B (2 h, 500 W), GPU 2 vision's job C (1 h at
300 W, half seen: coverage 50 %, its GPU held half the hour), GPU 3 idles (2 h, 75 W). Each job-GPU-hour costs
2.50 EUR. Findings: a memory hog on A (open), an idle allocation on B (open), a memory hog on B acknowledged (not
counted). c1 is ingested through T0 + 2 h; c2 never, and its Slurm accounting fails. The daily sums are built from
the rows, as the derivation builds them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, TypeVar

from django.contrib.auth.models import Group, User
from django.db import transaction

from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Cluster, Gpu, Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour
from apps.rollups.services import day_sums_refresh
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from apps.waste.models import Flag
from tests.carbon.fleet_builder import T0, fleet_build, idle_hours, job_run

HOUR = timedelta(hours=1)
PERIOD = {"start": "2026-11-02", "end": "2026-11-03"}
COST_PER_ROW = Decimal("2.50")
W = TypeVar("W")


def module_world(django_db_blocker: Any, build: Callable[[], W]) -> Iterator[W]:
    """`build()`'s rows for every test of a module, rolled back after the last: each test's own transaction (its
    `django_db` mark) nests inside, so what a test adds goes with it."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield build()
        transaction.set_rollback(True)


@dataclass
class FleetWorld:
    c1: Cluster
    c2: Cluster
    gpus: list[Gpu]
    vision: Team
    nlp: Team
    jobs: dict[str, Job]
    admin: User
    finance: User
    member: User  # of vision


def fleet_world_build() -> FleetWorld:
    fleet = fleet_build(name="c1", servers=1, gpus_per_server=4)
    vision, nlp = fleet.team, Team.objects.create(name="nlp")
    g = fleet.gpus
    jobs = {
        "a": job_run(fleet, key="slurm/a", gpus=[g[0]], hours=2, power_w=500),
        "b": job_run(fleet, key="slurm/b", gpus=[g[1]], hours=2, power_w=500),
        "c": job_run(fleet, key="slurm/c", gpus=[g[2]], hours=1, power_w=300),
    }
    idle_hours(fleet, gpus=[g[3]], hours=2)
    JobGpuHour.objects.update(cost=COST_PER_ROW)
    JobGpuHour.objects.filter(job=jobs["c"]).update(sampled_s=1800, occupancy_s=1800)
    GpuHour.objects.filter(gpu=g[2]).update(occupied_s=1800)
    Job.objects.filter(pk=jobs["b"].pk).update(team=nlp)
    Job.objects.update(currency="EUR", last_seen=T0 + 2 * HOUR, sampled_s=7200, expected_s=7200, coverage=1.0)
    Job.objects.filter(pk=jobs["c"].pk).update(sampled_s=1800, expected_s=3600, coverage=0.5)
    Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=jobs["a"])
    Flag.objects.create(kind="idle_allocation", cluster=fleet.cluster, job=jobs["b"])
    Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=jobs["b"], status="acknowledged")
    failing = {"scheduler": "slurm_sacct", "scheduler_status": "sacct: command not found"}
    c2 = Cluster.objects.create(name="c2", prometheus_url="http://127.0.0.1:9", **failing)
    IngestWatermark.objects.create(cluster=fleet.cluster, ingested_through=T0 + 2 * HOUR)
    IngestedHour.objects.create(
        cluster=fleet.cluster,
        hour=T0 + HOUR,
        stats={"no_energy_meter": [{"uuid": "GPU-vgpu-1", "hostname": "c1-n0", "missing": ["energy"]}]},
    )
    admin = User.objects.create_user("admin", password="pw", is_staff=True)
    finance = User.objects.create_user("finance", password="pw")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    member = User.objects.create_user("member", password="pw")
    TeamMembership.objects.create(user=member, team=vision, role="member")
    # The jobs' days and the daily sums, as the derivation leaves them (the pages read the jobs' and the GPUs' days).
    Job.objects.update(first_day=T0.date(), last_day=T0.date())
    day_sums_refresh(cluster_ids=[fleet.cluster.pk], days=[T0.date()])
    for job in jobs.values():
        job.refresh_from_db()
    return FleetWorld(
        c1=fleet.cluster, c2=c2, gpus=g, vision=vision, nlp=nlp, jobs=jobs, admin=admin, finance=finance, member=member
    )
