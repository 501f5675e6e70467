"""factory-boy factories for the models tests need as rows. Defaults make a small, valid fleet: a job on
one GPU of one node, in the hour from 2026-11-02 10:00 UTC, wholly its own; unique fields are sequences.

Models are named as "app_label.Model", so a model moving between modules does not break the factories."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import factory
from factory.django import DjangoModelFactory

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
H200_J_PER_HOUR = 500.0 * 3600  # a GPU drawing 500 W for an hour


class UserFactory(DjangoModelFactory):
    class Meta:
        model = "auth.User"
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("pw")


class AdminFactory(UserFactory):
    username = factory.Sequence(lambda n: f"admin{n}")
    is_staff = True


class TeamFactory(DjangoModelFactory):
    class Meta:
        model = "fleet.Team"

    name = factory.Sequence(lambda n: f"team-{n}")
    display_name = factory.LazyAttribute(lambda t: t.name.replace("-", " ").title())


class TeamMembershipFactory(DjangoModelFactory):
    class Meta:
        model = "fleet.TeamMembership"

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = "member"


class SiteFactory(DjangoModelFactory):
    class Meta:
        model = "carbon.Site"

    name = factory.Sequence(lambda n: f"site-{n}")
    grid_zone = "DE"
    pue = 1.2
    electricity_price_per_kwh = Decimal("0.20")
    currency = "EUR"


class ClusterFactory(DjangoModelFactory):
    class Meta:
        model = "fleet.Cluster"

    name = factory.Sequence(lambda n: f"cluster-{n}")
    prometheus_url = "http://127.0.0.1:9"  # never a real server
    scrape_interval_s = 15


class NodeFactory(DjangoModelFactory):
    class Meta:
        model = "fleet.Node"

    cluster = factory.SubFactory(ClusterFactory)
    hostname = factory.Sequence(lambda n: f"gpu-node-{n}")


class GpuFactory(DjangoModelFactory):
    class Meta:
        model = "fleet.Gpu"

    node = factory.SubFactory(NodeFactory)
    uuid = factory.Sequence(lambda n: f"GPU-{n:08d}-0000-0000-0000-000000000000")
    index = factory.Sequence(lambda n: n % 8)
    model_name = "NVIDIA H200"


class JobGroupFactory(DjangoModelFactory):
    class Meta:
        model = "carbon.JobGroup"

    name = factory.Sequence(lambda n: f"campaign-{n}")
    match_kind = "name_prefix"
    match_value = factory.LazyAttribute(lambda g: g.name)


class JobFactory(DjangoModelFactory):
    """A finished slurm job: one GPU-hour, whole GPU, fully covered."""

    class Meta:
        model = "jobs.Job"

    cluster = factory.SubFactory(ClusterFactory)
    team = factory.SubFactory(TeamFactory)
    job_id = factory.Sequence(lambda n: str(1000 + n))
    job_key = factory.LazyAttribute(lambda j: f"slurm/{j.job_id}")
    scheduler = "slurm"
    user = "ada"
    account = factory.LazyAttribute(lambda j: j.team.name)
    name = factory.LazyAttribute(lambda j: f"train-{j.job_id}")
    source = "agent"
    start = T0
    last_seen = T0 + HOUR
    end = T0 + HOUR
    energy_j = H200_J_PER_HOUR
    attribution = "whole_gpu"
    attribution_j = factory.LazyAttribute(lambda j: {"whole_gpu": j.energy_j})
    sampled_s = 3600.0
    expected_s = 3600.0
    coverage = 1.0
    gpu_hours = 1.0
    sm_s = 3000.0
    peak_memory_bytes = 40 * 1024**3
    gpu_count = 1
    facility_kwh = 0.6
    operational_kg = 0.18
    cost = Decimal("2.920000")
    currency = "EUR"


class JobGpuHourFactory(DjangoModelFactory):
    """One job's hour on one GPU of its cluster."""

    class Meta:
        model = "jobs.JobGpuHour"

    job = factory.SubFactory(JobFactory)
    gpu = factory.SubFactory(GpuFactory, node__cluster=factory.SelfAttribute("...job.cluster"))
    hour = T0
    source = "agent"
    energy_j = H200_J_PER_HOUR
    sampled_s = 3600.0
    sm_s = 3000.0
    occupancy_s = 3600.0
    peak_memory_bytes = 40 * 1024**3
    job_start = factory.SelfAttribute("job.start")
    first_seen = factory.SelfAttribute("hour")
    last_seen = factory.LazyAttribute(lambda r: r.hour + HOUR - timedelta(seconds=15))
    facility_kwh = 0.6
    operational_kg = 0.18
    cost = Decimal("2.920000")


class JobGpuHourEnergyFactory(DjangoModelFactory):
    class Meta:
        model = "jobs.JobGpuHourEnergy"

    job = factory.SubFactory(JobFactory)
    gpu = factory.SubFactory(GpuFactory, node__cluster=factory.SelfAttribute("...job.cluster"))
    hour = T0
    method = "whole_gpu"
    energy_j = H200_J_PER_HOUR


class GpuHourFactory(DjangoModelFactory):
    """A GPU's hour as the ingest writes it: agent and DCGM agree, every joule on a job."""

    class Meta:
        model = "telemetry.GpuHour"

    gpu = factory.SubFactory(GpuFactory)
    hour = T0
    source = "agent"
    agent_energy_j = H200_J_PER_HOUR
    dcgm_energy_j = H200_J_PER_HOUR
    device_energy_j = factory.LazyAttribute(
        lambda h: h.agent_energy_j if h.agent_energy_j is not None else (h.dcgm_energy_j or 0.0)
    )
    jobs_energy_j = factory.SelfAttribute("device_energy_j")
    idle_energy_j = 0.0
    unattributed_j = 0.0
    residual_j = factory.LazyAttribute(
        lambda h: None if h.agent_energy_j is None or h.dcgm_energy_j is None else h.agent_energy_j - h.dcgm_energy_j
    )
    residual_ratio = factory.LazyAttribute(lambda h: None if not h.dcgm_energy_j else h.residual_j / h.dcgm_energy_j)
    sampled_s = 3600.0
    occupied_s = 3600.0
    counter_resets = 0


class FlagFactory(DjangoModelFactory):
    """A finding on a job of the flag's cluster; pass job=None, gpu= and hour= for a GPU-hour finding."""

    class Meta:
        model = "waste.Flag"

    kind = "memory_hog"
    cluster = factory.SubFactory(ClusterFactory)
    job = factory.SubFactory(JobFactory, cluster=factory.SelfAttribute("..cluster"))
    evidence = factory.LazyFunction(lambda: {"memory_bytes": 10 * 1024**3, "sm_percent": 0.3, "cost": "1.00"})


class AuditEntryFactory(DjangoModelFactory):
    class Meta:
        model = "waste.AuditEntry"

    actor = factory.SubFactory(AdminFactory)
    action = "exclude"
    job = factory.SubFactory(JobFactory)
    reason = "test run, not billed"
    before = factory.LazyFunction(lambda: {"excluded_from_bill": False})
    after = factory.LazyFunction(lambda: {"excluded_from_bill": True})


class TeamDayFactory(DjangoModelFactory):
    """A team's day on a cluster, summed (what team rollups read)."""

    class Meta:
        model = "rollups.TeamDay"

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    day = factory.Sequence(lambda n: date(2026, 11, 1) + timedelta(days=n % 28))
    energy_j = H200_J_PER_HOUR
    occupancy_s = 3600.0
    facility_kwh = 0.6
    operational_kg = 0.18
    embodied_kg = 0.01
    cost = Decimal("2.920000")
    cost_units = 292  # its jobs within the day, each rounded to the cent (here one job, or costs already whole)
    units_exponent = 2
    energy_by_method_j = factory.LazyAttribute(lambda d: {"whole_gpu": d.energy_j})


class WeeklyReportFactory(DjangoModelFactory):
    class Meta:
        model = "reports.WeeklyReport"

    team = factory.SubFactory(TeamFactory)
    week_start = factory.Sequence(lambda n: date(2026, 11, 2) - timedelta(weeks=n))
    status = "sent"
    subject = factory.LazyAttribute(lambda r: f"GPU waste, week of {r.week_start}")
    delivered = factory.LazyFunction(lambda: ["lead@example.org"])
    send_count = 1
