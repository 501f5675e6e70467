"""apps.telemetry.services: an hour's rows replaced by what the source answered, at the database. Writing the same
answer again changes no row; an answer that no longer has a row (a job, a split method, a GPU, a work row) deletes
it, and the rest is upserted on natural keys; the stored GPU-hours keep their energy conserved (jobs + idle +
unattributed = the agent's meter, the job rows adding up to the jobs' energy); the hour's estimates are dropped, to be
derived again; nodes, GPUs and jobs follow the answer (a GPU moved, a job's team by the rules unless an admin set
it); work of a job the cluster does not have is returned, not stored. The watermark moves over contiguous ingested,
derived, closed hours only. The whole ingest with its derivations: tests/pipeline/test_ingest.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection, transaction

from apps.core import locks
from apps.fleet.models import Gpu, Node, TeamRule
from apps.fleet.selectors import TeamResolver
from apps.fleet.services import unassigned_team_ensure
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy, JobWorkHour, Source
from apps.telemetry.hour import GpuHourRow, GpuRef, HourResult, JobGpuHourRow, JobMeta
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from apps.telemetry.services import (
    HOUR,
    HourReport,
    cluster_hour_lock,
    cluster_retention_record,
    cluster_write_lock,
    hour_floor,
    hour_rows_write,
    hours_between,
    ingested_hour_record,
    last_closed_hour,
    watermark_advance,
)
from apps.telemetry.work import WorkRow
from tests.factories import ClusterFactory, TeamFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, 3, tzinfo=UTC)


def _result(
    jobs: dict[str, dict[str, float]],
    *,
    idle_j: float = 2e5,
    uuid: str = "GPU-1",
    host: str = "gpu-a",
    index: int = 0,
    model: str = "NVIDIA H200",
    metas: dict[str, JobMeta] | None = None,
) -> HourResult:
    """One agent GPU-hour: each job's energy per split method, and the idle energy; the meter is their sum."""
    jobs_j = sum(sum(m.values()) for m in jobs.values())
    rows = [
        JobGpuHourRow(job_key=key, uuid=uuid, source="agent", energy_by_method=dict(by_method), sampled_s=3600.0,
                      occupancy_s=3600.0 / len(jobs), last_seen=T0.timestamp() + 3599.0)
        for key, by_method in jobs.items()
    ]  # fmt: skip
    gpu = GpuHourRow(
        uuid=uuid, source="agent", device_energy_j=jobs_j + idle_j, agent_energy_j=jobs_j + idle_j,
        dcgm_energy_j=None, jobs_energy_j=jobs_j, idle_energy_j=idle_j, sampled_s=3600.0, occupied_s=3600.0,
    )  # fmt: skip
    metas = metas or {}
    return HourResult(
        gpus={uuid: GpuRef(uuid, host, index, model)},
        gpu_hours=[gpu],
        job_hours=rows,
        jobs={key: metas.get(key, JobMeta(job_key=key, scheduler="slurm", job_id=key.split("/")[-1])) for key in jobs},
    )


def _write(cluster: Any, result: HourResult, hour: datetime = T0, work: tuple[WorkRow, ...] = ()) -> Any:
    teams = TeamResolver(cluster=cluster, unassigned=unassigned_team_ensure())
    with transaction.atomic():
        return hour_rows_write(cluster=cluster, hour=hour, result=result, teams=teams, work=work)


def _stored() -> dict[str, list[tuple]]:
    return {
        "jobs": sorted(Job.objects.values_list("pk", "job_key", "team_id", "user", "source")),
        "rows": sorted(
            JobGpuHour.objects.values_list(
                "pk", "job__job_key", "gpu__uuid", "hour", "source", "energy_j", "sampled_s", "occupancy_s", "last_seen"
            )
        ),
        "energy": sorted(JobGpuHourEnergy.objects.values_list("job__job_key", "hour", "method", "energy_j")),
        "gpu_hours": sorted(
            GpuHour.objects.values_list(
                "pk",
                "gpu__uuid",
                "hour",
                "device_energy_j",
                "jobs_energy_j",
                "idle_energy_j",
                "unattributed_j",
                "estimated_j",
            )
        ),
        "gpus": sorted(Gpu.objects.values_list("pk", "uuid", "node__hostname", "index", "model_name")),
        "work": sorted(JobWorkHour.objects.values_list("job__job_key", "hour", "engine", "model", "output_tokens")),
    }


def test_an_hour_is_written_with_its_energy_conserved() -> None:
    # given a cluster and an answer: two jobs on one GPU, one split two ways
    cluster = ClusterFactory()
    result = _result({"slurm/1": {"whole_gpu": 1.2e6}, "slurm/2": {"sm_time": 3e5, "memory": 1e5}})
    # when
    written = _write(cluster, result)
    # then its node, GPU, jobs and rows are there, and the job rows add up to the GPU-hour's jobs' energy
    assert written.new_nodes and Node.objects.get(cluster=cluster).hostname == "gpu-a"
    assert set(Job.objects.values_list("job_key", flat=True)) == {"slurm/1", "slurm/2"}
    assert written.job_ids == set(Job.objects.values_list("pk", flat=True))
    (gpu_hour,) = GpuHour.objects.all()
    rows = list(JobGpuHour.objects.all())
    assert sum(r.energy_j for r in rows) == gpu_hour.jobs_energy_j == 1.6e6
    assert gpu_hour.jobs_energy_j + gpu_hour.idle_energy_j + gpu_hour.unattributed_j == gpu_hour.agent_energy_j
    assert sum(JobGpuHourEnergy.objects.values_list("energy_j", flat=True)) == 1.6e6
    assert written.rows == {"jobs_job": 2, "jobs_jobgpuhour": 2, "jobs_jobgpuhourenergy": 3, "telemetry_gpuhour": 1,
                            "jobs_jobworkhour": 0}  # fmt: skip
    assert written.ingested_through == T0 + HOUR


def test_writing_the_same_answer_again_changes_no_row() -> None:
    cluster = ClusterFactory()
    result = _result({"slurm/1": {"whole_gpu": 1.2e6}, "slurm/2": {"sm_time": 3e5}})
    _write(cluster, result)
    before = _stored()
    again = _write(cluster, result)
    assert _stored() == before  # the same ids too: updated in place, nothing deleted and made again
    assert not again.new_nodes and again.team_moved_job_ids == set()


def test_what_the_new_answer_no_longer_has_is_deleted() -> None:
    # given an hour written with two jobs, one split two ways
    cluster = ClusterFactory()
    _write(cluster, _result({"slurm/1": {"sm_time": 3e5, "memory": 1e5}, "slurm/2": {"whole_gpu": 1e6}}))
    gone = Job.objects.get(job_key="slurm/2")
    # when the source now answers the first job alone, split one way
    written = _write(cluster, _result({"slurm/1": {"sm_time": 4e5}}))
    # then the second job's row and the first's other method are gone; the job itself stays, and is derived again
    assert list(JobGpuHour.objects.values_list("job__job_key", flat=True)) == ["slurm/1"]
    assert list(JobGpuHourEnergy.objects.values_list("method", "energy_j")) == [("sm_time", 4e5)]
    assert Job.objects.filter(pk=gone.pk).exists() and gone.pk in written.job_ids
    assert GpuHour.objects.get().jobs_energy_j == 4e5


def test_a_gpu_the_answer_no_longer_has_loses_its_gpu_hour_and_another_hour_is_left_alone() -> None:
    cluster = ClusterFactory()
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, uuid="GPU-1"))
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, uuid="GPU-1"), hour=T0 + HOUR)
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, uuid="GPU-2", index=1))
    assert sorted(GpuHour.objects.values_list("gpu__uuid", "hour")) == [("GPU-1", T0 + HOUR), ("GPU-2", T0)]


def test_the_hours_estimates_are_dropped_to_be_derived_again() -> None:
    # given an hour with an estimate of time nobody saw charged to a job
    cluster = ClusterFactory()
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}))
    job, gpu = Job.objects.get(), Gpu.objects.get()
    JobGpuHour.objects.create(job=job, gpu=gpu, hour=T0, source=Source.ESTIMATED, energy_j=5e4, occupancy_s=100)
    JobGpuHourEnergy.objects.create(job=job, gpu=gpu, hour=T0, method=Method.ESTIMATED, energy_j=5e4)
    GpuHour.objects.update(estimated_j=5e4, estimated_s=100)
    # when the hour is written again
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}))
    # then the estimate is gone, and the GPU-hour's estimates are zero until derived
    assert not JobGpuHour.objects.filter(source=Source.ESTIMATED).exists()
    assert not JobGpuHourEnergy.objects.filter(method=Method.ESTIMATED).exists()
    assert GpuHour.objects.values_list("estimated_j", "estimated_s").get() == (0.0, 0.0)


def test_a_gpu_that_moved_or_got_its_model_named_is_updated_and_an_empty_model_keeps_the_known_one() -> None:
    cluster = ClusterFactory()
    _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, host="gpu-a", index=0, model="NVIDIA H200"))
    written = _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, host="gpu-b", index=3, model=""))
    assert written.new_nodes
    assert Gpu.objects.values_list("uuid", "node__hostname", "index", "model_name").get() == (
        "GPU-1", "gpu-b", 3, "NVIDIA H200",
    )  # fmt: skip


def test_a_jobs_team_follows_the_rules_unless_an_admin_set_it() -> None:
    # given two jobs written while no rule matched them
    cluster = ClusterFactory()
    metas = {
        key: JobMeta(job_key=key, scheduler="slurm", job_id=key[-1], account="vision") for key in ("slurm/1", "slurm/2")
    }
    result = _result({"slurm/1": {"whole_gpu": 1e6}, "slurm/2": {"whole_gpu": 1e6}}, metas=metas)
    _write(cluster, result)
    assert set(Job.objects.values_list("team__name", flat=True)) == {"unassigned"}
    Job.objects.filter(job_key="slurm/2").update(team=TeamFactory(name="finance-set"), team_locked=True)
    # when a rule now charges the account to a team, and the hour is written again
    vision = TeamFactory(name="vision")
    TeamRule.objects.create(team=vision, kind=TeamRule.Kind.SLURM_ACCOUNT, value="vision")
    written = _write(cluster, result)
    # then the first job moves (and says so); the one an admin charged stays
    assert dict(Job.objects.values_list("job_key", "team__name")) == {"slurm/1": "vision", "slurm/2": "finance-set"}
    assert written.team_moved_job_ids == {Job.objects.get(job_key="slurm/1").pk}


def test_a_job_whose_user_changes_is_said_to_move_as_one_whose_team_does() -> None:
    # given a job written with the user its scheduler gave
    cluster = ClusterFactory()
    meta = JobMeta(job_key="slurm/1", scheduler="slurm", job_id="1", user="ada")
    first = _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, metas={"slurm/1": meta}))
    assert first.team_moved_job_ids == set()
    # when the hour is written again under another user's name
    renamed = JobMeta(job_key="slurm/1", scheduler="slurm", job_id="1", user="bob")
    written = _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}, metas={"slurm/1": renamed}))
    # then the job is among those whose earlier days are summed again (a team's split by user reads them)
    assert written.team_moved_job_ids == {Job.objects.get(job_key="slurm/1").pk}
    assert Job.objects.get().user == "bob"


def test_work_of_a_job_the_cluster_has_is_stored_and_of_one_it_has_not_is_returned() -> None:
    # given a job seen in an earlier hour, and one in this hour
    cluster = ClusterFactory()
    _write(cluster, _result({"k8s/ml/old": {"whole_gpu": 1e6}}), hour=T0 - HOUR)
    work = (
        WorkRow("k8s/ml/serve", "vllm", model="llama", output_tokens=1000.0),
        WorkRow("k8s/ml/old", "vllm", model="llama", output_tokens=50.0),
        WorkRow("k8s/ml/ghost", "vllm", model="llama", output_tokens=7.0),
    )
    written = _write(cluster, _result({"k8s/ml/serve": {"whole_gpu": 1e6}}), work=work)
    assert sorted(JobWorkHour.objects.values_list("job__job_key", "output_tokens")) == [
        ("k8s/ml/old", 50.0), ("k8s/ml/serve", 1000.0),
    ]  # fmt: skip
    assert [w.job_key for w in written.work_without_job] == ["k8s/ml/ghost"]
    # and work the next answer lacks is deleted
    _write(cluster, _result({"k8s/ml/serve": {"whole_gpu": 1e6}}), work=work[:1])
    assert list(JobWorkHour.objects.values_list("job__job_key", flat=True)) == ["k8s/ml/serve"]


def test_jobs_that_may_have_ended_before_the_hour_are_derived_with_it() -> None:
    # given a job last seen long before the hour, with no end, and one that ended
    cluster = ClusterFactory()
    team = unassigned_team_ensure()
    quiet = Job.objects.create(cluster=cluster, job_key="slurm/9", team=team, last_seen=T0 - 5 * HOUR)
    Job.objects.create(cluster=cluster, job_key="slurm/8", team=team, last_seen=T0 - 5 * HOUR, end=T0 - 5 * HOUR)
    written = _write(cluster, _result({"slurm/1": {"whole_gpu": 1e6}}))
    assert quiet.pk in written.job_ids
    assert Job.objects.get(job_key="slurm/8").pk not in written.job_ids


def _report(cluster: Any, hour: datetime) -> HourReport:
    return HourReport(cluster=cluster.name, hour=hour, gpus=1, jobs=1, query_count=12, prometheus_s=0.1, duration_s=1.0)


def test_the_watermark_moves_over_contiguous_derived_closed_hours_only() -> None:
    cluster = ClusterFactory()
    for h in (0, 1, 3):  # a hole at 2
        ingested_hour_record(cluster=cluster, hour=T0 + h * HOUR, report=_report(cluster, T0 + h * HOUR))
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == T0 + 2 * HOUR
    # an hour written but waiting for its batch's derivation holds the watermark before it
    ingested_hour_record(cluster=cluster, hour=T0 + 2 * HOUR, report=_report(cluster, T0), pending_job_ids={5, 3})
    pending = IngestedHour.objects.get(cluster=cluster, hour=T0 + 2 * HOUR)
    assert not pending.derived and pending.pending_job_ids == [3, 5]
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == T0 + 2 * HOUR
    # once derived, the watermark moves over it and the hour after it
    IngestedHour.objects.filter(pk=pending.pk).update(derived=True)
    watermark_advance(cluster)
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == T0 + 4 * HOUR


def test_an_hour_ingested_while_still_open_does_not_move_the_watermark() -> None:
    cluster = ClusterFactory()
    closed = last_closed_hour()
    for hour in (closed, closed + HOUR):  # the second is the hour under way (or not yet settled)
        ingested_hour_record(cluster=cluster, hour=hour, report=_report(cluster, hour))
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == closed + HOUR


def test_the_hours_record_keeps_what_it_took_and_what_it_could_not_store() -> None:
    cluster = ClusterFactory()
    report = _report(cluster, T0)
    report.rows = {"jobs_jobgpuhour": 2}
    ingested_hour_record(cluster=cluster, hour=T0, report=report)
    record = IngestedHour.objects.get(cluster=cluster)
    assert (record.query_count, record.derived, record.stats["rows"]) == (12, True, {"jobs_jobgpuhour": 2})
    assert record.stats["no_energy_meter"] == record.stats["work_without_job"] == []


def test_the_sources_retention_is_written_only_when_it_changed(django_assert_num_queries) -> None:
    cluster = ClusterFactory()
    cluster_retention_record(cluster=cluster, retention=timedelta(days=15))
    cluster.refresh_from_db()
    assert cluster.source_retention_s == 15 * 86400
    with django_assert_num_queries(0):
        cluster_retention_record(cluster=cluster, retention=timedelta(days=15))
    cluster_retention_record(cluster=cluster, retention=None)
    cluster.refresh_from_db()
    assert cluster.source_retention_s is None


def test_the_locks_are_the_ones_apps_core_locks_lists() -> None:
    cluster = ClusterFactory()
    with transaction.atomic():
        cluster_hour_lock(cluster=cluster, hour=T0)
        cluster_write_lock(cluster=cluster)
        cluster_write_lock(cluster=cluster)  # re-entrant within the transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
                           "AND pid = pg_backend_pid()")  # fmt: skip
            held = set(cursor.fetchall())
    assert held == {(cluster.pk, int(T0.timestamp()) // 3600), (locks.CLUSTER_WRITE, cluster.pk)}


def test_hours_are_whole_utc_hours() -> None:
    assert hour_floor(datetime(2026, 11, 2, 4, 59, 59, tzinfo=UTC)) == datetime(2026, 11, 2, 4, tzinfo=UTC)
    berlin = datetime(2026, 11, 2, 5, 30, tzinfo=UTC).astimezone(timezone(timedelta(hours=1)))
    assert hour_floor(berlin) == datetime(2026, 11, 2, 5, tzinfo=UTC)
    assert hours_between(T0, T0 + 3 * HOUR) == [T0, T0 + HOUR, T0 + 2 * HOUR]
    assert hours_between(T0, T0) == []
    assert last_closed_hour(datetime(2026, 11, 2, 12, 0, 30, tzinfo=UTC)) == datetime(2026, 11, 2, 10, tzinfo=UTC)
    assert last_closed_hour(datetime(2026, 11, 2, 12, 1, 30, tzinfo=UTC)) == datetime(2026, 11, 2, 11, tzinfo=UTC)
