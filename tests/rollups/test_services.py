"""The stored sums rollups read (apps/rollups/services.py): each day's sums per team (its billed jobs), cluster (every
job, and its GPU-hours), job group and GPU are its rows' sums; a day's rounded costs hold its jobs within that one day,
each rounded; a rebuild is the same twice and touches the days asked for only; a team's waste per day is what
period_waste gives, of its own counted findings."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db.models import Count, Sum

from apps.jobs.models import Job, JobGpuHour
from apps.rollups.models import ClusterDay, GpuDay, JobGroupDay, TeamDay, TeamWasteDay
from apps.rollups.services import day_sums_refresh, team_waste_days_refresh
from apps.telemetry.models import GpuHour
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste
from tests.factories import FlagFactory
from tests.rollups.day_world import DAY1, DAY2, END, START, DayWorld, day_world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


def _row_sums(**rows: object) -> dict:
    found = JobGpuHour.objects.filter(**rows).aggregate(
        energy_j=Sum("energy_j"), occupancy_s=Sum("occupancy_s"), facility_kwh=Sum("facility_kwh"), cost=Sum("cost")
    )
    return {k: v if v is not None else 0 for k, v in found.items()}


def _day_sums(day: TeamDay | ClusterDay | JobGroupDay) -> dict:
    return {"energy_j": day.energy_j, "occupancy_s": day.occupancy_s, "facility_kwh": day.facility_kwh,
            "cost": day.cost}  # fmt: skip


def _approx(sums: dict) -> dict:
    return {k: v if isinstance(v, Decimal) else pytest.approx(v) for k, v in sums.items()}


def test_each_days_sums_are_its_rows_sums_per_team_cluster_group_and_gpu(world: DayWorld) -> None:
    for day in (DAY1, DAY2):
        rows = {"hour__date": day}
        # a team's day: its jobs on its bill
        for team in (world.vision, world.nlp):
            billed = _row_sums(**rows, job__team=team, job__excluded_from_bill=False)
            stored = TeamDay.objects.filter(team=team, cluster=world.cluster, day=day).first()
            assert (_day_sums(stored) if stored else None) == (_approx(billed) if billed["cost"] else None), team
        # the cluster's day: every job, the excluded one too, with its GPU-hours' sums
        cluster = ClusterDay.objects.get(cluster=world.cluster, day=day)
        assert _day_sums(cluster) == _approx(_row_sums(**rows))
        hours = GpuHour.objects.filter(hour__date=day).aggregate(n=Count("id"), j=Sum("device_energy_j"))
        assert (cluster.gpu_hours_total, cluster.device_j) == (hours["n"], pytest.approx(hours["j"]))
        # each GPU's day: its GPU-hours
        for gpu in world.gpus:
            mine = GpuHour.objects.filter(gpu=gpu, hour__date=day).aggregate(n=Count("id"), j=Sum("device_energy_j"))
            stored_gpu = GpuDay.objects.get(gpu=gpu, day=day)
            assert (stored_gpu.hours, stored_gpu.device_energy_j) == (mine["n"], pytest.approx(mine["j"]))
    # a group's day: its jobs' rows, on the one day they ran
    (group_day,) = JobGroupDay.objects.filter(job_group=world.group)
    assert group_day.day == DAY1 and _day_sums(group_day) == _approx(_row_sums(job__job_group=world.group))
    # whole-GPU rows: the energy's interval is the energy itself, all of it by that method
    for stored in TeamDay.objects.all():
        assert stored.energy_low_j == stored.energy_high_j == pytest.approx(stored.energy_j)
        assert stored.energy_by_method_j == {"whole_gpu": pytest.approx(stored.energy_j)}


def test_a_days_rounded_costs_are_those_of_its_jobs_within_that_one_day(world: DayWorld) -> None:
    # vision's first day: its job within it (0.999999: 100 cents); the job across midnight is on neither day's
    first = TeamDay.objects.get(team=world.vision, day=DAY1)
    assert (first.cost_units, first.units_exponent) == (100, 2)
    second = TeamDay.objects.get(team=world.vision, day=DAY2)
    assert (second.cost_units, second.units_exponent) == (0, None)
    assert TeamDay.objects.get(team=world.nlp, day=DAY1).cost_units == 12  # 0.125: half to even
    # the cluster's: every job within the day, the excluded one's 100 too
    assert ClusterDay.objects.get(day=DAY1).cost_units == 100 + 100 + 12


def test_a_day_with_a_job_whose_days_are_unknown_or_jobs_in_two_minor_units_says_so(world: DayWorld) -> None:
    # given nlp's job with no days recorded, and vision's job within day 1 charged in yen
    Job.objects.filter(pk=world.jobs["n-within"].pk).update(first_day=None, last_day=None)
    Job.objects.filter(pk=world.jobs["v-within"].pk).update(currency="JPY")
    # when the days are rebuilt
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY1])
    # then nlp's day's rounded costs are not known (read from its rows), and the cluster's day has two minor units
    assert TeamDay.objects.get(team=world.nlp, day=DAY1).cost_units is None
    vision = TeamDay.objects.get(team=world.vision, day=DAY1)
    assert (vision.cost_units, vision.units_exponent) == (1, 0)  # 0.999999 yen: 1
    assert ClusterDay.objects.get(day=DAY1).units_exponent == -1


def test_a_rebuild_is_the_same_twice_and_touches_the_days_asked_for_only(world: DayWorld) -> None:
    def stored() -> list:
        return [
            sorted(model.objects.values_list(*fields))
            for model, fields in (
                (TeamDay, ("team_id", "day", "energy_j", "cost", "cost_units")),
                (ClusterDay, ("day", "energy_j", "cost", "device_j", "idle_cost", "unseen_cost")),
                (JobGroupDay, ("job_group_id", "day", "cost")),
                (GpuDay, ("gpu_id", "day", "hours", "device_energy_j")),
            )
        ]

    before = stored()
    # when the same days are rebuilt again, and nothing at all is asked for
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY2, DAY1, DAY1])
    day_sums_refresh(cluster_ids=[], days=[DAY1])
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[])
    # then the same rows
    assert stored() == before
    # and with day 2's job rows gone, rebuilding day 1 leaves day 2's sums as they were; rebuilding day 2 drops them
    JobGpuHour.objects.filter(hour__date=DAY2).delete()
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY1])
    assert TeamDay.objects.filter(day=DAY2).exists()
    day_sums_refresh(cluster_ids=[world.cluster.pk], days=[DAY2])
    assert not TeamDay.objects.filter(day=DAY2).exists()
    assert ClusterDay.objects.get(day=DAY2).energy_j == 0.0  # its GPU-hours are still there: the idle line


def test_a_teams_waste_days_are_what_period_waste_gives_of_its_counted_findings(world: DayWorld) -> None:
    # given a finding on vision's job across midnight, and one on its excluded job (which does not count)
    FlagFactory(cluster=world.cluster, job=world.jobs["v-across"], kind="idle_allocation", evidence={})
    FlagFactory(cluster=world.cluster, job=world.jobs["v-excluded"], kind="idle_allocation", evidence={})
    # when both teams' days are rebuilt
    team_waste_days_refresh(team_ids=[world.vision.pk, world.nlp.pk], days=[DAY1, DAY2])
    # then vision's days are period_waste's days of its counted findings, two hours on each; nlp has none
    found = period_waste(flags=counted_flags(Flag.objects.filter(job__team=world.vision)), start=START, end=END)
    stored = {d.day: d for d in TeamWasteDay.objects.filter(team=world.vision)}
    assert sorted(stored) == sorted(found.per_day) == [DAY1, DAY2]
    for day, part in found.per_day.items():
        assert (stored[day].gpu_hours, stored[day].cost) == (pytest.approx(part.gpu_hours), part.cost)
    assert stored[DAY1].cost == Decimal("0.666666") and stored[DAY1].gpu_hours == pytest.approx(2.0)
    assert not TeamWasteDay.objects.filter(team=world.nlp).exists()
    # and once the finding is gone, rebuilding the other team's days leaves vision's, rebuilding vision's drops them
    Flag.objects.all().delete()
    team_waste_days_refresh(team_ids=[world.nlp.pk], days=[DAY1, DAY2])
    assert TeamWasteDay.objects.filter(team=world.vision).count() == 2
    team_waste_days_refresh(team_ids=[world.vision.pk], days=[DAY1])
    assert list(TeamWasteDay.objects.filter(team=world.vision).values_list("day", flat=True)) == [DAY2]
