"""Failed runs: a job whose scheduler says it failed gets a `failed_run` finding with what its GPU time cost,
and the weekly report counts it as waste (issue: what the failed and sweep runs behind a model cost)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import Fact, Scope, derive
from apps.pipeline.scheduler import scheduler_sync
from apps.reports.selectors import report_build
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run
from tests.schedulers.test_sync import END, NOW, START, recorded_sacct

pytestmark = pytest.mark.django_db


@pytest.fixture
def synced(tmp_path: Path) -> dict[str, Job]:
    # given a fleet whose agent saw two jobs Slurm knows: slurm/3 exited 3, slurm/2 completed
    fleet = fleet_build(servers=1, gpus_per_server=4)
    intensity_set("TEST", [0.3] * 24)
    jobs = [
        job_run(fleet, key="slurm/3", gpus=fleet.gpus[:2], hours=2, power_w=500.0),
        job_run(fleet, key="slurm/2", gpus=fleet.gpus[2:], hours=2, power_w=500.0),
    ]
    JobGpuHour.objects.filter(job__in=jobs).update(job_start=T0, first_seen=T0, last_seen=T0 + 2 * HOUR)
    # as the ingest derives its hours: summaries, footprints, findings
    scope = Scope(
        cluster_ids=frozenset([fleet.cluster.pk]), start=T0, end=T0 + 2 * HOUR,
        job_ids=frozenset(j.pk for j in jobs), ingested_through=T0 + 3 * HOUR,
    )  # fmt: skip
    derive(scope, changed={Fact.JOB_ROWS})
    fleet.cluster.scheduler, fleet.cluster.sacct_command = "slurm_sacct", recorded_sacct(tmp_path)
    fleet.cluster.save()
    # when the cluster's accounting is synced
    scheduler_sync(cluster=fleet.cluster, start=START, end=END, now=NOW)
    return {j.job_key: j for j in Job.objects.filter(cluster=fleet.cluster)}


def test_a_failed_run_is_found_with_what_it_cost(synced: dict[str, Job]) -> None:
    failed, completed = synced["slurm/3"], synced["slurm/2"]
    assert (failed.state, failed.exit_code) == ("failed", 3)
    flag = Flag.objects.get(kind="failed_run", job=failed)
    assert flag.evidence["state"] == "failed" and flag.evidence["exit_code"] == 3
    assert Decimal(flag.evidence["cost"]) == failed.cost.quantize(Decimal("0.01")) > 0
    assert flag.evidence["gpu_hours_blocked"] == pytest.approx(4.0)
    assert "failed_run" in failed.flags
    assert completed.state == "completed" and not Flag.objects.filter(kind="failed_run", job=completed).exists()


def test_runs_the_agent_never_saw_are_found_too_and_cost_nothing_measured(synced: dict[str, Job]) -> None:
    timed_out = synced["slurm/1"]  # created from the record: it ran where no agent watched
    assert timed_out.state == "timeout" and timed_out.source == "scheduler"
    assert Flag.objects.get(kind="failed_run", job=timed_out).evidence["cost"] == "0.00"
    # its GPU-hours are the allocation's (no GPU fleetwatt knows to price them on)
    held_h = (timed_out.scheduler_end - timed_out.scheduler_start).total_seconds() / 3600
    assert timed_out.gpu_hours > 0
    assert timed_out.gpu_hours == pytest.approx(timed_out.gpus_allocated * held_h)


def test_syncing_again_changes_no_finding(synced: dict[str, Job], tmp_path: Path) -> None:
    before = sorted(Flag.objects.filter(kind="failed_run").values_list("job__job_key", "evidence"))
    cluster = synced["slurm/3"].cluster
    scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    assert sorted(Flag.objects.filter(kind="failed_run").values_list("job__job_key", "evidence")) == before


def test_the_weekly_report_counts_failed_runs_as_waste(synced: dict[str, Job]) -> None:
    failed = synced["slurm/3"]
    week = date.fromisoformat((T0.date()).isoformat())  # T0 is a Monday
    report = report_build(team=failed.team, week_start=week)
    line = next(w for w in report.waste if w.kind == "failed_run")
    assert line.counted and line.jobs == 1
    assert line.totals.cost == failed.cost
    assert report.waste_total.cost >= failed.cost


def test_the_team_page_lists_failed_runs_with_what_they_cost(synced: dict[str, Job], client) -> None:
    from django.contrib.auth.models import User

    failed = synced["slurm/3"]
    client.force_login(User.objects.create_user("boss", is_staff=True))
    # The job's span is its scheduler's (the recorded accounting ran on 2026-12-01), not the agent's rows'.
    assert failed.start is not None and failed.start.date() == END.date()
    # A finding counts for its job's hours inside the period (docs/arithmetic.md, "Waste in a period"): the period
    # covers the agent's rows (2 November) and the scheduler's span.
    page = client.get(f"/teams/{failed.team_id}/", {"start": "2026-11-02", "end": "2026-12-02"}).content.decode()
    row = next(r for r in page.split("<tr") if 'data-job-key="slurm/3"' in r and "failed_run" in r)
    assert str(failed.cost.quantize(Decimal("0.01"))) in row and "4.0" in row  # money and GPU-hours
