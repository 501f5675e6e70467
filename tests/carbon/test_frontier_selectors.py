"""Reads of the frontier of recurring workloads (apps/carbon/frontier_selectors.py): a group's runs in the unit most
of them count, each run's power limit, the GPU model, the groups listed, and a period's saving in kWh, kg and money;
only ever over the jobs the caller passes. The worked example through the API is tests/carbon/test_frontier_api.py;
the arithmetic apps/jobs/frontier.py's (tests/jobs/test_frontier.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from apps.carbon.frontier_selectors import fleet_saving, frontiers, group_frontier, group_runs, group_saving
from apps.carbon.models import GpuModel, JobGroup, Site
from apps.fleet.models import Gpu, Team
from apps.jobs.models import Job, JobGpuHour, JobWorkHour
from apps.telemetry.models import GpuHour

from .fleet_builder import HOUR, T0, Fleet, fleet_build

pytestmark = pytest.mark.django_db

STEPS = 1_000.0


def _run(
    fleet: Fleet,
    group: JobGroup,
    k: int,
    *,
    cap_w: float | None = 700.0,
    s: float = 2.0,
    j: float = 1200.0,
    unit: str | None = "step",
    least_w: float | None = None,
    team: Team | None = None,
    gpu: Gpu | None = None,
) -> Job:
    """Run k: alone on a GPU in hour k, 1,000 units of its own counter (unit None: no counter) at a power limit."""
    start = T0 + k * HOUR
    gpu = gpu or fleet.gpus[0]
    job = Job.objects.create(
        cluster=fleet.cluster, job_key=f"slurm/{group.name}-{k}", team=team or fleet.team, start=start,
        end=start + timedelta(seconds=s * STEPS), energy_j=j * STEPS, gpu_count=1, job_group=group,
        facility_kwh=j * STEPS / 3.6e6 * 1.5, operational_kg=j * STEPS / 3.6e6 * 1.5 * 0.4, currency="EUR",
    )  # fmt: skip
    JobGpuHour.objects.create(job=job, gpu=gpu, hour=start, source="agent", energy_j=j * STEPS, sampled_s=s * STEPS)
    GpuHour.objects.update_or_create(
        gpu=gpu, hour=start,
        defaults={"source": "agent", "device_energy_j": j * STEPS, "power_limit_w": cap_w,
                  "power_limit_min_w": least_w if least_w is not None else cap_w, "power_limit_max_w": cap_w},
    )  # fmt: skip
    if unit is not None:
        JobWorkHour.objects.create(job=job, hour=start, engine="fleetwatt", unit=unit, units=STEPS)
    return job


@pytest.fixture
def fleet() -> Fleet:
    return fleet_build(servers=1, gpus_per_server=2)


@pytest.fixture
def group() -> JobGroup:
    return JobGroup.objects.create(name="pretrain", match_kind="name_prefix", match_value="pretrain-")


# group_runs


def test_runs_are_read_in_the_unit_most_of_them_count(fleet: Fleet, group: JobGroup) -> None:
    # given two runs counting steps, one counting samples, one counting nothing, and one still running
    a, b = _run(fleet, group, 0), _run(fleet, group, 1)
    _run(fleet, group, 2, unit="sample")
    _run(fleet, group, 3, unit=None)
    Job.objects.filter(pk=_run(fleet, group, 4).pk).update(end=None)
    # when
    unit, runs, other = group_runs(group=group, jobs=Job.objects.all())
    # then the step runs, each with its time, units and energy; the other two counted apart; the running one not at all
    assert unit == "step"
    assert sorted((r.job_id, r.seconds, r.units, r.energy_j, r.cap_w) for r in runs) == [
        (a.pk, 2000.0, STEPS, 1.2e6, 700.0), (b.pk, 2000.0, STEPS, 1.2e6, 700.0)
    ]  # fmt: skip
    assert other == 2


def test_work_a_job_reported_counts_where_it_has_no_counter(fleet: Fleet, group: JobGroup) -> None:
    job = _run(fleet, group, 0, unit=None)
    Job.objects.filter(pk=job.pk).update(work_units=500.0, work_unit="")
    unit, runs, other = group_runs(group=group, jobs=Job.objects.all())
    assert (unit, [r.units for r in runs], other) == ("run", [500.0], 0)


def test_a_group_whose_runs_count_nothing_has_no_unit(fleet: Fleet, group: JobGroup) -> None:
    _run(fleet, group, 0, unit=None)
    assert group_runs(group=group, jobs=Job.objects.all()) == ("", [], 1)


def test_a_runs_limit_is_weighted_by_its_time_and_a_changed_one_is_marked(fleet: Fleet, group: JobGroup) -> None:
    # given a run over two GPU-hours at 600 W (1,000 s) and 400 W (3,000 s), and a run whose limit moved in its hour
    two = _run(fleet, group, 0, cap_w=600.0)
    later = T0 + HOUR
    JobGpuHour.objects.create(job=two, gpu=fleet.gpus[1], hour=later, source="agent", energy_j=1.0, sampled_s=3000)
    GpuHour.objects.create(gpu=fleet.gpus[1], hour=later, source="agent", device_energy_j=1.0, power_limit_w=400.0,
                           power_limit_min_w=400.0, power_limit_max_w=400.0)  # fmt: skip
    JobGpuHour.objects.filter(job=two, hour=T0).update(sampled_s=1000)
    moved = _run(fleet, group, 5, cap_w=700.0, least_w=500.0)
    unknown = _run(fleet, group, 6, cap_w=None)
    # when
    _, runs, _ = group_runs(group=group, jobs=Job.objects.all())
    # then
    by_job = {r.job_id: r for r in runs}
    assert by_job[two.pk].cap_w == pytest.approx((600 * 1000 + 400 * 3000) / 4000)
    assert by_job[two.pk].varied  # its GPU-hours' limits are apart
    assert by_job[moved.pk].varied and by_job[moved.pk].cap_w == 700.0
    assert (by_job[unknown.pk].cap_w, by_job[unknown.pk].varied) == (None, False)


def test_runs_that_ended_after_the_moment_asked_are_left_out(fleet: Fleet, group: JobGroup) -> None:
    first, _ = _run(fleet, group, 0), _run(fleet, group, 3)
    _, runs, _ = group_runs(group=group, jobs=Job.objects.all(), ended_before=T0 + 2 * HOUR)
    assert [r.job_id for r in runs] == [first.pk]


# group_frontier, frontiers


def test_a_groups_frontier_names_its_gpu_model_and_its_rating(fleet: Fleet, group: JobGroup) -> None:
    GpuModel.objects.filter(name="NVIDIA H200").update(tdp_w=700.0)
    for k in range(3):
        _run(fleet, group, k)
    _run(fleet, group, 3, unit="sample")
    entry = group_frontier(group=group, jobs=Job.objects.all())
    assert (entry.gpu_model, entry.tdp_w, entry.runs, entry.other_unit_runs) == ("NVIDIA H200", 700.0, 4, 1)
    assert entry.frontier.unit == "step" and len(entry.placed) == 3
    # one limit only: a plan to measure the others, up to the rating
    assert entry.frontier.plan is not None and entry.frontier.advice is None


def test_the_frontier_of_two_limits_advises_the_one_that_saves_energy_within_the_slack(
    fleet: Fleet, group: JobGroup
) -> None:
    for k in range(3):
        _run(fleet, group, k, cap_w=700.0, s=2.0, j=1200.0)
        _run(fleet, group, 10 + k, cap_w=500.0, s=2.1, j=1000.0)
    entry = group_frontier(group=group, jobs=Job.objects.all())
    assert entry.frontier.advice is not None
    assert (entry.frontier.advice.current.cap_w, entry.frontier.advice.chosen.cap_w) == (700.0, 500.0)
    # with a slack too tight for 5 % more time, the current limit stays
    tight = group_frontier(group=group, jobs=Job.objects.all(), slack=0.01)
    assert tight.frontier.advice is not None and not tight.frontier.advice.changes


def test_only_the_jobs_passed_count_so_a_team_sees_no_other_teams_group(fleet: Fleet, group: JobGroup) -> None:
    # given a group run by vision, and another run only by another team
    other_team = Team.objects.create(name="nlp")
    theirs = JobGroup.objects.create(name="finetune", match_kind="name_prefix", match_value="finetune-")
    for k in range(3):
        _run(fleet, group, k)
        _run(fleet, theirs, 10 + k, team=other_team)
    _run(fleet, group, 20, team=other_team)
    # when vision's jobs are passed
    listed = frontiers(jobs=Job.objects.filter(team=fleet.team))
    # then only its group, made of its runs only
    assert [e.group.name for e in listed] == ["pretrain"]
    assert listed[0].runs == 3
    assert {e.group.name for e in frontiers(jobs=Job.objects.all())} == {"pretrain", "finetune"}


def test_a_group_whose_runs_count_no_work_is_not_listed(fleet: Fleet, group: JobGroup) -> None:
    _run(fleet, group, 0, unit=None)
    assert frontiers(jobs=Job.objects.all()) == []


# group_saving, fleet_saving


def _advised(fleet: Fleet, group: JobGroup) -> None:
    for k in range(3):
        _run(fleet, group, k, cap_w=700.0, s=2.0, j=1200.0)
        _run(fleet, group, 10 + k, cap_w=500.0, s=2.1, j=1000.0)


def test_a_periods_saving_in_kwh_kg_and_money_of_the_runs_that_ended_in_it(fleet: Fleet, group: JobGroup) -> None:
    # given the advice 700 W -> 500 W (200 J a step less) and a price of 0.20 EUR/kWh
    _advised(fleet, group)
    entry = group_frontier(group=group, jobs=Job.objects.all())
    # when the period holds the first two 700 W runs only
    found = group_saving(entry=entry, start=T0, end=T0 + 2 * HOUR)
    # then
    assert found.saving.runs == 2
    gpu_kwh = 2 * STEPS * 200 / 3.6e6
    assert found.gpu_kwh == pytest.approx(gpu_kwh)
    assert found.facility_kwh == pytest.approx(gpu_kwh * 1.5)  # the runs' own facility kWh per GPU kWh
    assert found.co2e_kg == pytest.approx(gpu_kwh * 1.5 * 0.4)
    assert found.cost == (Decimal(repr(found.facility_kwh)) * Decimal("0.20")).quantize(Decimal("0.000001"))
    assert found.currency == "EUR"
    # a period with none of its runs saves nothing
    assert group_saving(entry=entry, start=T0 + 100 * HOUR, end=T0 + 200 * HOUR).gpu_kwh == 0.0


def test_no_money_is_summed_across_currencies(fleet: Fleet, group: JobGroup) -> None:
    _advised(fleet, group)
    usd = fleet_build(name="us", servers=1)
    Site.objects.filter(pk=usd.cluster.site_id).update(currency="USD")
    _run(usd, group, 1 + 40, cap_w=700.0, s=2.0, j=1200.0)
    entry = group_frontier(group=group, jobs=Job.objects.all())
    found = group_saving(entry=entry, start=T0, end=T0 + 50 * HOUR)
    assert found.cost is None and found.currency == "EUR,USD"
    assert found.gpu_kwh > 0


def test_the_fleets_saving_reads_each_groups_frontier_up_to_the_periods_end(fleet: Fleet, group: JobGroup) -> None:
    _advised(fleet, group)
    # runs that end after the period count neither in its frontier nor in its saving
    end: datetime = T0 + 10 * HOUR
    savings = fleet_saving(jobs=Job.objects.all(), start=T0, end=end)
    assert len(savings) == 1
    # before the 500 W runs, the group ran at one limit: a plan, no advice, nothing saved
    assert savings[0].entry.frontier.plan is not None and savings[0].entry.frontier.advice is None
    assert savings[0].gpu_kwh == 0.0
    # with one 500 W run, too few to advise: the advice is to stay
    one = fleet_saving(jobs=Job.objects.all(), start=T0, end=T0 + 11 * HOUR)
    assert one[0].entry.frontier.advice is not None and not one[0].entry.frontier.advice.changes
    later = fleet_saving(jobs=Job.objects.all(), start=T0, end=T0 + 20 * HOUR)
    assert later[0].gpu_kwh == pytest.approx(3 * STEPS * 200 / 3.6e6)
