"""DESIGN section 4's worked example through the real path: the fleet's measured rows exist, then the
config is applied and the intensity imported with the operators' commands, each of which recomputes
the footprints."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.carbon.arithmetic import sci_kg
from apps.fleet.models import Cluster, Gpu, Node, Team
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import HOUR, T0

pytestmark = pytest.mark.django_db

CONFIG = """
sites:
  - {name: dc-one, grid_zone: XX, pue: 1.2, electricity_price_per_kwh: 0.20, currency: EUR, timezone: UTC}
server_types:
  - {name: hgx, node_overhead_factor: 1.3, embodied_kg_per_server: 3000, service_life_years: 5, gpus_per_server: 8}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.50, currency: EUR, tdp_w: 700}
clusters:
  - name: hpc
    prometheus_url: http://127.0.0.1:9
    site: dc-one
    nodes: [{match: "hpc-*", server_type: hgx}]
teams:
  - {name: llm, rules: [{kind: slurm_account, value: llm}]}
"""


def _measured_run() -> Job:
    """64 GPUs on 8 servers for 30 hours at 550 W each: 1,056 kWh of GPU energy."""
    cluster = Cluster.objects.create(name="hpc", prometheus_url="http://127.0.0.1:9")
    team, _ = Team.objects.get_or_create(name="llm")
    job = Job.objects.create(cluster=cluster, job_key="slurm/64", team=team, account="llm", start=T0)
    energy = 550.0 * 3600
    for s in range(8):
        node = Node.objects.create(cluster=cluster, hostname=f"hpc-{s}")
        for i in range(8):
            gpu = Gpu.objects.create(node=node, uuid=f"GPU-{s}-{i}", index=i, model_name="NVIDIA H200")
            for h in range(30):
                hour = T0 + h * HOUR
                JobGpuHour.objects.create(job=job, gpu=gpu, hour=hour, source="agent", energy_j=energy,
                                          sampled_s=3600, occupancy_s=3600)  # fmt: skip
                JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=hour, method="whole_gpu", energy_j=energy)
                GpuHour.objects.create(gpu=gpu, hour=hour, source="agent", device_energy_j=energy,
                                       jobs_energy_j=energy, sampled_s=3600, occupied_s=3600)  # fmt: skip
    return job


def _intensity(path: Path, kg_per_kwh: float) -> Path:
    path.write_text("datetime,kg_per_kwh\n" + "".join(
        f"{(T0 + h * HOUR).isoformat()},{kg_per_kwh}\n" for h in range(30)
    ))  # fmt: skip
    return path


def _import(path: Path) -> None:
    call_command("import_intensity", str(path), zone="XX", source="grid-op", verbosity=0)


def test_worked_example_through_the_commands(tmp_path: Path) -> None:
    job = _measured_run()
    (tmp_path / "fleet.yaml").write_text(CONFIG)
    call_command("apply_config", str(tmp_path / "fleet.yaml"), verbosity=0)
    call_command(
        "import_intensity", str(_intensity(tmp_path / "a.csv", 0.35)), zone="XX", source="grid-op", verbosity=0
    )
    job.refresh_from_db()
    assert round(job.server_kwh) == 1373
    assert round(job.facility_kwh) == 1647
    assert round(job.operational_kg) == 577
    assert round(job.embodied_kg) == 16
    assert round(sci_kg(operational_kg=job.operational_kg, embodied_kg=job.embodied_kg, work_units=None)) == 593
    # and what a TDP-based tool would claim: 1,920 GPU-hours x 700 W = 1,344 kWh, 1.27 x the 1,056 kWh measured
    assert job.tdp_estimate_j == pytest.approx(64 * 30 * 3600 * 700.0)
    # in /api/jobs/ and its CSV
    admin = APIClient()
    admin.force_authenticate(User.objects.create_superuser("fin", "f@example.org", "x"))
    (row,) = admin.get("/api/jobs/").json()["results"]
    assert row["tdp_estimate_j"] == pytest.approx(64 * 30 * 3600 * 700.0)
    (csv_row,) = csv.DictReader(io.StringIO(b"".join(admin.get("/api/jobs/?format=csv").streaming_content).decode()))
    assert float(csv_row["tdp_estimate_j"]) == pytest.approx(64 * 30 * 3600 * 700.0)
    assert (job.intensity_basis, job.intensity_source, job.currency) == ("location", "grid-op", "EUR")
    assert not job.intensity_estimated
    # a newer version of the same hours replaces them, and the footprint follows
    call_command(
        "import_intensity", str(_intensity(tmp_path / "b.csv", 0.05)), zone="XX", source="grid-op", verbosity=0
    )
    job.refresh_from_db()
    assert round(job.operational_kg) == 82


def test_the_tdp_estimate_follows_the_model_s_tdp_and_is_empty_without_one(tmp_path: Path) -> None:
    job = _measured_run()
    (tmp_path / "fleet.yaml").write_text(CONFIG.replace("tdp_w: 700", "tdp_w: 600"))
    call_command("apply_config", str(tmp_path / "fleet.yaml"), verbosity=0)
    job.refresh_from_db()
    assert job.tdp_estimate_j == pytest.approx(64 * 30 * 3600 * 600.0)
    # a GPU of a model the config does not name: no guessed wattage
    Gpu.objects.filter(uuid="GPU-0-0").update(model_name="NVIDIA B200")
    (tmp_path / "fleet.yaml").write_text(CONFIG)
    call_command("apply_config", str(tmp_path / "fleet.yaml"), verbosity=0)
    job.refresh_from_db()
    assert job.tdp_estimate_j is None
