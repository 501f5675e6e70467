"""A fleet for the jobs' days (apps.rollups.models.JobDay) and what a team's page reads of them: two teams' runs within
one UTC day, across midnights, in a job group and in none, by two users, one excluded from its team's bill, one that
ran in the period with no row in it and one with rows in it though last seen before it; priced with a grid intensity
that moves every hour (floats with every bit used) and derived as the ingest derives them; and what the jobs' days
must be, read from the rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models.functions import TruncDay

from apps.carbon.models import JobGroup
from apps.core.units.aggregates import numeric_sums
from apps.core.units.money import round_minor
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups.models import JobDay, TeamLineDay
from tests.carbon.fleet_builder import HOUR, Fleet, fleet_build, intensity_set, job_run

START = datetime(2026, 11, 29, 20, tzinfo=UTC)  # the runs cross two midnights
DAYS = (date(2026, 11, 29), date(2026, 12, 3))  # every day the runs have rows on, [first, after)

# key: (team, GPUs, first hour from START, hours, name, user)
RUNS: dict[str, tuple[str, tuple[int, ...], int, int, str, str]] = {
    "slurm/long": ("vision", (0, 1), 0, 40, "sweep-long", "ada"),  # three days, in the group
    "slurm/short": ("vision", (2,), 5, 3, "sweep-short", "ada"),  # within Nov 30, in the group
    "slurm/other": ("vision", (2,), 10, 2, "train", "bob"),  # within Nov 30, in no group
    "slurm/twin": ("vision", (1,), 14, 3, "sweep-twin", "ada"),  # within Nov 30, the short run's line
    "slurm/late": ("vision", (3,), 27, 12, "train-late", "bob"),  # across Dec 2's midnight
    "slurm/nlp": ("nlp", (3,), 2, 4, "sweep-nlp", "cy"),  # across Nov 30's midnight, the other team
}


@dataclass
class JobDaysWorld:
    fleet: Fleet
    vision: Team
    nlp: Team
    group: JobGroup
    jobs: dict[str, Job]
    admin: User
    member: User  # of vision


def job_days_world_build() -> JobDaysWorld:
    fleet = fleet_build(servers=1, gpus_per_server=4)
    intensity_set("TEST", [0.3 + 0.013 * (k % 11) for k in range(24 * 5)], start=START - timedelta(days=1))
    vision, nlp = fleet.team, Team.objects.create(name="nlp")
    group = JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep-")
    jobs = {}
    for key, (team, gpus, first, hours, name, user) in RUNS.items():
        job = job_run(fleet, key=key, gpus=[fleet.gpus[g] for g in gpus], hours=hours, power_w=121.7 + first,
                      start=START + first * HOUR)  # fmt: skip
        job.team, job.name, job.user = (nlp if team == "nlp" else vision), name, user
        job.scheduler, job.job_id, job.last_seen = "slurm", key.split("/")[1], job.start + hours * HOUR
        job.save()
        jobs[key] = job
    # a job seen running for an hour on Dec 1 with no row (its agent's metrics lost): no day, no part
    jobs["slurm/empty"] = Job.objects.create(
        cluster=fleet.cluster, job_key="slurm/empty", team=vision, user="dee", name="probe", scheduler="slurm",
        job_id="empty", start=START + 30 * HOUR, last_seen=START + 31 * HOUR, currency="EUR",
    )  # fmt: skip
    with transaction.atomic():  # as the ingest leaves them: groups, footprints, summaries, day sums
        derive(Scope(), changed={Fact.GROUP_RULES, Fact.FACTORS, Fact.SCHEDULER})
    for job in jobs.values():
        job.refresh_from_db()
    admin = User.objects.create_user("root", is_staff=True)
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=vision)
    return JobDaysWorld(fleet, vision, nlp, group, jobs, admin, member)


def stored_days() -> dict[tuple[int, date], tuple[Any, ...]]:
    """Each job's stored days: its lines and its sums as kept."""
    return {
        (d.job_id, d.day): (d.team_id, d.cluster_id, d.user, d.job_group_id, d.billed, d.currency, d.within_day,
                            d.cost_booked, d.energy_j, d.occupancy_s, d.server_kwh, d.facility_kwh, d.operational_kg,
                            d.embodied_kg, d.cost)
        for d in JobDay.objects.all()
    }  # fmt: skip


def days_from_rows() -> dict[tuple[int, date], tuple[Any, ...]]:
    """What each job's days must be, read now from its rows (summed exactly, numeric, as the footprints' sums are)
    and its own fields."""
    jobs = Job.objects.in_bulk()
    rows = (
        JobGpuHour.objects.annotate(day=TruncDay("hour", tzinfo=UTC))
        .values("job_id", "gpu__node__cluster_id", "day")
        .annotate(**numeric_sums())
        .order_by()
    )
    out = {}
    for r in rows:
        job, day = jobs[r["job_id"]], r["day"].date()
        within = job.first_day == day == job.last_day
        booked = round_minor(Decimal(r["cost"]), job.currency) if within else None
        out[(job.pk, day)] = (
            job.team_id, r["gpu__node__cluster_id"], job.user, job.job_group_id, not job.excluded_from_bill,
            job.currency, within, booked, r["energy_j"], r["occupancy_s"], r["server_kwh"], r["facility_kwh"],
            r["operational_kg"], r["embodied_kg"], r["cost"],
        )  # fmt: skip
    return out


def stored_lines() -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """The teams' stored lines of their jobs within one day (TeamLineDay): their counts and sums as kept."""
    return {
        (d.team_id, d.cluster_id, d.day, d.user, d.job_group_id, d.currency): (
            d.jobs, d.cost_booked, d.energy_j, d.occupancy_s, d.server_kwh, d.facility_kwh, d.operational_kg,
            d.embodied_kg, d.cost,
        )
        for d in TeamLineDay.objects.all()
    }  # fmt: skip


def lines_from_days(days: dict[tuple[int, date], tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """What the teams' lines must be: the days of the jobs on a bill within one day, added up per team, cluster,
    day, user, job group and currency (a sum of no known value is none, as SQL's)."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    for (_, day), v in days.items():
        team, cluster, user, group, billed, currency, within, booked, *sums = v
        if not (within and billed):
            continue
        line = out.setdefault((team, cluster, day, user, group, currency), [0, Decimal(0)] + [None] * len(sums))
        line[0] += 1
        line[1] += booked
        for k, value in enumerate(sums, start=2):
            if value is not None:
                line[k] = value if line[k] is None else line[k] + value
    return {key: tuple(v) for key, v in out.items()}
