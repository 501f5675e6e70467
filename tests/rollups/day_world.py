"""A small fleet for the rollups' module tests, written row by row (no derivation, so every figure is known): one
site in EUR, one cluster of two GPUs, two teams and a job group; jobs whose job-GPU-hours carry a cost with a
remainder under the cent, one of them across midnight and one excluded from its team's bill; each GPU-hour of a job
wholly the job's, and GPU-hours with no job (an idle line, part of it nobody saw); and the daily sums rebuilt from
them (apps.rollups.services.day_sums_refresh), as the derivation leaves them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth.models import Group, User

from apps.carbon.models import JobGroup
from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Cluster, Gpu, Team
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.rollups.services import day_sums_refresh
from apps.telemetry.models import GpuHour
from tests.factories import (
    ClusterFactory,
    GpuFactory,
    JobFactory,
    JobGroupFactory,
    NodeFactory,
    SiteFactory,
    TeamFactory,
    TeamMembershipFactory,
    UserFactory,
)

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday, midnight UTC
HOUR = timedelta(hours=1)
DAY1, DAY2 = date(2026, 11, 2), date(2026, 11, 3)
START, END = T0, T0 + timedelta(days=2)  # the world's two whole UTC days
ROW_J = 500.0 * 3600  # a GPU at 500 W for an hour
IDLE_J = 75.0 * 3600  # an idle GPU for an hour

# key: (team, GPU, first hour from T0, hours, each row's cost, in the job group, excluded from its team's bill, state)
RUNS: dict[str, tuple[str, int, int, int, str, bool, bool, str]] = {
    "v-within": ("vision", 0, 1, 3, "0.333333", True, False, "completed"),  # 0.999999: 1.00
    "v-across": ("vision", 1, 22, 4, "0.333333", False, False, "failed"),  # 1.333332: 1.33, two hours each day
    "v-excluded": ("vision", 0, 5, 1, "1.000000", False, True, "completed"),
    "n-within": ("nlp", 1, 2, 1, "0.125000", True, False, "failed"),  # 0.125: 0.12, half to even
}
# GPU-hours with no job (GPU, hour from T0): the idle line; the first one's agent missed half of it.
IDLE_HOURS = ((0, 0), (1, 0), (0, 30))
IDLE_COST = Decimal("0.015000")
UNSEEN_COST = Decimal("0.005000")


@dataclass
class DayWorld:
    cluster: Cluster
    gpus: list[Gpu]
    vision: Team
    nlp: Team
    group: JobGroup
    jobs: dict[str, Job]
    member: User  # of vision
    finance: User


def finance_user(username: str = "fin") -> User:
    user = UserFactory(username=username)
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return user


def day_world_build() -> DayWorld:
    site = SiteFactory(name="site-a", grid_zone="DE", intensity_basis="location", currency="EUR")
    cluster = ClusterFactory(name="c1", site=site)
    node = NodeFactory(cluster=cluster)
    gpus = [GpuFactory(node=node, index=0), GpuFactory(node=node, index=1)]
    vision, nlp = TeamFactory(name="vision"), TeamFactory(name="nlp")
    group = JobGroupFactory(name="sweeps")
    teams = {"vision": vision, "nlp": nlp}
    jobs: dict[str, Job] = {}
    rows, energy, gpu_hours = [], [], []
    for key, (team, gpu, first, hours, cost, grouped, excluded, state) in RUNS.items():
        start = T0 + first * HOUR
        job = JobFactory(
            cluster=cluster, team=teams[team], job_key=f"slurm/{key}", user=f"user-{key}", state=state,
            job_group=group if grouped else None, excluded_from_bill=excluded, start=start,
            last_seen=start + hours * HOUR, end=start + hours * HOUR, first_day=start.date(),
            last_day=(start + (hours - 1) * HOUR).date(), cost=Decimal(cost) * hours, energy_j=ROW_J * hours,
            gpu_hours=float(hours), currency="EUR",
        )  # fmt: skip
        jobs[key] = job
        for h in range(hours):
            hour = start + h * HOUR
            rows.append(JobGpuHour(job=job, gpu=gpus[gpu], hour=hour, source="agent", energy_j=ROW_J,
                                   sampled_s=3600.0, occupancy_s=3600.0, facility_kwh=0.6, operational_kg=0.18,
                                   embodied_kg=0.01, cost=Decimal(cost)))  # fmt: skip
            energy.append(JobGpuHourEnergy(job=job, gpu=gpus[gpu], hour=hour, method="whole_gpu", energy_j=ROW_J))
            gpu_hours.append(GpuHour(gpu=gpus[gpu], hour=hour, source="agent", device_energy_j=ROW_J,
                                     agent_energy_j=ROW_J, jobs_energy_j=ROW_J, sampled_s=3600.0,
                                     occupied_s=3600.0))  # fmt: skip
    for k, (gpu, h) in enumerate(IDLE_HOURS):
        unseen = k == 0
        gpu_hours.append(GpuHour(
            gpu=gpus[gpu], hour=T0 + h * HOUR, source="agent", device_energy_j=IDLE_J, agent_energy_j=IDLE_J,
            idle_energy_j=IDLE_J, sampled_s=1800.0 if unseen else 3600.0, idle_facility_kwh=0.025,
            idle_operational_kg=0.0075, idle_embodied_kg=0.01, idle_cost=IDLE_COST,
            unseen_j=IDLE_J / 2 if unseen else 0.0, unseen_s=1800.0 if unseen else 0.0,
            unseen_facility_kwh=0.0125 if unseen else 0.0, unseen_operational_kg=0.00375 if unseen else None,
            unseen_embodied_kg=0.005 if unseen else 0.0, unseen_cost=UNSEEN_COST if unseen else Decimal(0),
        ))  # fmt: skip
    JobGpuHour.objects.bulk_create(rows)
    JobGpuHourEnergy.objects.bulk_create(energy)
    GpuHour.objects.bulk_create(gpu_hours)
    day_sums_refresh(cluster_ids=[cluster.pk], days=[DAY1, DAY2])
    member = UserFactory(username="ada")
    TeamMembershipFactory(user=member, team=vision)
    return DayWorld(cluster, gpus, vision, nlp, group, jobs, member, finance_user())
