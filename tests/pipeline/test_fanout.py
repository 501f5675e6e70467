"""The ingest fanned out (apps.pipeline.fanout): a batch of shard-hour parts, written in any order by any
worker, derived once, gives exactly the rows of the plain hour-by-hour ingest of the same history; two real
worker processes through Redis, one of them killed mid-task and beat running twice, lose and double nothing."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.core.cache import cache
from django.db.models import F
from django.forms.models import model_to_dict

from apps.core.kept import kept_read
from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline import fanout
from apps.pipeline.ingest import range_ingest
from apps.rollups import documents
from apps.rollups.models import ClusterDay, JobGroupDay, TeamDay
from apps.telemetry import tasks
from apps.telemetry.models import ClusterShard, GpuHour, IngestBatch, IngestedHour, IngestPart, IngestWatermark
from apps.telemetry.shards import ShardOverlapError
from apps.telemetry.tasks import ingest_dispatch_task
from apps.waste.models import Flag
from tests.faults.test_worker_lost import Worker, _pool_process_kill, _wait, _waiting_on_hour_lock
from tests.scenarios import spine_scenario
from tests.servers import child_database_url

pytestmark = pytest.mark.prometheus

H0 = datetime(2026, 11, 2, tzinfo=UTC)
HOURS = 7
NOW = H0 + timedelta(hours=HOURS, minutes=5)  # the spine's last hour has just closed


def _snapshot(cluster: Cluster) -> dict[str, Any]:
    """Every derived row of the cluster, keyed by what names it (not by ids, which differ between clusters)."""
    skip = {"id", "gpu", "job", "cluster", "team", "node", "job_group", "created_at", "updated_at"}

    def row(obj: Any) -> dict[str, Any]:
        return {k: v for k, v in model_to_dict(obj).items() if k not in skip}

    def gpu(g: Any) -> tuple[str, int]:
        return (g.node.hostname, g.index)

    return {
        "gpu_hours": {
            (*gpu(r.gpu), r.hour): row(r)
            for r in GpuHour.objects.filter(gpu__node__cluster=cluster).select_related("gpu__node")
        },
        "job_hours": {
            (r.job.job_key, *gpu(r.gpu), r.hour, r.source): row(r)
            for r in JobGpuHour.objects.filter(job__cluster=cluster).select_related("job", "gpu__node")
        },
        "job_energy": {
            (r.job.job_key, *gpu(r.gpu), r.hour, r.method): r.energy_j
            for r in JobGpuHourEnergy.objects.filter(job__cluster=cluster).select_related("job", "gpu__node")
        },
        "jobs": {j.job_key: {**row(j), "team": j.team.name} for j in Job.objects.filter(cluster=cluster)},
        "flags": {
            (f.kind, f.job.job_key if f.job else "", gpu(f.gpu) if f.gpu else "", f.hour): (f.status, f.evidence)
            for f in Flag.objects.filter(cluster=cluster).select_related("job", "gpu__node")
        },
        "team_days": {(d.team.name, d.day): row(d) for d in TeamDay.objects.filter(cluster=cluster)},
        "cluster_days": {d.day: row(d) for d in ClusterDay.objects.filter(cluster=cluster)},
        "group_days": {(d.job_group.name, d.day): row(d) for d in JobGroupDay.objects.filter(cluster=cluster)},
    }


@pytest.fixture
def history(history_loader):
    return history_loader(spine_scenario())


@pytest.fixture
def plain(history, cluster_for) -> dict[str, Any]:
    """The spine ingested hour by hour, as `manage.py ingest` does: the reference."""
    cluster = cluster_for(history, "plain")
    range_ingest(clusters=[cluster], start=H0, end=H0 + timedelta(hours=HOURS))
    return _snapshot(cluster)


def _sharded(history, cluster_for, **patterns: str) -> Cluster:
    """The same history as the cluster beat fans out ("default"), split by node name, its watermark at H0."""
    cluster = cluster_for(history)
    for name, pattern in patterns.items():
        ClusterShard.objects.create(cluster=cluster, name=name, node_pattern=pattern)
    IngestWatermark.objects.create(cluster=cluster, ingested_through=H0)
    return cluster


@pytest.mark.django_db
def test_a_sharded_batch_in_any_order_writes_exactly_the_plain_ingest_s_rows(history, cluster_for, plain) -> None:
    # given the cluster split in three node groups (slurm-a, slurm-b, and the rest: the dcgm-only node)
    cluster = _sharded(history, cluster_for, a="slurm-a", b="slurm-b")
    # when beat dispatches, and the parts are written in a shuffled order
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    assert len(batch.parts) == HOURS * 3
    parts = random.Random(7).sample(batch.parts, len(batch.parts))
    outcomes = [fanout.part_ingest(part) for part in parts]
    # then an hour is written when its last shard is in, and only the batch's last part fires its derivation
    assert sum(o.written for o in outcomes) == HOURS
    assert [o.batch_complete for o in outcomes] == [False] * (len(parts) - 1) + [True]
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == H0  # nothing derived yet
    assert not IngestedHour.objects.filter(cluster=cluster, derived=True).exists()
    # and once derived, every row is the plain ingest's, to the last bit
    fanout.batch_derive(batch.batch_id)
    fanned = _snapshot(cluster)
    for table in plain:
        assert fanned[table] == plain[table], table
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == H0 + timedelta(hours=HOURS)
    closed = IngestBatch.objects.get(pk=batch.batch_id)
    assert closed.done_at is not None and not IngestPart.objects.filter(batch=closed, staged__isnull=False).exists()
    # and each shard-hour asked the plain hour's fixed queries (the raw samples of a reset, once, by its shard), but
    # those it has nothing to ask with: the work counters' (they name no node: the `rest` shard alone asks them), and
    # dcgm-exporter's power limits and clocks, which a shard with no GPU in the hour does not ask (slurm-a's and
    # slurm-b's in the last hour, past the fleet's end)
    counts = {
        name: dict(IngestedHour.objects.filter(cluster__name=name).values_list("hour", "query_count"))
        for name in ("plain", cluster.name)
    }
    fixed = min(counts["plain"].values())
    expected = {H0 + timedelta(hours=h): 2 * (fixed - 1) for h in range(HOURS)}
    expected[H0 + timedelta(hours=HOURS - 1)] -= 2
    assert {hour: n - counts["plain"][hour] for hour, n in counts[cluster.name].items()} == expected
    # while a second dispatch finds nothing to do, and a late duplicate part changes nothing
    assert [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name] == []
    assert fanout.part_ingest(parts[0]).written is False
    assert _snapshot(cluster) == fanned


@pytest.mark.django_db
def test_shards_whose_patterns_overlap_are_refused_and_the_hour_is_not_written(history, cluster_for) -> None:
    cluster = _sharded(history, cluster_for, a="slurm-.*", b="slurm-b")
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    first_hour = [p for p in batch.parts if p.hour == H0]
    for part in first_hour[:-1]:
        fanout.part_ingest(part)
    with pytest.raises(ShardOverlapError, match="node slurm-b is in shards a and b"):
        fanout.part_ingest(first_hour[-1])
    assert not GpuHour.objects.filter(gpu__node__cluster=cluster).exists()
    assert not IngestedHour.objects.filter(cluster=cluster).exists()


@pytest.mark.django_db
def test_a_stalled_batch_is_derived_as_far_as_written_and_its_missing_parts_queued_again(
    history, cluster_for, plain
) -> None:
    # given a batch whose parts of the last two hours were lost (a broker flushed, a part failing for good)
    cluster = _sharded(history, cluster_for)
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    lost = [p for p in batch.parts if p.hour >= H0 + timedelta(hours=HOURS - 2)]
    for part in batch.parts:
        if part not in lost:
            assert fanout.part_ingest(part).batch_complete is False
    # when beat runs before the batch stalls, nothing is queued; after, the lost parts are, and the batch derived
    assert [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name] == []
    # (nothing fetched for 16 minutes)
    IngestBatch.objects.filter(pk=batch.batch_id).update(queued_at=F("queued_at") - timedelta(minutes=16))
    IngestPart.objects.filter(batch_id=batch.batch_id).update(fetched_at=F("fetched_at") - timedelta(minutes=16))
    [again] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    assert again.parts == lost and again.derive
    fanout.batch_derive(again.batch_id)
    # then the watermark stands after the written hours, and the batch stays open for the rest
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == H0 + timedelta(hours=HOURS - 2)
    assert IngestBatch.objects.get(pk=batch.batch_id).done_at is None
    # and when the lost parts run, the batch completes as if nothing had happened
    assert [fanout.part_ingest(p).batch_complete for p in lost] == [False, True]
    fanout.batch_derive(batch.batch_id)
    fanned = _snapshot(cluster)
    for table in plain:
        assert fanned[table] == plain[table], table


@pytest.mark.django_db(transaction=True)
def test_two_workers_one_killed_mid_task_and_beat_twice_lose_and_double_nothing(
    history, cluster_for, plain, tmp_path
) -> None:
    # given two worker processes on the broker, and the cluster in three shards
    ingest_dispatch_task.app.connection().ensure_connection(max_retries=3)
    ingest_dispatch_task.app.control.purge()
    workers = [Worker(tmp_path / f"worker-{i}.log") for i in range(2)]
    try:
        cluster = _sharded(history, cluster_for, a="slurm-a", b="slurm-b")
        held = H0 + timedelta(hours=2)
        with psycopg.connect(child_database_url(), autocommit=True) as holder:
            # the hour's lock held by another session, so that a part of it is caught mid-task
            holder.execute("SELECT pg_advisory_lock(%s, %s)", [cluster.pk, int(held.timestamp() // 3600)])
            # when beat runs twice
            queued = ingest_dispatch_task(now_iso=NOW.isoformat())
            assert queued == HOURS * 3
            assert ingest_dispatch_task(now_iso=NOW.isoformat()) == 0  # the batch is open: nothing twice
            # and a worker's pool process is killed while its part waits on the held hour
            _wait(lambda: bool(_waiting_on_hour_lock(cluster, held)), workers[0], seconds=60, what="a held part")
            for worker in workers:
                if worker.pool_processes():
                    _pool_process_kill(worker)
            holder.execute("SELECT pg_advisory_unlock(%s, %s)", [cluster.pk, int(held.timestamp() // 3600)])
        # then, the lock released, the batch completes and is derived once
        _wait(lambda: IngestBatch.objects.filter(done_at__isnull=False).exists(), workers[0], seconds=120,
              what="the batch derived")  # fmt: skip
    finally:
        for worker in workers:
            worker.stop()
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == H0 + timedelta(hours=HOURS)
    fanned = _snapshot(cluster)
    for table in plain:
        assert fanned[table] == plain[table], table
    logs = "".join(w.output(tail=200_000) for w in workers)
    assert "ingest_part_task" in logs and "SIGKILL" in logs


@pytest.mark.django_db
def test_the_status_page_shows_a_batch_in_progress_and_why_it_waits(history, cluster_for, admin_client) -> None:
    cluster = _sharded(history, cluster_for, a="slurm-a")
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    fanout.part_failed(batch.parts[0], "Prometheus at http://prom:9090 is unreachable: ConnectionError")
    html = admin_client.get("/status/").content.decode()
    row = html[html.index(f'data-cluster="{cluster.name}"') :]
    assert "ingesting 2026-11-02 00:00 → 07:00 UTC (2 shards per hour)" in row
    assert "2026-11-02 00:00 a: Prometheus at http://prom:9090 is unreachable" in row


@pytest.mark.django_db
def test_a_long_batch_still_fetching_is_not_stalled_and_a_cluster_behind_is_caught_up_at_once(
    history, cluster_for
) -> None:
    cluster = _sharded(history, cluster_for)
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    # given a batch queued long ago whose parts are still coming in
    IngestBatch.objects.filter(pk=batch.batch_id).update(queued_at=F("queued_at") - timedelta(hours=1))
    fanout.part_ingest(batch.parts[0])
    # then beat does not take it for stalled
    assert [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name] == []
    # and once it is derived, where beat aimed is reached: no next batch at once
    for part in batch.parts[1:]:
        fanout.part_ingest(part)
    fanout.batch_derive(batch.batch_id)
    assert not fanout.behind(batch.batch_id)


@pytest.mark.django_db
def test_a_catch_up_longer_than_a_batch_queues_the_next_batch_at_once(history, cluster_for, settings) -> None:
    # given an outage longer than a batch (batches of 3 hours, 7 hours to catch up)
    settings.FLEETWATT_INGEST_BATCH_HOURS = 3
    cluster = _sharded(history, cluster_for)
    [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    assert len(batch.parts) == 3
    # when the batch is written and derived
    for part in batch.parts:
        fanout.part_ingest(part)
    fanout.batch_derive(batch.batch_id)
    # then its cluster is behind where beat aimed, and the next dispatch takes the next three hours
    assert fanout.behind(batch.batch_id)
    [following] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
    assert [p.hour for p in following.parts] == [H0 + timedelta(hours=h) for h in (3, 4, 5)]


@pytest.mark.django_db
def test_a_rollup_asked_before_a_batch_is_ready_in_the_cache_once_the_batch_s_task_has_derived_it(
    history, cluster_for, admin_client, monkeypatch, settings
) -> None:
    settings.FLEETWATT_INGEST_BATCH_HOURS = 3
    cluster = _sharded(history, cluster_for)
    queued: list[Any] = []
    monkeypatch.setattr(tasks.ingest_batch_derive_task, "apply_async", lambda *a, **k: queued.append(a))

    def batch_parts_written() -> int:
        [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
        for part in batch.parts:
            assert tasks.ingest_part_task(part.batch_id, part.hour.isoformat(), part.shard)
        assert queued.pop() == ((batch.batch_id,),)
        return batch.batch_id

    # given the cluster's first three hours ingested by their tasks, and its rollup of the day asked for
    tasks.ingest_batch_derive_task(batch_parts_written())
    url = f"/api/clusters/{cluster.pk}/rollup/?start=2026-11-02&end=2026-11-03&granularity=day"
    before = admin_client.get(url).json()
    # when the next batch's parts are written by their tasks
    batch_id = batch_parts_written()
    # then the rollup kept before answers until they are derived
    assert admin_client.get(url).json() == before
    # and once the batch's task has derived them, the new rollup is in the cache before anyone asks
    tasks.ingest_batch_derive_task(batch_id)
    ask = documents.Ask("cluster", cluster.pk, H0, H0 + timedelta(days=1), "day")
    _, ready = kept_read(documents.KINDS["cluster"].key(cluster, ask))
    assert ready is not None
    after = admin_client.get(url)
    assert after.content == ready
    assert after.json()["totals"]["gpu_hours"] > before["totals"]["gpu_hours"]
    # equal to the rollup computed afresh
    cache.clear()
    assert admin_client.get(url).json() == after.json()


@pytest.mark.django_db
def test_the_rollups_are_prepared_by_the_last_of_the_derivations_queued_together(
    history, cluster_for, monkeypatch, settings
) -> None:
    settings.FLEETWATT_INGEST_BATCH_HOURS = 3
    monkeypatch.setattr(tasks.ingest_batch_derive_task, "apply_async", lambda *a, **k: None)
    prepared: list[int] = []
    monkeypatch.setattr(tasks, "asked_prepare", lambda: prepared.append(1))
    cluster = _sharded(history, cluster_for)

    def batch_written() -> int:
        [batch] = [d for d in fanout.dispatch(now=NOW) if d.cluster == cluster.name]
        for part in batch.parts:
            tasks.ingest_part_task(part.batch_id, part.hour.isoformat(), part.shard)
        return batch.batch_id

    # given another cluster's batch whose derivation is queued too
    other = IngestBatch.objects.create(cluster=cluster_for(history, "other"), start=H0, end=NOW, derive_queued_at=NOW)
    # when a batch is derived meanwhile: no prepare (the other's derivation moves the generation on again)
    tasks.ingest_batch_derive_task(batch_written())
    assert prepared == []
    # then the last derivation of those queued together prepares them, once
    IngestBatch.objects.filter(pk=other.pk).update(done_at=NOW)
    tasks.ingest_batch_derive_task(batch_written())
    assert prepared == [1]
