"""The agent's split methods through the ingest: each job's joules are stored under the method the agent
named (`sm_mem` and `gpu_time` as much as `sm_time`), and the job's attribution adds them up."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHourEnergy
from apps.jobs.uncertainty import energy_band
from apps.pipeline.ingest import Fetched, IngestError, hour_write
from apps.telemetry import promql
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, SeriesWindow
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db

HOUR = datetime(2026, 11, 2, 3, tzinfo=UTC)


def _new_series(labels: dict[str, str], value: float) -> SeriesWindow:
    """A series that started in the hour (the agent's counters start at 0): its rise is its last value."""
    return SeriesWindow(labels=labels, window=CounterWindow(last=value, anchor=None, minimum=value))


def _agent_hour(gpu_uuid: str, hostname: str, energy_by_job_method: dict[tuple[str, str], float]) -> HourInput:
    """One GPU watched the whole hour by the agent, two jobs sharing it, their joules by method."""
    gpu = {"hostname": hostname, "gpu": "0", "uuid": gpu_uuid}
    jobs = sorted({job for job, _ in energy_by_job_method})
    data = HourInput(hour_start=HOUR.timestamp(), scrape_interval_s=15)
    data.counters = {
        promql.GPU_ENERGY: [_new_series(gpu, sum(energy_by_job_method.values()))],
        promql.GPU_IDLE_ENERGY: [_new_series(gpu, 0.0)],
        promql.GPU_SAMPLED: [_new_series(gpu, 3600.0)],
        promql.JOB_ENERGY: [
            _new_series({**gpu, "job_key": job, "method": method}, joules)
            for (job, method), joules in energy_by_job_method.items()
        ],
        promql.JOB_SAMPLED: [_new_series({**gpu, "job_key": job}, 3600.0) for job in jobs],
        promql.JOB_OCCUPANCY: [_new_series({**gpu, "job_key": job}, 3600.0 / len(jobs)) for job in jobs],
        promql.AGENT_SAMPLES: [_new_series({"hostname": hostname}, 3600.0)],
    }
    data.job_gauges = [("last_seen", {**gpu, "job_key": job}, HOUR.timestamp() + 3600.0) for job in jobs]
    data.agent_info = [{"hostname": hostname, "version": "0.1.0"}]
    return data


@pytest.mark.parametrize("method", [Method.SM_MEM, Method.GPU_TIME])
def test_rows_of_each_agent_method_are_stored_with_their_method(method: Method) -> None:
    # given an hour in which the agent split a shared GPU by sm_time for a while, then by its power model
    # (sm_mem) or by the jobs' exact GPU time (gpu_time)
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    data = _agent_hour(
        gpu.uuid,
        gpu.node.hostname,
        {
            ("slurm/1", "sm_time"): 300_000.0,
            ("slurm/1", method.value): 900_000.0,
            ("slurm/2", "sm_time"): 100_000.0,
            ("slurm/2", method.value): 500_000.0,
        },
    )
    # when
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    # then each job's joules are kept under the method that found them
    rows = set(JobGpuHourEnergy.objects.values_list("job__job_key", "method", "energy_j"))
    assert rows == {
        ("slurm/1", "sm_time", 300_000.0),
        ("slurm/1", method.value, 900_000.0),
        ("slurm/2", "sm_time", 100_000.0),
        ("slurm/2", method.value, 500_000.0),
    }
    job = Job.objects.get(job_key="slurm/2")
    assert job.attribution == method
    assert job.attribution_j == {method.value: pytest.approx(500_000.0), "sm_time": pytest.approx(100_000.0)}
    assert job.energy_j == pytest.approx(600_000.0)


def test_a_method_this_release_does_not_know_refuses_the_hour() -> None:
    # given an agent newer than the app, with a method the app has never heard of
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    data = _agent_hour(gpu.uuid, gpu.node.hostname, {("slurm/1", "sm_time"): 1.0, ("slurm/1", "quantum"): 5.0})
    # when / then: a message that names the cluster, the agent and the method, and nothing written
    with pytest.raises(IngestError, match=rf"cluster {fleet.cluster.name}, hour .*quantum.*upgrade fleetwatt"):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    assert not JobGpuHourEnergy.objects.exists()
    assert not Job.objects.filter(job_key="slurm/1").exists()


def test_every_method_the_agent_emits_is_known_to_the_app() -> None:
    from fleetwatt_agent.model import METHODS

    assert set(METHODS) == promql.AGENT_METHODS
    assert {m.value for m in Method} >= promql.AGENT_METHODS


def test_a_job_on_a_shared_gpu_gets_the_interval_of_its_split_and_one_alone_none() -> None:
    # given two jobs splitting one GPU by SM time for the hour (1.2 MJ: 0.9 and 0.3), and a job alone on another
    fleet = fleet_build(servers=1, gpus_per_server=2)
    shared, alone = fleet.gpus
    hour = _agent_hour(shared.uuid, shared.node.hostname, {("slurm/1", "sm_time"): 9e5, ("slurm/2", "sm_time"): 3e5})
    other = _agent_hour(alone.uuid, alone.node.hostname, {("slurm/3", "whole_gpu"): 7e5})
    for metric, series in other.counters.items():
        hour.counters[metric] = [*hour.counters.get(metric, []), *series]
    hour.job_gauges += other.job_gauges
    # when the hour is ingested (and derived)
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(hour, None, 0, 0.0))
    # then each shared job's energy has the SM time split's band of the GPU's 1.2 MJ, in the API too
    for key, energy in (("slurm/1", 9e5), ("slurm/2", 3e5)):
        job = Job.objects.get(job_key=key)
        expected = energy_band(energy_j=energy, gpu_jobs_j=1.2e6, method=Method.SM_TIME, samples=3600.0)
        assert (job.energy_low_j, job.energy_high_j) == pytest.approx(expected)
        assert job.energy_low_j < job.energy_j < job.energy_high_j
    # and the job alone on its GPU is exact: no band
    assert Job.objects.values_list("energy_low_j", "energy_high_j").get(job_key="slurm/3") == (None, None)
