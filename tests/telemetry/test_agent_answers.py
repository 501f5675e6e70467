"""The agent's answers are input too (issue: no input breaks it): its `job_info` names had no length cap before they
were stored (a 10,000-character name failed the hour's write in the database), a NUL in them failed it too, a
job's start gauge of +Inf or 1e20 raised OverflowError, and a `gpu` label that is not a number a ValueError, none
naming the cluster. Now the words are made storable (apps.jobs.identity: cut to their column, U+FFFD for what
cannot be stored) and logged with the cluster and the job, a time no calendar holds is left out, and a label that
is not what the agent writes refuses the hour with the cluster named; one cluster's refusal does not stop the
others' ingest."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from apps.jobs.identity import key_storable
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline import ingest
from apps.pipeline.ingest import Fetched, IngestError, hour_write
from apps.telemetry import promql
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, SeriesWindow
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db

HOUR = datetime(2026, 11, 2, 3, tzinfo=UTC)


def _rise(labels: dict[str, str], value: float) -> SeriesWindow:
    return SeriesWindow(labels=labels, window=CounterWindow(last=value, anchor=None, minimum=value))


def _hour(uuid: str, hostname: str, job_key: str, *, info: dict[str, str], gpu: str = "0") -> HourInput:
    """One GPU the agent watched the whole hour, one job on it, and the job's `job_info` labels."""
    labels = {"hostname": hostname, "gpu": gpu, "uuid": uuid}
    job = {**labels, "job_key": job_key}
    data = HourInput(hour_start=HOUR.timestamp(), scrape_interval_s=15)
    data.counters = {
        promql.GPU_ENERGY: [_rise(labels, 1_000_000.0)],
        promql.GPU_IDLE_ENERGY: [_rise(labels, 0.0)],
        promql.GPU_SAMPLED: [_rise(labels, 3600.0)],
        promql.JOB_ENERGY: [_rise({**job, "method": "whole_gpu"}, 1_000_000.0)],
        promql.JOB_SAMPLED: [_rise(job, 3600.0)],
        promql.JOB_OCCUPANCY: [_rise(job, 3600.0)],
        promql.AGENT_SAMPLES: [_rise({"hostname": hostname}, 3600.0)],
    }
    data.job_gauges = [("last_seen", job, HOUR.timestamp() + 3600.0)]
    data.job_info = [{"job_key": job_key, "hostname": hostname, **info}]
    data.agent_info = [{"hostname": hostname, "version": "0.1.0"}]
    return data


def test_job_info_words_are_made_storable_and_the_repair_logged(caplog) -> None:
    # given an agent whose job_info names a job with 10,000 characters, a NUL in its user
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    info = {"scheduler": "slurm", "job_id": "7", "user": "al\x00ice", "account": "a" * 300, "name": "n" * 10_000}
    data = _hour(gpu.uuid, gpu.node.hostname, "slurm/7", info=info)
    # when its hour is written
    with caplog.at_level(logging.WARNING):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    # then the job is stored, its words cut to their columns, the NUL shown as U+FFFD, and the log says so
    job = Job.objects.get(job_key="slurm/7")
    assert len(job.name) == 255 and job.name.endswith("…") and job.user == "al\ufffdice" and len(job.account) == 255
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"cluster {fleet.cluster.name}, hour 2026-11-02 03:00 UTC: job 'slurm/7'" in said
    assert "its name: cut from 10,000 to 255 characters" in said


def test_a_job_key_longer_than_its_column_is_stored_under_its_hashed_key() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    key = "k8s/search/" + "p" * 250
    data = _hour(gpu.uuid, gpu.node.hostname, key, info={"scheduler": "k8s", "pod": "p" * 250, "namespace": "search"})
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    job = Job.objects.get(job_key=key_storable(key))
    assert JobGpuHour.objects.filter(job=job).count() == 1 and job.pod == "p" * 250


@pytest.mark.parametrize("start", [float("inf"), float("nan"), 1e20, -5.0, 1.0])
def test_a_job_start_no_calendar_holds_is_left_out(start: float) -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    data = _hour(gpu.uuid, gpu.node.hostname, "slurm/7", info={"scheduler": "slurm", "job_id": "7"})
    job = {"hostname": gpu.node.hostname, "gpu": "0", "uuid": gpu.uuid, "job_key": "slurm/7"}
    data.job_gauges += [("start", job, start), ("memory", job, float("inf")), ("last_seen", job, 1e300)]
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    row = JobGpuHour.objects.get(job__job_key="slurm/7")
    assert row.job_start is None and row.peak_memory_bytes == 0


def test_a_gpu_label_that_is_not_an_index_refuses_the_hour_naming_the_cluster() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    data = _hour(gpu.uuid, gpu.node.hostname, "slurm/7", info={}, gpu="zero")
    with pytest.raises(IngestError, match=rf"cluster {fleet.cluster.name}, hour .*gpu='zero', not an index"):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=Fetched(data, None, 0, 0.0))
    assert not Job.objects.filter(job_key="slurm/7").exists()


def test_one_cluster_s_refused_hour_does_not_stop_the_others(monkeypatch) -> None:
    """The one-worker catch-up (FLEETWATT_INGEST_FANOUT=0) went on past an unreachable cluster but not past an
    answer it refused (a dcgm series without its host, an unknown method, a label that is not an index)."""
    bad = fleet_build(name="a-bad", servers=1, gpus_per_server=1).cluster
    good = fleet_build(name="b-good", servers=1, gpus_per_server=1).cluster
    ingested: list[str] = []

    class Reader:
        def close(self) -> None:
            pass

    def hour_ingest(*, cluster, hour, reader):  # type: ignore[no-untyped-def]
        if cluster.name == "a-bad":
            raise IngestError(f"cluster {cluster.name}, hour {hour:%Y-%m-%d %H}:00 UTC: refused")
        ingested.append(cluster.name)
        return None

    monkeypatch.setattr(ingest, "reader_for", lambda cluster: Reader())
    monkeypatch.setattr(ingest, "hour_ingest", hour_ingest)
    ingest.closed_hours_ingest(now=HOUR)
    assert good.name in ingested and bad.name not in ingested
