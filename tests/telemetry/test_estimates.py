"""apps.telemetry.estimates: time nobody saw, charged over a window of a cluster's ingested hours from a world built at
the database (no Prometheus). A job its scheduler says held a GPU through an agent outage is charged the unseen time,
and the meter's energy for it, never more than the GPU-hour's unobserved energy; the GPUs it held are those of its
allocation (its indices, or every GPU of its nodes when it had them whole); a job no scheduler describes is charged a
gap the agent saw it on both sides of. Deriving the window again gives the same rows, replacing the old ones; hours
not ingested (unless being written) and hours outside the window are left alone. The arithmetic itself:
tests/telemetry/test_unobserved.py; through the ingest and the scheduler sync: tests/pipeline/test_scheduler_span.py
and test_agent_bridged_gaps.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.fleet.models import Cluster, Gpu, Node
from apps.jobs.methods import Method
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy, Source
from apps.telemetry.estimates import unobserved_estimates_refresh
from apps.telemetry.models import GpuHour, IngestedHour
from tests.factories import ClusterFactory, TeamFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, 0, tzinfo=UTC)
H = timedelta(hours=1)
WATTS = 500.0


@dataclass
class World:
    cluster: Cluster
    gpus: list[Gpu]
    job: Job


def _seen(job: Job, gpu: Gpu, hour: datetime, seconds: float, *, first: datetime | None = None,
          last: datetime | None = None) -> None:  # fmt: skip
    """The agent's row of the job on the GPU in the hour: `seconds` seen at WATTS."""
    JobGpuHour.objects.create(
        job=job, gpu=gpu, hour=hour, source=Source.AGENT, energy_j=WATTS * seconds, sampled_s=seconds,
        occupancy_s=seconds, first_seen=first or hour, last_seen=last or hour + timedelta(seconds=seconds),
        job_start=job.start,
    )  # fmt: skip


def _gpu_hour(gpu: Gpu, hour: datetime, *, seen_s: float, unseen_s: float = 0.0) -> GpuHour:
    """A GPU-hour whose jobs occupied `seen_s`, of which the agent missed `unseen_s` that DCGM metered at WATTS."""
    return GpuHour.objects.create(
        gpu=gpu, hour=hour, source="agent", device_energy_j=WATTS * (seen_s + unseen_s), agent_energy_j=WATTS * seen_s,
        jobs_energy_j=WATTS * seen_s, sampled_s=3600.0 - unseen_s, occupied_s=seen_s, unobserved_s=unseen_s,
        unobserved_j=WATTS * unseen_s,
    )  # fmt: skip


@pytest.fixture
def world() -> World:
    """A Slurm job on gpu-a's GPU 0 for three hours; the agent missed the middle hour's first 30 minutes."""
    cluster = ClusterFactory(name="east")
    node = Node.objects.create(cluster=cluster, hostname="gpu-a")
    gpus = [Gpu.objects.create(node=node, uuid=f"GPU-{i}", index=i) for i in range(2)]
    job = Job.objects.create(
        cluster=cluster, job_key="slurm/1", team=TeamFactory(), start=T0, scheduler="slurm", scheduler_start=T0,
        scheduler_end=T0 + 3 * H, node_list="gpu-a", gpu_indices={"gpu-a": [0]}, gpus_allocated=1,
    )  # fmt: skip
    for h in range(3):
        IngestedHour.objects.create(cluster=cluster, hour=T0 + h * H)
        seen = 1800.0 if h == 1 else 3600.0
        _seen(job, gpus[0], T0 + h * H, seen, first=T0 + h * H + timedelta(seconds=3600 - seen))
        _gpu_hour(gpus[0], T0 + h * H, seen_s=seen, unseen_s=3600.0 - seen)
        _gpu_hour(gpus[1], T0 + h * H, seen_s=0.0, unseen_s=0.0)
    return World(cluster, gpus, job)


def _estimates() -> list[tuple[Any, ...]]:
    return sorted(
        JobGpuHour.objects.filter(source=Source.ESTIMATED).values_list(
            "job__job_key", "gpu__uuid", "hour", "occupancy_s", "energy_j"
        )
    )


def test_a_scheduler_job_is_charged_the_time_nobody_saw_and_the_meters_energy_for_it(world: World) -> None:
    # when the window's estimates are derived
    refresh = unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    # then the job is charged the unseen half hour on its GPU, with DCGM's energy for it
    assert _estimates() == [("slurm/1", "GPU-0", T0 + H, pytest.approx(1800.0), pytest.approx(WATTS * 1800.0))]
    assert refresh.rows == 1 and refresh.job_ids == {world.job.pk} and refresh.start == T0
    (energy,) = JobGpuHourEnergy.objects.filter(method=Method.ESTIMATED)
    assert energy.energy_j == pytest.approx(WATTS * 1800.0) and energy.hour == T0 + H
    # and the GPU-hour says how much of what nobody saw is charged: all of it, no more
    gap = GpuHour.objects.get(gpu=world.gpus[0], hour=T0 + H)
    assert gap.estimated_j == pytest.approx(gap.unobserved_j) and gap.estimated_s == pytest.approx(1800.0)
    assert GpuHour.objects.exclude(pk=gap.pk).filter(estimated_j__gt=0).count() == 0


def test_deriving_again_gives_the_same_rows_in_place_of_the_old(world: World) -> None:
    unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    first = _estimates()
    totals = sorted(GpuHour.objects.values_list("gpu_id", "hour", "estimated_s", "estimated_j"))
    refresh = unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    assert _estimates() == first and refresh.job_ids == {world.job.pk}
    assert sorted(GpuHour.objects.values_list("gpu_id", "hour", "estimated_s", "estimated_j")) == totals
    assert JobGpuHourEnergy.objects.filter(method=Method.ESTIMATED).count() == 1


def test_an_estimate_never_charges_more_than_the_gpu_hour_left(world: World) -> None:
    # given a second job the scheduler put on the same GPU for the same hours (a record that overlaps)
    other = Job.objects.create(
        cluster=world.cluster, job_key="slurm/2", team=world.job.team, start=T0, scheduler="slurm",
        scheduler_start=T0, scheduler_end=T0 + 3 * H, node_list="gpu-a", gpu_indices={"gpu-a": [0]},
    )  # fmt: skip
    unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    # then the two claims share the unseen half hour: the GPU-hour is never charged twice
    rows = JobGpuHour.objects.filter(source=Source.ESTIMATED, hour=T0 + H)
    assert {r.job_id for r in rows} == {world.job.pk, other.pk}
    assert sum(r.occupancy_s for r in rows) == pytest.approx(1800.0)
    assert sum(r.energy_j for r in rows) <= WATTS * 1800.0 * (1 + 1e-9)


def test_a_job_with_its_nodes_whole_held_every_gpu_of_them(world: World) -> None:
    # given the job's record naming no indices, and as many GPUs as its node has; the other GPU unseen for an hour
    Job.objects.filter(pk=world.job.pk).update(gpu_indices={}, gpus_allocated=2)
    GpuHour.objects.filter(gpu=world.gpus[1], hour=T0 + 2 * H).update(
        unobserved_s=3600.0, unobserved_j=WATTS * 3600.0, sampled_s=0.0
    )
    unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    # then the other GPU is the job's each hour: held while seen idle is occupancy without energy, and the hour
    # nobody saw takes the meter's energy
    on_other = [(hour, occupancy, energy) for _, gpu, hour, occupancy, energy in _estimates() if gpu == "GPU-1"]
    assert on_other == [
        (T0, pytest.approx(3600.0), 0.0),
        (T0 + H, pytest.approx(3600.0), 0.0),
        (T0 + 2 * H, pytest.approx(3600.0), pytest.approx(WATTS * 3600.0)),
    ]
    assert [hour for _, gpu, hour, _, _ in _estimates() if gpu == "GPU-0"] == [T0 + H]


def test_a_job_that_held_part_of_a_node_holds_only_what_it_was_measured_on_or_allocated(world: World) -> None:
    Job.objects.filter(pk=world.job.pk).update(gpu_indices={}, gpus_allocated=1)  # 1 of 2: not the node whole
    GpuHour.objects.filter(gpu=world.gpus[1], hour=T0 + 2 * H).update(unobserved_s=3600.0, unobserved_j=1e6)
    unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    assert [gpu for _, gpu, _, _, _ in _estimates()] == ["GPU-0"]  # measured there; GPU-1 is not its


def test_hours_not_ingested_are_left_alone_unless_being_written(world: World) -> None:
    IngestedHour.objects.filter(hour=T0 + H).delete()
    refresh = unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    assert _estimates() == [] and refresh.rows == 0
    # the hour an ingest is writing (its record not made yet) is derived
    unobserved_estimates_refresh(cluster=world.cluster, start=T0 + H, end=T0 + 2 * H, writing=True)
    assert [hour for _, _, hour, _, _ in _estimates()] == [T0 + H]


def test_a_window_replaces_its_own_estimates_only(world: World) -> None:
    unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    # when the scheduler's record moves and only the last hour is derived again
    Job.objects.filter(pk=world.job.pk).update(scheduler_end=T0 + H)
    unobserved_estimates_refresh(cluster=world.cluster, start=T0 + 2 * H, end=T0 + 3 * H)
    # then the estimate before the window stays as it was
    assert [hour for _, _, hour, _, _ in _estimates()] == [T0 + H]
    # and deriving its hour again drops it (the job no longer held the GPU then)
    refresh = unobserved_estimates_refresh(cluster=world.cluster, start=T0 + H, end=T0 + 2 * H)
    assert _estimates() == [] and refresh.job_ids == {world.job.pk}
    assert GpuHour.objects.filter(estimated_j__gt=0).count() == 0


def test_a_gap_the_agent_saw_a_job_on_both_sides_of_is_charged_without_a_scheduler(world: World) -> None:
    # given the job without a scheduler record, seen by the agent before and after the gap (one run: one start)
    Job.objects.filter(pk=world.job.pk).update(scheduler_start=None, scheduler_end=None, node_list="",
                                               gpu_indices={}, gpus_allocated=None)  # fmt: skip
    # when
    unobserved_estimates_refresh(cluster=world.cluster, start=T0 + H, end=T0 + 2 * H)
    # then it is charged the gap, from the unseen time only
    assert _estimates() == [("slurm/1", "GPU-0", T0 + H, pytest.approx(1800.0), pytest.approx(WATTS * 1800.0))]


def test_a_key_used_again_by_another_run_bridges_nothing(world: World) -> None:
    Job.objects.filter(pk=world.job.pk).update(scheduler_start=None, scheduler_end=None)
    # the sighting after the gap reports another start: not the same run
    JobGpuHour.objects.filter(hour=T0 + 2 * H).update(job_start=T0 + 2 * H)
    unobserved_estimates_refresh(cluster=world.cluster, start=T0 + H, end=T0 + 2 * H)
    assert _estimates() == []


def test_a_cluster_with_no_scheduler_and_nothing_unseen_writes_nothing(world: World) -> None:
    Job.objects.filter(pk=world.job.pk).update(scheduler_start=None, scheduler_end=None)
    GpuHour.objects.update(unobserved_s=0.0, unobserved_j=0.0)
    refresh = unobserved_estimates_refresh(cluster=world.cluster, start=T0, end=T0 + 3 * H)
    assert refresh.rows == 0 and refresh.job_ids == set() and _estimates() == []
