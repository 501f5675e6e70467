"""What the scheduler's allocation changes in the numbers (DESIGN section 8), end to end: the simulator's
fleet with agent outages -> promtool -> a real Prometheus -> the ingest, and the jobs' accounting records ->
the scheduler sync. Every GPU-hour adds up to DCGM's meter; no outage lowers a job's GPU-hours."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from apps.fleet.models import Cluster
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, Source
from apps.pipeline import scheduler as scheduler_sync_module
from apps.pipeline.scheduler import scheduler_sync
from apps.schedulers.slurm import JobState, SchedulerJob
from apps.simulator.scenario import Scenario
from apps.telemetry.models import GpuHour
from apps.waste.models import Flag

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

T0 = datetime(2026, 11, 9, 0, 0, tzinfo=UTC)
HOURS = 6


def outage_scenario() -> dict[str, Any]:
    """Slurm jobs through agent outages: the issue's 4-hour job with 30 minutes unseen, two jobs sharing a
    GPU through an outage, an agent that dies before its job ends, a node with no agent, a GPU allocated
    and never used."""
    return {
        "name": "outages",
        "start": T0.isoformat(),
        "duration": f"{HOURS}h",
        "scrape_interval_s": 15,
        "linger_s": 120,
        "nodes": [
            {"hostname": "gpu-a", "gpus": 2},
            {"hostname": "gpu-b", "gpus": 2},
            {"hostname": "gpu-n", "gpus": 2, "agent": False},  # dcgm-exporter only, no job labels
            {"hostname": "gpu-c", "gpus": 2},
        ],
        "jobs": [
            {"scheduler": "slurm", "job_id": "201", "node": "gpu-a", "gpus": [0, 1], "start": "10m", "end": "4h10m",
             "sm": 80, "power_w": 500, "account": "vision", "user": "ada"},
            {"scheduler": "slurm", "job_id": "202", "node": "gpu-b", "gpus": [0], "start": "30m", "end": "3h30m",
             "sm": 90, "power_w": 600, "account": "nlp", "user": "bob"},
            {"scheduler": "slurm", "job_id": "203", "node": "gpu-b", "gpus": [0], "start": "1h", "end": "3h",
             "sm": 10, "power_w": 200, "account": "nlp", "user": "cy"},
            {"scheduler": "slurm", "job_id": "204", "node": "gpu-b", "gpus": [1], "start": "20m", "end": "5h20m",
             "sm": 70, "power_w": 450, "account": "bio", "user": "dee"},
            {"scheduler": "slurm", "job_id": "205", "node": "gpu-n", "gpus": [0, 1], "start": "1h", "end": "3h",
             "sm": 90, "power_w": 650, "account": "bio", "user": "dee"},
            {"scheduler": "slurm", "job_id": "206", "node": "gpu-c", "gpus": [0], "gpus_requested": 2,
             "start": "30m", "end": "3h30m", "sm": 50, "power_w": 400, "account": "vision", "user": "grace"},
        ],
        "faults": [
            {"kind": "agent_down", "node": "gpu-a", "start": "1h20m", "end": "1h50m"},
            {"kind": "agent_down", "node": "gpu-b", "start": "2h", "end": "2h30m"},
            {"kind": "agent_down", "node": "gpu-b", "start": "4h", "end": f"{HOURS}h"},
        ],
    }  # fmt: skip


def accounting(scenario: Scenario) -> list[SchedulerJob]:
    """What Slurm's accounting says of the scenario's jobs: their spans, GPUs and nodes."""
    records = []
    for spec in scenario.jobs:
        start = T0 + timedelta(seconds=spec.start_s)
        end = T0 + timedelta(seconds=spec.end_s)
        gpus = spec.gpus_requested or len(spec.gpus)
        records.append(
            SchedulerJob(
                job_key=spec.job_key, job_id=spec.job_id, display_id=spec.job_id, user=spec.user,
                account=spec.account, partition="gpu", qos="normal", name=spec.name, state=JobState.COMPLETED,
                state_raw="COMPLETED", exit_code=0, signal=0, submit=start, start=start, end=end,
                gpus_requested=gpus, gpus_allocated=gpus, nodes=(spec.node,),
            )
        )  # fmt: skip
    return records


@pytest.fixture
def synced(history_loader, cluster_for, monkeypatch: pytest.MonkeyPatch) -> tuple[Scenario, Any, Cluster]:
    history = history_loader(outage_scenario())
    cluster = cluster_for(history)
    call_command("ingest", start=T0.isoformat(), end=(T0 + timedelta(hours=HOURS)).isoformat(), verbosity=0)
    cluster.scheduler = Cluster.Scheduler.SLURM_SACCT
    cluster.save()
    records = accounting(history.scenario)
    monkeypatch.setattr(scheduler_sync_module, "scheduler_records_read", lambda **_: records)
    scheduler_sync(cluster=cluster, start=T0, end=T0 + timedelta(hours=HOURS), now=T0 + timedelta(days=1))
    return history.scenario, history, cluster


def _held_gpu_hours(scenario: Scenario) -> dict[str, float]:
    return {s.job_key: (s.gpus_requested or len(s.gpus)) * (s.end_s - s.start_s) / 3600.0 for s in scenario.jobs}


def test_every_gpu_hour_adds_up_to_the_meter(synced) -> None:
    for row in GpuHour.objects.all():
        parts = row.jobs_energy_j + row.idle_energy_j + row.unobserved_j
        assert parts == pytest.approx(row.device_energy_j, rel=0.005), row
        assert row.dcgm_energy_j is not None
        assert row.device_energy_j == pytest.approx(row.dcgm_energy_j, rel=0.005), row
        # what the scheduler charged of the unseen time is part of it, never more
        assert row.estimated_j <= row.unobserved_j + 1e-6, row
        assert row.occupied_s + row.estimated_s <= 3600.0 + 1e-6, row


def test_the_cluster_s_energy_is_the_meter_s(synced) -> None:
    rows = list(GpuHour.objects.all())
    assert sum(r.device_energy_j for r in rows) == pytest.approx(sum(r.dcgm_energy_j for r in rows), rel=0.005)
    jobs_j = sum(j.energy_j for j in Job.objects.all())
    idle_line_j = sum(r.device_energy_j - r.jobs_energy_j - r.estimated_j for r in rows)
    assert jobs_j + idle_line_j == pytest.approx(sum(r.dcgm_energy_j for r in rows), rel=0.005)


def test_an_outage_lowers_no_job_s_gpu_hours(synced) -> None:
    scenario, _, _ = synced
    held = _held_gpu_hours(scenario)
    jobs = {j.job_key: j for j in Job.objects.all()}
    for key in ("slurm/201", "slurm/204", "slurm/205", "slurm/206"):  # alone on their GPUs
        assert jobs[key].gpu_hours == pytest.approx(held[key], rel=0.005), key
    # 202 and 203 share a GPU: together they hold it for the union of their spans, shared by time present
    shared = jobs["slurm/202"].gpu_hours + jobs["slurm/203"].gpu_hours
    assert shared == pytest.approx(3.0, rel=0.005)
    # 201 is the case: 4 hours on 2 GPUs, 30 minutes unseen, charged 8.0 GPU-hours, not 7.0
    assert jobs["slurm/201"].gpu_hours == pytest.approx(8.0, rel=0.005)


def test_the_unseen_energy_is_charged_as_an_estimate(synced) -> None:
    _, history, _ = synced
    jobs = {j.job_key: j for j in Job.objects.all()}
    truth = history.truth
    # alone on its GPUs, constant power: the meter's unseen part is its own
    for key in ("slurm/201", "slurm/204"):
        assert Method.ESTIMATED in jobs[key].attribution_j, key
        assert jobs[key].energy_j == pytest.approx(truth[key].physical_energy_j, rel=0.01), key
        assert "unobserved" in jobs[key].flags, key
    # never seen by any agent: its energy is DCGM's for the GPUs of its whole-node allocation
    job_205 = jobs["slurm/205"]
    assert job_205.source == Source.SCHEDULER
    assert set(job_205.attribution_j) == {Method.ESTIMATED}
    assert job_205.energy_j == pytest.approx(truth["slurm/205"].physical_energy_j, rel=0.01)
    # sharing a GPU through an outage: split by their own seen power, so the two still add up
    pair = jobs["slurm/202"].energy_j + jobs["slurm/203"].energy_j
    assert pair == pytest.approx(truth["slurm/202"].physical_energy_j + truth["slurm/203"].physical_energy_j, rel=0.01)
    assert jobs["slurm/202"].energy_j == pytest.approx(truth["slurm/202"].physical_energy_j, rel=0.03)


def test_coverage_is_seen_over_the_scheduler_s_span(synced) -> None:
    jobs = {j.job_key: j for j in Job.objects.all()}
    # the agent on gpu-b died at 4h; job 204 ran to 5h20m: 4h10m of 5h minus the 30-minute outage
    assert jobs["slurm/204"].coverage == pytest.approx((5 * 3600 - 80 * 60 - 30 * 60) / (5 * 3600), abs=0.01)
    assert jobs["slurm/204"].end == T0 + timedelta(hours=5, minutes=20)
    assert "low_coverage" in jobs["slurm/204"].flags
    assert jobs["slurm/201"].coverage == pytest.approx(3.5 / 4.0, abs=0.01)
    assert jobs["slurm/205"].coverage == 0.0  # nobody saw it: all of it is the estimate


def test_an_allocated_gpu_never_used_is_an_idle_allocation(synced) -> None:
    job = Job.objects.get(job_key="slurm/206")
    flag = Flag.objects.get(job=job, kind="idle_allocation")
    assert flag.evidence["unused_gpus"] == 1
    assert flag.evidence["unused_gpu_hours"] == pytest.approx(3.0, rel=0.005)
    # its GPU-hours cover both GPUs it held; the unused one's energy stays on the idle line
    assert job.gpu_hours == pytest.approx(6.0, rel=0.005)
    estimated = JobGpuHour.objects.filter(job=job, source=Source.ESTIMATED)
    assert sum(r.energy_j for r in estimated) == 0.0


def test_syncing_and_ingesting_again_changes_nothing(synced) -> None:
    _, _, cluster = synced

    def snapshot() -> dict[str, Any]:
        rows = defaultdict(list)
        for r in JobGpuHour.objects.order_by("job_id", "gpu_id", "hour", "source").values_list(
            "job_id", "gpu_id", "hour", "source", "energy_j", "occupancy_s", "cost"
        ):
            rows["rows"].append(r)
        rows["jobs"] = list(
            Job.objects.order_by("pk").values_list("pk", "energy_j", "gpu_hours", "coverage", "cost", "flags")
        )
        rows["gpu_hours"] = list(
            GpuHour.objects.order_by("pk").values_list("pk", "estimated_j", "estimated_s", "idle_cost")
        )
        return rows

    before = snapshot()
    scheduler_sync(cluster=cluster, start=T0, end=T0 + timedelta(hours=HOURS), now=T0 + timedelta(days=1))
    call_command("ingest", start=T0.isoformat(), end=(T0 + timedelta(hours=HOURS)).isoformat(), verbosity=0)
    assert snapshot() == before


def _snapshot() -> dict[str, Any]:
    return {
        "rows": list(
            JobGpuHour.objects.order_by("job_id", "gpu_id", "hour", "source").values_list(
                "job_id", "gpu_id", "hour", "source", "energy_j", "occupancy_s", "cost"
            )
        ),
        "jobs": list(Job.objects.order_by("pk").values_list("pk", "energy_j", "gpu_hours", "coverage", "cost")),
        "gpu_hours": list(GpuHour.objects.order_by("pk").values_list("pk", "estimated_j", "estimated_s", "idle_cost")),
    }


@pytest.mark.django_db(transaction=True)
def test_a_sync_and_an_ingest_of_the_cluster_at_once_take_turns(synced) -> None:
    # given a cluster ingested and synced
    _, _, cluster = synced
    before = _snapshot()
    errors: list[BaseException] = []

    def sync() -> None:
        try:
            scheduler_sync(cluster=cluster, start=T0, end=T0 + timedelta(hours=HOURS), now=T0 + timedelta(days=1))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def ingest() -> None:
        try:
            call_command("ingest", start=T0.isoformat(), end=(T0 + timedelta(hours=HOURS)).isoformat(), verbosity=0)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    # when a sync and a re-ingest of its hours run at once (they write the same rows in different orders)
    threads = [threading.Thread(target=sync), threading.Thread(target=ingest)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # then neither deadlocked or failed, and the rows are what one after the other gives
    assert not errors, errors
    assert _snapshot() == before


def test_a_record_read_again_unchanged_derives_nothing(synced) -> None:
    _, _, cluster = synced
    report = scheduler_sync(cluster=cluster, start=T0, end=T0 + timedelta(hours=HOURS), now=T0 + timedelta(days=2))
    assert report.updated == 6 and not report.changed_job_ids and not report.running_job_ids


def test_a_running_job_is_charged_the_hours_since_its_record_was_last_read(
    history_loader, cluster_for, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the outage fleet ingested, and job 204 (its agent dies at 4 h) recorded as running at 3 h 30 min
    history = history_loader(outage_scenario())
    cluster = cluster_for(history)
    call_command("ingest", start=T0.isoformat(), end=(T0 + timedelta(hours=HOURS)).isoformat(), verbosity=0)
    cluster.scheduler = Cluster.Scheduler.SLURM_SACCT
    cluster.save()
    running = [
        replace(r, state=JobState.RUNNING, state_raw="RUNNING", end=None, exit_code=None)
        for r in accounting(history.scenario)
        if r.job_key == "slurm/204"
    ]
    monkeypatch.setattr(scheduler_sync_module, "scheduler_records_read", lambda **_: running)
    first = scheduler_sync(cluster=cluster, start=T0, end=T0 + timedelta(hours=3, minutes=30),
                           now=T0 + timedelta(hours=3, minutes=30))  # fmt: skip
    job = Job.objects.get(job_key="slurm/204")
    # at first: what the agent saw (to 4 h), and the outage inside the span read so far (2 h to 2 h 30 min)
    assert job.pk in first.changed_job_ids  # (the other jobs, absent from this accounting, are newly missing)
    assert job.end is None and job.gpu_hours == pytest.approx(3 + 40 / 60, rel=0.005)
    # when the same record is read again at 5 h (the agent has been down since 4 h)
    again = scheduler_sync(cluster=cluster, start=T0 + timedelta(hours=3), end=T0 + timedelta(hours=5),
                           now=T0 + timedelta(hours=5))  # fmt: skip
    # then only the hours since its last read are derived, and it holds the GPU to 5 h
    assert (again.changed_job_ids, again.running_job_ids) == (frozenset(), {job.pk})
    job.refresh_from_db()
    assert job.gpu_hours == pytest.approx(4 + 40 / 60, rel=0.005)
    assert job.coverage == pytest.approx(190 / 280, abs=0.01)  # seen 3 h 10 min of 4 h 40 min


def test_the_job_page_says_which_hours_are_estimates(synced, admin_client) -> None:
    job = Job.objects.get(job_key="slurm/201")
    page = admin_client.get(f"/jobs/{job.pk}/").content.decode()
    hours = page.split('id="job-hours"')[1]
    estimated = [row for row in hours.split("<tr>") if ">estimated</span>" in row]
    assert len(estimated) == JobGpuHour.objects.filter(job=job, source=Source.ESTIMATED).count() > 0
    assert "Estimated (not measured)" in page or "estimated" in page.split('id="job-hours"')[0]
