"""A team lead's period to read: jobs of several users and job groups, ending every way, one before the period and one
after it, one excluded from the bill, one idle and failed (two findings on the same GPU-hours), many small ones for
the pages; and another team. Built once per test module (`team_home_world` fixture)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth.models import Group, User
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import Fact, Scope, derive
from tests.carbon.fleet_builder import HOUR, T0, Fleet, fleet_build, intensity_set, job_run

PERIOD = {"start": "2026-11-02", "end": "2026-11-04"}
PERIOD_START, PERIOD_END = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC)
SMALL_JOBS = 52  # erin's one-hour jobs: more than a page

# key: (team, user, name, state, first GPU, GPUs, hours, start, busy, excluded from the bill)
RUNS = {
    # from the day before the period, idle on whole GPUs, then failed: an idle allocation and a failed run
    "slurm/1": ("vision", "ada", "sweep-a", "failed", 0, 2, 30, T0 - 6 * HOUR, False, False),
    "slurm/2": ("vision", "ada", "sweep-b", "completed", 2, 1, 5, T0 + 2 * HOUR, True, False),
    "slurm/3": ("vision", "bob", "eval-1", "completed", 3, 1, 3, T0 + 1 * HOUR, True, False),  # in no group
    "slurm/4": ("vision", "bob", "sweep-c", "running", 3, 1, 20, T0 + 40 * HOUR, True, False),  # past the end
    "slurm/5": ("vision", "", "", "unknown", 4, 1, 2, T0 + 3 * HOUR, True, False),  # no user known
    "slurm/6": ("vision", "carol", "sweep-d", "failed", 5, 1, 4, T0 + 5 * HOUR, False, True),  # off the bill
    "slurm/7": ("nlp", "dan", "sweep-e", "completed", 4, 1, 6, T0 + 20 * HOUR, True, False),
}


@dataclass
class TeamHomeWorld:
    fleet: Fleet
    vision: Team
    nlp: Team
    group: JobGroup
    jobs: dict[str, Job]
    lead: User  # of vision
    stranger: User  # a member of nlp only
    finance: User


def team_home_world_build() -> TeamHomeWorld:
    fleet = fleet_build(servers=1, gpus_per_server=8)
    intensity_set("TEST", [0.3] * 24 * 4, start=T0 - 24 * HOUR)
    vision, nlp = fleet.team, Team.objects.create(name="nlp", display_name="Language")
    vision.display_name = "Vision"
    vision.save()
    group = JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep-")
    runs = dict(RUNS)
    for k in range(SMALL_JOBS):  # on the last two GPUs, an hour each
        runs[f"slurm/1{k:02d}"] = ("vision", "erin", f"probe-{k}", "completed", 6 + k % 2, 1, 1,
                                    T0 + (k // 2) * HOUR, True, False)  # fmt: skip
    jobs: dict[str, Job] = {}
    for key, (team, user, name, state, first, gpus, hours, start, busy, excluded) in runs.items():
        # 121.7 W: costs with remainders under the cent, so that rounding each job matters
        job = job_run(fleet, key=key, gpus=fleet.gpus[first : first + gpus], hours=hours, power_w=121.7, start=start)
        job.team = nlp if team == "nlp" else vision
        job.user, job.name, job.state, job.excluded_from_bill = user, name, state, excluded
        job.exit_code, job.signal = (1 if state == "failed" else 0), 0
        job.scheduler, job.job_id, job.display_id = "slurm", key.split("/")[1], key.split("/")[1]
        job.last_seen = start + hours * HOUR
        job.scheduler_start, job.scheduler_seen_at = start, job.last_seen
        job.scheduler_end = None if state == "running" else job.last_seen
        job.save()
        if busy:
            JobGpuHour.objects.filter(job=job).update(sm_s=3000.0)
        jobs[key] = job
    with transaction.atomic():  # as the ingest and the sync leave them: groups, footprints, findings, daily sums
        derive(Scope(), changed={Fact.GROUP_RULES, Fact.FACTORS, Fact.SCHEDULER})
    for job in jobs.values():
        job.refresh_from_db()
    lead = User.objects.create_user("lin", password="pw-lin")
    TeamMembership.objects.create(user=lead, team=vision, role=TeamMembership.Role.LEAD)
    stranger = User.objects.create_user("sam", password="pw-sam")
    TeamMembership.objects.create(user=stranger, team=nlp)
    finance = User.objects.create_user("fin", password="pw-fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return TeamHomeWorld(fleet, vision, nlp, group, jobs, lead, stranger, finance)
