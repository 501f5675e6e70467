"""Builds a fleet with known GPU-hours directly in the database, for the footprint arithmetic."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.carbon.models import GpuModel, IntensityHour, ServerType, Site
from apps.fleet.models import Cluster, Gpu, Node, Team
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.telemetry.models import GpuHour

T0 = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


@dataclass
class Fleet:
    cluster: Cluster
    gpus: list[Gpu]
    team: Team


def fleet_build(
    *,
    name: str = "c1",
    servers: int = 8,
    gpus_per_server: int = 8,
    pue: float = 1.2,
    provider_includes_overhead: bool = False,
    overhead: float | None = 1.3,
    zone: str = "TEST",
    basis: str = "location",
    price: str = "0.20",
    rate: str = "2.50",
) -> Fleet:
    site, _ = Site.objects.get_or_create(
        name=f"site-{name}",
        defaults={
            "grid_zone": zone, "intensity_basis": basis, "pue": pue,
            "provider_includes_overhead": provider_includes_overhead,
            "electricity_price_per_kwh": Decimal(price), "currency": "EUR",
        },
    )  # fmt: skip
    server, _ = ServerType.objects.get_or_create(
        name="hgx",
        defaults={"node_overhead_factor": overhead, "embodied_kg_per_server": 3000.0, "service_life_h": 43800.0,
                  "gpus_per_server": gpus_per_server},
    )  # fmt: skip
    GpuModel.objects.get_or_create(name="NVIDIA H200", defaults={"hourly_rate": Decimal(rate), "currency": "EUR"})
    cluster = Cluster.objects.create(name=name, prometheus_url="http://127.0.0.1:9", site=site)
    gpus = []
    for s in range(servers):
        node = Node.objects.create(cluster=cluster, hostname=f"{name}-n{s}", server_type=server)
        for i in range(gpus_per_server):
            gpus.append(Gpu.objects.create(node=node, uuid=f"GPU-{name}-{s}-{i}", index=i, model_name="NVIDIA H200"))
    team, _ = Team.objects.get_or_create(name="vision")
    return Fleet(cluster=cluster, gpus=gpus, team=team)


def intensity_set(zone: str, values: list[float], *, start: datetime = T0, basis: str = "location") -> None:
    for k, v in enumerate(values):
        IntensityHour.objects.update_or_create(
            zone=zone, basis=basis, hour=start + k * HOUR, defaults={"kg_per_kwh": v, "source": "test"}
        )


def job_run(fleet: Fleet, *, key: str, gpus: list[Gpu], hours: int, power_w: float, start: datetime = T0) -> Job:
    """A job alone on its GPUs for whole hours, with the GPU-hours' device energy equal to its own."""
    job = Job.objects.create(cluster=fleet.cluster, job_key=key, team=fleet.team, start=start)
    for h in range(hours):
        hour = start + h * HOUR
        for gpu in gpus:
            energy = power_w * 3600.0
            JobGpuHour.objects.create(
                job=job, gpu=gpu, hour=hour, source="agent", energy_j=energy, sampled_s=3600, occupancy_s=3600
            )
            JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=hour, method="whole_gpu", energy_j=energy)
            GpuHour.objects.update_or_create(
                gpu=gpu, hour=hour,
                defaults={"source": "agent", "device_energy_j": energy, "agent_energy_j": energy,
                          "jobs_energy_j": energy, "sampled_s": 3600, "occupied_s": 3600},
            )  # fmt: skip
    return job


def idle_hours(fleet: Fleet, *, gpus: list[Gpu], hours: int, power_w: float = 75.0, start: datetime = T0) -> None:
    for h in range(hours):
        for gpu in gpus:
            energy = power_w * 3600.0
            GpuHour.objects.update_or_create(
                gpu=gpu, hour=start + h * HOUR,
                defaults={"source": "agent", "device_energy_j": energy, "agent_energy_j": energy,
                          "idle_energy_j": energy, "sampled_s": 3600},
            )  # fmt: skip
