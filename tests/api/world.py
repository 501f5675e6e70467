"""Two teams and every role, for the access tests: team A (vision) has a member and a lead; team B (nlp) owns
the objects the tests ask for, so that a member or lead of A gets 404 for them; finance, an admin, and a
logged-in user in no team."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token

from apps.carbon.models import JobGroup
from apps.core.access.policy import FINANCE_GROUP
from apps.core.models import ApiToken
from apps.fleet.models import Cluster, Gpu, Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.reports.models import ReportRecipient, WeeklyReport
from apps.waste.models import Flag
from tests.carbon.fleet_builder import T0, fleet_build, intensity_set, job_run

ROLES = ("anonymous", "member", "lead", "finance", "admin", "nobody")


@dataclass
class World:
    users: dict[str, User]  # every role but anonymous
    team_a: Team
    team_b: Team
    job_a: Job
    job_b: Job
    flag_a: Flag
    flag_b: Flag
    gpu_b: Gpu  # the GPU job B ran on
    cluster: Cluster
    group: JobGroup
    report_b: WeeklyReport
    recipient_b: ReportRecipient
    finance_token: ApiToken
    finance_key: str  # the named API token's key (Bearer)
    finance_drf_key: str  # DRF's own token of the finance user (Token)


def world_build() -> World:
    fleet = fleet_build(servers=1, gpus_per_server=2)
    intensity_set("TEST", [0.3] * 24)
    team_a = fleet.team
    team_b = Team.objects.create(name="nlp")
    group = JobGroup.objects.create(name="campaign", match_kind="name_prefix", match_value="campaign")
    job_a = job_run(fleet, key="slurm/a", gpus=fleet.gpus[:1], hours=2, power_w=500)
    job_b = job_run(fleet, key="slurm/b", gpus=fleet.gpus[1:2], hours=2, power_w=500)
    job_b.scheduler, job_b.job_id = "slurm", "b"  # found by its scheduler id too (/jobs/slurm/b/)
    job_b.save(update_fields=["scheduler", "job_id"])
    job_b.team = team_b
    job_b.job_group = group  # team B's run of the campaign: its frontier is for those who see team B
    job_b.save()
    footprints_recompute()
    flag_a = Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=job_a)
    flag_b = Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=job_b)
    users = {
        "member": User.objects.create_user("member", password="pw-member"),
        "lead": User.objects.create_user("lead", password="pw-lead"),
        "finance": User.objects.create_user("finance", password="pw-finance"),
        "admin": User.objects.create_user("admin", password="pw-admin", is_staff=True),
        "nobody": User.objects.create_user("nobody", password="pw-nobody"),
    }
    TeamMembership.objects.create(user=users["member"], team=team_a, role="member")
    TeamMembership.objects.create(user=users["lead"], team=team_a, role="lead")
    users["finance"].groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    report_b = WeeklyReport.objects.create(team=team_b, week_start=T0.date(), status=WeeklyReport.Status.SENT)
    recipient_b = ReportRecipient.objects.create(team=team_b, email="nlp-lead@example.org")
    token, key = ApiToken.issue(user=users["finance"], name="ERP export")
    return World(
        users=users, team_a=team_a, team_b=team_b, job_a=job_a, job_b=job_b, flag_a=flag_a, flag_b=flag_b,
        gpu_b=fleet.gpus[1], cluster=fleet.cluster, group=group, report_b=report_b, recipient_b=recipient_b,
        finance_token=token, finance_key=key, finance_drf_key=Token.objects.create(user=users["finance"]).key,
    )  # fmt: skip
