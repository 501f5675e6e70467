"""apps.pipeline.ingest without a Prometheus: an hour's answers built by hand, written and derived as the ingest
writes them (hour_write), and the ingest's checks. Energy is conserved per GPU-hour as stored and a job's energy is
its rows'; re-ingesting the same answers changes nothing; bad input writes nothing (an answer the release cannot
read, a source that lost what is stored, an hour past retention, a range that is not one); an hour written for its
batch waits, not derived, and holds the watermark; beat's catch-up goes on past an unreachable cluster and leaves a
cluster another worker is catching up alone. The ingest from a real Prometheus, end to end:
tests/telemetry/test_ingest_end_to_end.py, test_ingest_failures.py and tests/faults/test_source_loss.py."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection

from apps.core import locks
from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline import ingest
from apps.pipeline.ingest import (
    Fetched,
    IngestError,
    SourceLossError,
    closed_hours_ingest,
    clusters_select,
    hour_fetch_shard,
    hour_write,
    ingest_range_validate,
)
from apps.telemetry import promql
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, SeriesWindow
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from apps.telemetry.prometheus import QueryLog
from apps.telemetry.promql import HourQueries
from apps.waste.models import Flag
from tests.carbon.fleet_builder import Fleet, fleet_build, intensity_set

pytestmark = pytest.mark.django_db

HOUR = datetime(2026, 11, 2, 3, tzinfo=UTC)
H = timedelta(hours=1)


def _rise(labels: dict[str, str], value: float) -> SeriesWindow:
    return SeriesWindow(labels=dict(labels), window=CounterWindow(last=value, anchor=0.0, minimum=0.0))


def _answers(fleet: Fleet, hour: datetime, jobs: dict[str, dict[int, float]], *, idle_j: float = 1e5,
             method: str = "whole_gpu") -> HourInput:  # fmt: skip
    """What the agent answered for an hour: each job's energy on some of the fleet's GPUs, every GPU watched all hour
    (each job occupying its share of it), and its idle energy."""
    data = HourInput(hour_start=hour.timestamp(), scrape_interval_s=15)
    c = data.counters
    for index, gpu in enumerate(fleet.gpus):
        labels = {"uuid": gpu.uuid, "hostname": gpu.node.hostname, "gpu": str(gpu.index)}
        on_gpu = {key: per_gpu[index] for key, per_gpu in jobs.items() if index in per_gpu}
        c.setdefault(promql.GPU_ENERGY, []).append(_rise(labels, sum(on_gpu.values()) + idle_j))
        c.setdefault(promql.GPU_IDLE_ENERGY, []).append(_rise(labels, idle_j))
        c.setdefault(promql.GPU_SAMPLED, []).append(_rise(labels, 3600.0))
        for key, joules in on_gpu.items():
            job = {**labels, "job_key": key}
            c.setdefault(promql.JOB_ENERGY, []).append(_rise({**job, "method": method}, joules))
            c.setdefault(promql.JOB_SAMPLED, []).append(_rise(job, 3600.0))
            c.setdefault(promql.JOB_OCCUPANCY, []).append(_rise(job, 3600.0 / len(on_gpu)))
            data.job_gauges.append(("last_seen", job, hour.timestamp() + 3599.0))
            data.job_gauges.append(("start", job, HOUR.timestamp()))
    data.job_info = [{"job_key": key, "scheduler": "slurm", "job_id": key.split("/")[1], "account": "vision"}
                     for key in jobs]  # fmt: skip
    return data


def _fetched(data: HourInput, retention: timedelta | None = None) -> Fetched:
    return Fetched(data, retention, query_count=12, prometheus_s=0.05)


@pytest.fixture
def fleet() -> Fleet:
    fleet = fleet_build(servers=1, gpus_per_server=2)
    intensity_set("TEST", [0.3] * 6, start=HOUR)
    return fleet


def _everything() -> dict[str, list[tuple[Any, ...]]]:
    return {
        "rows": sorted(
            JobGpuHour.objects.values_list(
                "pk", "job__job_key", "gpu__uuid", "hour", "source", "energy_j", "facility_kwh", "cost"
            )
        ),
        "gpu_hours": sorted(
            GpuHour.objects.values_list(
                "pk", "gpu__uuid", "hour", "device_energy_j", "jobs_energy_j", "idle_energy_j", "idle_cost"
            )
        ),
        "jobs": sorted(
            Job.objects.values_list(
                "pk", "job_key", "energy_j", "gpu_hours", "facility_kwh", "cost", "operational_kg", "flags", "team_id"
            )
        ),
        "flags": sorted(Flag.objects.values_list("pk", "kind", "job_id", "status")),
    }


def test_an_hour_is_written_derived_and_its_energy_conserved(fleet: Fleet) -> None:
    # given an hour: one job on both GPUs, another sharing the second
    data = _answers(fleet, HOUR, {"slurm/1": {0: 1.8e6, 1: 1.2e6}, "slurm/2": {1: 0.6e6}})
    # when it is ingested
    report = hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(data))
    # then every GPU-hour adds up to its meter, and its job rows to its jobs' energy
    for gpu_hour in GpuHour.objects.all():
        rows = JobGpuHour.objects.filter(gpu_id=gpu_hour.gpu_id, hour=HOUR)
        assert sum(r.energy_j for r in rows) == pytest.approx(gpu_hour.jobs_energy_j)
        assert gpu_hour.jobs_energy_j + gpu_hour.idle_energy_j + gpu_hour.unattributed_j == pytest.approx(
            gpu_hour.device_energy_j
        )
    # and each job's derived figures are its rows'
    first = Job.objects.get(job_key="slurm/1")
    assert first.energy_j == pytest.approx(3.0e6) and first.gpu_count == 2
    assert first.gpu_hours == pytest.approx(1.5)  # its GPU whole, and half the one it shared
    assert first.facility_kwh == pytest.approx(sum(JobGpuHour.objects.filter(job=first).values_list(
        "facility_kwh", flat=True)))  # fmt: skip
    assert first.cost > Decimal(0) and first.operational_kg is not None and first.operational_kg > 0
    # and the report and the hour's record say what was done
    assert (report.gpus, report.jobs, report.query_count) == (2, 2, 12)
    assert "job_summaries" in report.derive_steps_s and report.rows["jobs_jobgpuhour"] == 3
    assert IngestedHour.objects.get(cluster=fleet.cluster, hour=HOUR).derived
    assert IngestWatermark.objects.get(cluster=fleet.cluster).ingested_through == HOUR + H


def test_ingesting_the_same_answers_again_changes_nothing(fleet: Fleet) -> None:
    answers = [_answers(fleet, HOUR + h * H, {"slurm/1": {0: 1.8e6}, "slurm/2": {1: 0.2e6}}) for h in range(3)]
    for h, data in enumerate(answers):
        hour_write(cluster=fleet.cluster, hour=HOUR + h * H, fetched=_fetched(data))
    before = _everything()
    # in another order, too: a job's summary is made from all its rows
    for h in (2, 0, 1):
        hour_write(cluster=fleet.cluster, hour=HOUR + h * H, fetched=_fetched(answers[h]))
    assert _everything() == before


def test_an_answer_the_release_cannot_read_writes_nothing(fleet: Fleet) -> None:
    data = _answers(fleet, HOUR, {"slurm/1": {0: 1e6}}, method="next_release_split")
    with pytest.raises(IngestError, match=rf"^cluster {fleet.cluster.name}, hour 2026-11-02 03:00 UTC: .*'next_rel"):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(data))
    assert not Job.objects.exists() and not GpuHour.objects.exists() and not IngestedHour.objects.exists()


def test_an_answer_that_lost_a_stored_gpu_writes_nothing_unless_forced(fleet: Fleet) -> None:
    # given an hour stored with both GPUs
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(_answers(fleet, HOUR, {"slurm/1": {0: 1e6, 1: 1e6}})))
    before = _everything()
    # when the source now answers for one GPU only
    one_gpu = Fleet(cluster=fleet.cluster, gpus=fleet.gpus[:1], team=fleet.team)
    lost = _fetched(_answers(one_gpu, HOUR, {"slurm/1": {0: 1e6}}))
    with pytest.raises(SourceLossError, match=r"no longer gives 1 of the 2 GPU-hours stored.*--force"):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=lost)
    # then nothing changed; forced, the answer replaces the hour
    assert _everything() == before
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=lost, force=True)
    assert GpuHour.objects.count() == 1 and Job.objects.get().energy_j == pytest.approx(1e6)


def test_an_hour_past_the_sources_retention_is_kept_as_stored(fleet: Fleet) -> None:
    data = _answers(fleet, HOUR, {"slurm/1": {0: 1e6}})
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(data))
    before = _everything()
    with pytest.raises(SourceLossError, match="older than the source's retention"):
        hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(data, retention=timedelta(days=1)))
    assert _everything() == before
    fleet.cluster.refresh_from_db()
    assert fleet.cluster.source_retention_s is None  # the refused write recorded nothing either


def test_an_hour_whose_month_is_past_the_rows_retention_is_refused(fleet: Fleet, settings) -> None:
    settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS = 1  # now is December 2026: November is kept, October not
    old = datetime(2026, 10, 31, 23, tzinfo=UTC)
    with pytest.raises(IngestError, match=r"past the hour rows' retention.*Nothing was written"):
        hour_write(cluster=fleet.cluster, hour=old, fetched=_fetched(_answers(fleet, old, {"slurm/1": {0: 1e6}})))
    assert not Job.objects.exists()


def test_an_hour_written_for_its_batch_waits_not_derived_and_holds_the_watermark(fleet: Fleet) -> None:
    hour_write(cluster=fleet.cluster, hour=HOUR, fetched=_fetched(_answers(fleet, HOUR, {"slurm/1": {0: 1e6}})))
    data = _answers(fleet, HOUR + H, {"slurm/1": {0: 1e6}, "slurm/2": {1: 5e5}})
    # when the next hour is written without deriving
    report = hour_write(cluster=fleet.cluster, hour=HOUR + H, fetched=_fetched(data), derive_now=False)
    # then its rows are there, its jobs wait, and the watermark stays before it
    waiting = IngestedHour.objects.get(cluster=fleet.cluster, hour=HOUR + H)
    new = Job.objects.get(job_key="slurm/2")
    assert not waiting.derived and new.pk in waiting.pending_job_ids and report.derive_s == 0.0
    assert new.energy_j == 0.0  # not derived yet
    assert IngestWatermark.objects.get(cluster=fleet.cluster).ingested_through == HOUR + H
    # and a write of the same hour that derives takes the waiting jobs with it
    hour_write(cluster=fleet.cluster, hour=HOUR + H, fetched=_fetched(data))
    assert Job.objects.get(job_key="slurm/2").energy_j == pytest.approx(5e5)
    assert IngestWatermark.objects.get(cluster=fleet.cluster).ingested_through == HOUR + 2 * H


@pytest.mark.parametrize(
    ("start", "end", "said"),
    [
        (HOUR.replace(tzinfo=None), HOUR + H, "--start 2026-11-02T03:00:00 has no time zone"),
        (HOUR + timedelta(minutes=30), HOUR + 2 * H, "is not a whole hour"),
        (HOUR, HOUR, "must be before --end"),
        (HOUR, datetime(2026, 12, 7, 13, tzinfo=UTC), "has not closed yet"),
        (HOUR - timedelta(days=400), HOUR, "one run covers at most 8,784"),
    ],
)
def test_a_range_that_is_not_one_is_refused(start: datetime, end: datetime, said: str) -> None:
    with pytest.raises(IngestError, match=said):
        ingest_range_validate(start, end, now=datetime(2026, 12, 7, 12, 30, tzinfo=UTC))
    ingest_range_validate(HOUR, HOUR + H, now=datetime(2026, 12, 7, 12, 30, tzinfo=UTC))  # a good one passes


def test_clusters_are_selected_by_name_or_all(fleet: Fleet, settings) -> None:
    assert clusters_select(fleet.cluster.name) == [fleet.cluster]
    with pytest.raises(IngestError, match=r"Unknown cluster 'nope' \(known: .*c1"):
        clusters_select("nope")
    names = {c.name for c in clusters_select(None)}
    assert names == {fleet.cluster.name, settings.FLEETWATT_CLUSTER}  # the default cluster made on first use


class TableReader:
    """A reader with the answers of a table (none: empty), as hour_fetch_shard asks them."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.answers = answers or {}
        self.log = QueryLog()

    def windows_open_left(self) -> bool:
        return False

    def retention(self) -> timedelta | None:
        return timedelta(days=15)

    def instant(self, query: str, *, at: float) -> list[dict[str, Any]]:
        self.log.count += 1
        return self.answers.get(query, [])


def test_a_shards_fetch_counts_its_own_queries_and_reads_the_retention(fleet: Fleet) -> None:
    reader = TableReader()
    reader.log.count = 40  # another shard's queries, before
    fetched = hour_fetch_shard(cluster=fleet.cluster, hour=HOUR, reader=reader, node_match='!~"gpu-x.*"')  # type: ignore[arg-type]
    assert fetched.query_count == reader.log.count - 40 > 0 and fetched.retention == timedelta(days=15)


def test_a_sharded_cluster_whose_dcgm_names_nodes_in_lowercase_is_told_to_set_its_host_label(fleet: Fleet) -> None:
    reader = TableReader()
    series = {"metric": {"UUID": "GPU-9", "hostname": "gpu-a1", "fw_q": "power_sum"}, "value": [0, "1"]}
    shard = HourQueries(cluster_selector=fleet.cluster.selector, scrape_interval_s=15, lookback_s=3 * 3600,
                        node_match='=~"gpu-a.*"')  # fmt: skip
    reader.answers[shard.dcgm_series()] = [series]
    with pytest.raises(IngestError, match="set the cluster's dcgm_host_label to hostname"):
        hour_fetch_shard(cluster=fleet.cluster, hour=HOUR, reader=reader, node_match='=~"gpu-a.*"')  # type: ignore[arg-type]
    Cluster.objects.filter(pk=fleet.cluster.pk).update(dcgm_host_label="hostname")
    fleet.cluster.refresh_from_db()
    hour_fetch_shard(cluster=fleet.cluster, hour=HOUR, reader=reader, node_match='=~"gpu-a.*"')  # type: ignore[arg-type]


def test_work_counters_stored_past_the_admins_checks_are_an_error_not_no_work(fleet: Fleet) -> None:
    Cluster.objects.filter(pk=fleet.cluster.pk).update(work_counters=[{"engine": 7}])
    fleet.cluster.refresh_from_db()
    with pytest.raises(IngestError, match="its work_counters cannot be read"):
        hour_fetch_shard(cluster=fleet.cluster, hour=HOUR, reader=TableReader(), node_match="")  # type: ignore[arg-type]


def test_beat_goes_on_past_an_unreachable_cluster_and_leaves_its_watermark(fleet: Fleet, caplog) -> None:
    IngestWatermark.objects.create(cluster=fleet.cluster, ingested_through=HOUR)
    with caplog.at_level(logging.WARNING, logger="apps.pipeline.ingest"):
        reports = closed_hours_ingest(now=HOUR + 3 * H)
    assert reports == []
    assert IngestWatermark.objects.get(cluster=fleet.cluster).ingested_through == HOUR
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"cluster {fleet.cluster.name}: Prometheus at http://127.0.0.1:9 is unreachable" in said
    assert "will catch up from 2026-11-02T03:00:00+00:00 next run" in said


def test_beat_leaves_a_cluster_another_worker_is_catching_up_alone(fleet: Fleet, caplog, monkeypatch) -> None:
    # given the fleet's one cluster (no default one made), and another worker's session holding its catch-up lock
    monkeypatch.setattr(ingest.fleet, "default_cluster_ensure", lambda: fleet.cluster)
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [locks.CATCHUP, fleet.cluster.pk])
        # when beat runs
        with caplog.at_level(logging.INFO, logger="apps.pipeline.ingest"):
            assert closed_hours_ingest(now=HOUR + 3 * H) == []
        # then the cluster is skipped, not even asked
        assert f"cluster {fleet.cluster.name}: another worker is catching up, skipping" in caplog.text
        assert "unreachable" not in caplog.text
    finally:
        other.close()
