"""A fleet whose jobs ended every way, in two teams and a job group, with their footprints, findings and the
scheduler's records: for the job-group split, the failed-run tables and the pages that show them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import Group, User
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.core.access.policy import FINANCE_GROUP
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.derive import Fact, Scope, derive
from tests.carbon.fleet_builder import HOUR, T0, Fleet, fleet_build, intensity_set, job_run

PERIOD = {"start": "2026-11-02", "end": "2026-11-04"}

# key: (team, state, exit code, signal, GPUs, hours, start hour, name)
RUNS = {
    "slurm/11": ("vision", "completed", 0, 0, 2, 6, 0, "sweep-a"),
    "slurm/12": ("vision", "failed", 3, 0, 1, 4, 1, "sweep-b"),
    "slurm/13": ("vision", "timeout", 0, 0, 1, 5, 2, "sweep-c"),
    "slurm/14": ("vision", "cancelled", 0, 0, 1, 2, 3, "sweep-d"),
    "slurm/15": ("vision", "running", None, None, 1, 3, 20, "sweep-e"),
    "slurm/21": ("nlp", "out_of_memory", None, 125, 2, 3, 4, "sweep-f"),
    "slurm/22": ("nlp", "preempted", 0, 0, 1, 2, 5, "sweep-g"),
    "slurm/23": ("nlp", "completed", 0, 0, 1, 8, 6, "sweep-h"),
    "slurm/31": ("vision", "failed", 1, 0, 1, 2, 7, "other-x"),  # in no group
    "k8s/search/p": ("vision", "unknown", None, None, 1, 2, 8, "sweep-i"),  # no scheduler record
}


@dataclass
class OutcomesWorld:
    fleet: Fleet
    vision: Team
    nlp: Team
    group: JobGroup
    jobs: dict[str, Job]
    member: User  # of vision
    finance: User
    admin: User


def outcomes_world_build() -> OutcomesWorld:
    fleet = fleet_build(servers=2, gpus_per_server=8)
    intensity_set("TEST", [0.3] * 48)
    vision = fleet.team
    nlp = Team.objects.create(name="nlp")
    group = JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep-")
    jobs: dict[str, Job] = {}
    gpu = 0
    for key, (team, state, code, signal, gpus, hours, start_h, name) in RUNS.items():
        job = job_run(fleet, key=key, gpus=fleet.gpus[gpu : gpu + gpus], hours=hours, power_w=500,
                      start=T0 + start_h * HOUR)  # fmt: skip
        gpu += gpus
        job.team = nlp if team == "nlp" else vision
        job.name, job.state, job.exit_code, job.signal = name, state, code, signal
        job.scheduler, job.job_id = key.split("/")[0], key.split("/")[-1]
        job.last_seen = job.start + hours * HOUR
        if state != "unknown":
            job.partition, job.qos, job.display_id = "gpu", "normal", job.job_id
            job.submitted_at, job.scheduler_start = job.start - timedelta(minutes=1), job.start
            job.scheduler_end = None if state == "running" else job.last_seen
            job.gpus_requested = job.gpus_allocated = gpus
            job.node_list = "c1-n0"
            job.scheduler_seen_at = T0 + 30 * HOUR
        job.save()
        jobs[key] = job
    with transaction.atomic():  # as the ingest and the sync leave them: groups, footprints, findings
        derive(Scope(), changed={Fact.GROUP_RULES, Fact.FACTORS, Fact.SCHEDULER})
    for job in jobs.values():
        job.refresh_from_db()
    member = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=member, team=vision)
    finance = User.objects.create_user("fin", password="pw-fin")
    finance.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    admin = User.objects.create_user("root", password="pw-root", is_staff=True)
    return OutcomesWorld(fleet, vision, nlp, group, jobs, member, finance, admin)
