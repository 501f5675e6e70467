"""A priced fleet with two weeks of work and waste, its users and recipients, and a real SMTP server
(aiosmtpd) on a free port that the test's Django sends to."""

from __future__ import annotations

import email
import email.policy
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User

from apps.fleet.models import Gpu, Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline.inputs import footprints_recompute
from apps.reports.models import ReportRecipient
from apps.simulator.local_prometheus import free_port
from apps.telemetry.models import GpuHour
from apps.waste.services import job_flag_lists_sync, low_coverage_flags_sync
from tests.carbon.fleet_builder import HOUR, T0, Fleet, fleet_build, intensity_set, job_run

WEEK = T0.date()  # Monday 2 November 2026
PREVIOUS = T0 - timedelta(days=7)
# Monday 07:30 UTC of the next week: the report of WEEK is due at 07:00 local in a UTC site.
DUE = (T0 + timedelta(days=7, hours=7, minutes=30)).isoformat()


@dataclass
class Received:
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def key(self) -> str:
        return str(self.message["X-Fleetwatt-Report"])


@dataclass
class Sink:
    """What the SMTP server received, in order."""

    received: list[Received] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.received.append(Received(list(envelope.rcpt_tos), parsed))  # type: ignore[arg-type]
        return "250 Message accepted for delivery"

    def for_report(self, key: str) -> list[Received]:
        return [r for r in self.received if r.key == key]


@pytest.fixture
def smtp(settings) -> Iterator[Sink]:
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every SMTP command at INFO
    sink = Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD, settings.EMAIL_USE_TLS = "", "", False
    settings.EMAIL_TIMEOUT = 10
    settings.DEFAULT_FROM_EMAIL = "fleetwatt <fleetwatt@example.org>"
    settings.FLEETWATT_BASE_URL = "https://fleetwatt.example.org"
    settings.FLEETWATT_REPORT_WEEKDAY, settings.FLEETWATT_REPORT_HOUR = 0, 7
    try:
        yield sink
    finally:
        controller.stop()


def shared_gpu(fleet: Fleet, *, gpu: Gpu, hours: int, start) -> tuple[Job, Job]:
    """A busy job and a memory hog on one GPU: the hog holds 10 GiB at 0 % SM, gets ~1 % of the energy
    and half the GPU-hours."""
    busy = Job.objects.create(cluster=fleet.cluster, job_key="slurm/busy-shared", team=fleet.team, start=start)
    hog = Job.objects.create(cluster=fleet.cluster, job_key="slurm/hog", team=fleet.team, start=start,
                             name="notebook", user="mallory")  # fmt: skip
    for h in range(hours):
        hour = start + h * HOUR
        for job, energy, sm, memory in ((busy, 2.4e6, 3400.0, 40 * 1024**3), (hog, 0.03e6, 0.0, 10 * 1024**3)):
            JobGpuHour.objects.create(
                job=job, gpu=gpu, hour=hour, source="agent", energy_j=energy, sampled_s=3600, sm_s=sm,
                occupancy_s=1800, peak_memory_bytes=memory,
            )  # fmt: skip
            JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=hour, method="sm_time", energy_j=energy)
        GpuHour.objects.update_or_create(
            gpu=gpu, hour=hour,
            defaults={"source": "agent", "device_energy_j": 2.43e6, "agent_energy_j": 2.43e6,
                      "jobs_energy_j": 2.43e6, "sampled_s": 3600, "occupied_s": 3600},
        )  # fmt: skip
    return busy, hog


@dataclass
class World:
    fleet: Fleet
    jobs: dict[str, Job]
    member: User
    lead: User
    outsider: User
    admin: User
    other_team: Team
    recipients: dict[str, ReportRecipient]


@pytest.fixture
def world(db) -> World:
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * (15 * 24), start=PREVIOUS)
    jobs = {
        "last-week": job_run(fleet, key="slurm/last-week", gpus=fleet.gpus[:1], hours=5, power_w=500, start=PREVIOUS),
        "busy": job_run(fleet, key="slurm/busy", gpus=fleet.gpus[:2], hours=10, power_w=600, start=T0 + 2 * HOUR),
        "idle": job_run(fleet, key="slurm/idle", gpus=fleet.gpus[2:3], hours=3, power_w=80, start=T0 + 30 * HOUR),
        "gappy": job_run(fleet, key="slurm/gappy", gpus=fleet.gpus[4:5], hours=4, power_w=450, start=T0 + 50 * HOUR),
    }
    jobs["busy-shared"], jobs["hog"] = shared_gpu(fleet, gpu=fleet.gpus[3], hours=2, start=T0 + 3 * HOUR)
    # The busy jobs computed; the idle one did not (job_run leaves SM at 0).
    JobGpuHour.objects.filter(job__in=[jobs["busy"], jobs["last-week"], jobs["gappy"]]).update(sm_s=3300)
    footprints_recompute()  # footprints, then the findings (memory_hog, idle_allocation) with their evidence
    Job.objects.filter(pk=jobs["gappy"].pk).update(sampled_s=4 * 3600, expected_s=5 * 3600, coverage=0.8)
    low_coverage_flags_sync(jobs=[Job.objects.get(pk=jobs["gappy"].pk)])
    job_flag_lists_sync(job_ids=[jobs["gappy"].pk])
    jobs = {k: Job.objects.get(pk=j.pk) for k, j in jobs.items()}

    other = Team.objects.create(name="nlp")
    member = User.objects.create_user("ada", email="ada@example.org")
    lead = User.objects.create_user("lin", email="lin@example.org")
    outsider = User.objects.create_user("eve", email="eve@example.org")
    admin = User.objects.create_user("boss", email="boss@example.org", is_staff=True)
    TeamMembership.objects.create(user=member, team=fleet.team)
    TeamMembership.objects.create(user=lead, team=fleet.team, role=TeamMembership.Role.LEAD)
    TeamMembership.objects.create(user=outsider, team=other)
    recipients = {
        "ada": ReportRecipient.objects.create(team=fleet.team, email="ada@example.org"),
        "lin": ReportRecipient.objects.create(team=fleet.team, email="lin@example.org"),
        "gone": ReportRecipient.objects.create(team=fleet.team, email="gone@example.org", active=False),
        "eve": ReportRecipient.objects.create(team=other, email="eve@example.org"),
    }
    return World(fleet, jobs, member, lead, outsider, admin, other, recipients)
