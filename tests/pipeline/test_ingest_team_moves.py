"""A job the ingest moves to another team (its scheduler identity now matches another team's rule) moves with all
its hours: the teams' daily sums of its earlier days follow it, as they do when an admin reassigns a job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.fleet.models import Team, TeamRule
from apps.jobs.models import Job
from apps.pipeline.fanout import hours_derive
from apps.pipeline.ingest import Fetched, hour_write
from apps.rollups.models import TeamDay
from apps.telemetry import promql
from apps.telemetry import services as telemetry
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import HourInput, SeriesWindow
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db

LAST_HOUR_OF_A_DAY = datetime(2026, 11, 2, 23, tzinfo=UTC)


def _rise(labels: dict[str, str], value: float) -> SeriesWindow:
    return SeriesWindow(labels=labels, window=CounterWindow(last=value, anchor=None, minimum=value))


def _hour_of_one_job(hour: datetime, uuid: str, hostname: str, joules: float) -> HourInput:
    """The agent watched one GPU the whole hour, one Slurm job of account `acct` on it."""
    gpu = {"hostname": hostname, "gpu": "0", "uuid": uuid}
    job = {**gpu, "job_key": "slurm/7"}
    data = HourInput(hour_start=hour.timestamp(), scrape_interval_s=15)
    data.counters = {
        promql.GPU_ENERGY: [_rise(gpu, joules)],
        promql.GPU_IDLE_ENERGY: [_rise(gpu, 0.0)],
        promql.GPU_SAMPLED: [_rise(gpu, 3600.0)],
        promql.JOB_ENERGY: [_rise({**job, "method": "whole_gpu"}, joules)],
        promql.JOB_SAMPLED: [_rise(job, 3600.0)],
        promql.JOB_OCCUPANCY: [_rise(job, 3600.0)],
        promql.AGENT_SAMPLES: [_rise({"hostname": hostname}, 3600.0)],
    }
    data.job_gauges = [("last_seen", job, hour.timestamp() + 3600.0)]
    data.job_info = [
        {"hostname": hostname, "job_key": "slurm/7", "scheduler": "slurm", "job_id": "7", "account": "acct"}
    ]
    data.agent_info = [{"hostname": hostname, "version": "0.1.0"}]
    return data


@pytest.mark.parametrize("derive_now", [True, False], ids=["hour-by-hour", "fanned-out"])
def test_a_job_the_ingest_moves_to_another_team_takes_its_earlier_days_with_it(derive_now: bool) -> None:
    # given a job charged to vision by its account's rule, ingested for the last hour of a day
    fleet = fleet_build(servers=1, gpus_per_server=1)
    gpu = fleet.gpus[0]
    vision, nlp = Team.objects.create(name="t-vision"), Team.objects.create(name="t-nlp")
    rule = TeamRule.objects.create(cluster=fleet.cluster, kind=TeamRule.Kind.SLURM_ACCOUNT, value="acct", team=vision)
    first, second = LAST_HOUR_OF_A_DAY, LAST_HOUR_OF_A_DAY + timedelta(hours=1)
    hour_write(
        cluster=fleet.cluster,
        hour=first,
        fetched=Fetched(_hour_of_one_job(first, gpu.uuid, gpu.node.hostname, 1e6), None, 0, 0.0),
    )
    assert set(TeamDay.objects.values_list("team__name", "day")) == {("t-vision", first.date())}
    # when the account's rule now names nlp, and the job's next hour (the next day's first) is ingested
    rule.team = nlp
    rule.save()
    hour_write(
        cluster=fleet.cluster,
        hour=second,
        fetched=Fetched(_hour_of_one_job(second, gpu.uuid, gpu.node.hostname, 2e6), None, 0, 0.0),
        derive_now=derive_now,
    )
    if not derive_now:  # the fan-out: the batch's one derivation follows its parts
        telemetry.cluster_write_lock(cluster=fleet.cluster)
        hours_derive(cluster=fleet.cluster, start=second, end=second + timedelta(hours=1))
    # then the job is nlp's, and so are both its days: vision keeps no day of a job it no longer pays for
    assert Job.objects.get().team == nlp
    days = {(team, day): energy for team, day, energy in TeamDay.objects.values_list("team__name", "day", "energy_j")}
    assert days == {("t-nlp", first.date()): 1e6, ("t-nlp", second.date()): 2e6}
