"""Writes of the carbon app (apps/carbon/services.py): footprints of the rows and the idle line, a job's sums, job
groups, nodes' server types, and intensity written and deleted with the footprints it reaches. The same through the
pipeline and the API is tests/carbon/test_footprint.py and tests/carbon/test_intensity_import.py."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Q

from apps.carbon.intensity import IntensityError, IntensityRow
from apps.carbon.models import GpuModel, IntensityHour, JobGroup, ServerType, ServerTypeRule, Site
from apps.carbon.services import (
    FootprintRefresh,
    footprints_refresh,
    intensity_delete,
    intensity_reach,
    intensity_write,
    job_groups_assign,
    jobs_footprint_sum,
    node_server_types_apply,
)
from apps.core.units.footprint import Footprint
from apps.fleet.models import Node
from apps.jobs.models import Job, JobGpuHour
from apps.jobs.summary import JobGpuTotals
from apps.telemetry.models import GpuHour
from tests.factories import ClusterFactory, JobFactory, NodeFactory

from .fleet_builder import HOUR, T0, fleet_build, idle_hours, intensity_set, job_run

pytestmark = pytest.mark.django_db

KWH = 3.6e6


def _shared_hour(fleet, *, device_kwh: float, job_kwh: float, occupancy_s: float) -> tuple[JobGpuHour, GpuHour]:
    """One GPU-hour: a job on part of it, the rest idle."""
    gpu = fleet.gpus[0]
    job = Job.objects.create(cluster=fleet.cluster, job_key="slurm/7", team=fleet.team, start=T0)
    row = JobGpuHour.objects.create(
        job=job, gpu=gpu, hour=T0, source="agent", energy_j=job_kwh * KWH, sampled_s=3600, occupancy_s=occupancy_s
    )
    hour = GpuHour.objects.create(
        gpu=gpu, hour=T0, source="agent", device_energy_j=device_kwh * KWH, jobs_energy_j=job_kwh * KWH,
        sampled_s=3600, occupied_s=occupancy_s,
    )  # fmt: skip
    return row, hour


# footprints_refresh


def test_a_gpu_hours_footprint_is_split_between_its_jobs_and_its_idle_line() -> None:
    # given a GPU-hour of 2 kWh, 1.5 of them a job's over 45 minutes (overhead 1.3, PUE 1.2, 0.4 kg/kWh)
    fleet = fleet_build(servers=1, gpus_per_server=1)
    intensity_set("TEST", [0.4])
    row, hour = _shared_hour(fleet, device_kwh=2.0, job_kwh=1.5, occupancy_s=2700)
    # when
    refreshed = footprints_refresh()
    # then the job's and the idle line's facility energy, carbon and money add up to the whole GPU-hour's
    row.refresh_from_db()
    hour.refresh_from_db()
    facility = 2.0 * 1.3 * 1.2
    assert row.facility_kwh + hour.idle_facility_kwh == pytest.approx(facility)
    assert row.operational_kg + hour.idle_operational_kg == pytest.approx(facility * 0.4)
    assert row.facility_kwh == pytest.approx(1.5 * 1.3 * 1.2)
    # the GPU-hour's rate (2.50) and energy (0.20 per kWh) charged once, to the cent
    assert (row.cost + hour.idle_cost).quantize(Decimal("0.01")) == (
        Decimal("2.50") + Decimal(repr(facility)) * Decimal("0.20")
    ).quantize(Decimal("0.01"))
    # and embodied carbon by time held: a quarter of the hour is the idle line's
    assert hour.idle_embodied_kg == pytest.approx((row.embodied_kg + hour.idle_embodied_kg) / 4)
    assert (refreshed.gpu_hours, refreshed.job_ids) == (1, {row.job_id})
    assert refreshed.cluster_days == {(fleet.cluster.pk, date(2026, 11, 2))}


def test_time_nobody_saw_is_the_idle_lines_unless_an_estimate_charged_it() -> None:
    # given a GPU-hour with no job seen: 1 kWh, of which 0.4 kWh over 30 minutes nobody saw, 0.1 kWh of it estimated
    fleet = fleet_build(servers=1, gpus_per_server=1)
    hour = GpuHour.objects.create(
        gpu=fleet.gpus[0], hour=T0, source="agent", device_energy_j=1.0 * KWH, unobserved_j=0.4 * KWH,
        unobserved_s=1800, estimated_j=0.1 * KWH, estimated_s=600, sampled_s=1800,
    )  # fmt: skip
    # when
    footprints_refresh()
    # then the idle line is the energy no job (nor estimate) holds, and its unseen part what no estimate charged
    hour.refresh_from_db()
    assert hour.idle_facility_kwh == pytest.approx(0.9 * 1.3 * 1.2)
    assert (hour.unseen_j, hour.unseen_s) == (pytest.approx(0.3 * KWH), pytest.approx(1200))
    assert hour.unseen_facility_kwh == pytest.approx(0.3 * 1.3 * 1.2)
    assert hour.unseen_facility_kwh <= hour.idle_facility_kwh


def test_only_the_clusters_and_hours_asked_for_are_recomputed() -> None:
    # given two clusters with a job each, over three hours
    a, b = fleet_build(name="a", servers=1), fleet_build(name="b", servers=1)
    intensity_set("TEST", [0.3] * 3)
    job_run(a, key="slurm/a", gpus=a.gpus[:1], hours=3, power_w=500)
    job_run(b, key="slurm/b", gpus=b.gpus[:1], hours=3, power_w=500)
    # when only a's middle hour is asked for
    refreshed = footprints_refresh(cluster_ids=[a.cluster.pk], start=T0 + HOUR, end=T0 + 2 * HOUR)
    # then only that row has a footprint
    priced = JobGpuHour.objects.filter(facility_kwh__gt=0).values_list("job__job_key", "hour")
    assert list(priced) == [("slurm/a", T0 + HOUR)]
    assert refreshed.gpu_hours == 1


def test_nothing_to_recompute_is_an_empty_report() -> None:
    fleet_build(servers=1)
    assert footprints_refresh() == FootprintRefresh()


def test_a_site_without_a_zone_has_unknown_carbon_and_a_node_without_a_type_no_overhead() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1, zone="")
    Node.objects.update(server_type=None)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=1, power_w=1000)
    footprints_refresh()
    row = JobGpuHour.objects.get()
    assert row.operational_kg is None and row.intensity_kg_per_kwh is None
    assert row.facility_kwh == pytest.approx(1.0 * 1.2)  # the PUE still applies
    assert row.embodied_kg == 0.0


# jobs_footprint_sum


def test_a_jobs_footprint_is_the_sum_of_its_gpus_with_its_sites_currency_and_source() -> None:
    # given a job on two GPUs of a site in TEST
    fleet = fleet_build(servers=1, gpus_per_server=2)
    intensity_set("TEST", [0.3])
    GpuModel.objects.filter(name="NVIDIA H200").update(tdp_w=700.0)
    job = job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=1, power_w=500)
    refresh = footprints_refresh()
    fp = Footprint(energy_j=KWH, gpu_hours=1.0, server_kwh=1.0, facility_kwh=2.0, operational_kg=0.5,
                   embodied_kg=0.1, cost=Decimal("3.000000"))  # fmt: skip
    totals = {
        job.pk: [
            JobGpuTotals(gpu_id=fleet.gpus[0].pk, occupancy_s=3600.0, footprint=fp),
            JobGpuTotals(gpu_id=fleet.gpus[1].pk, occupancy_s=1800.0, footprint=fp, intensity_estimated=True),
        ]
    }
    job = Job.objects.select_related("cluster__site", "job_group").get(pk=job.pk)
    # when
    jobs_footprint_sum(jobs=[job], totals=totals, book=refresh.book)
    # then
    assert (job.facility_kwh, job.operational_kg, job.embodied_kg, job.cost) == (4.0, 1.0, 0.2, Decimal("6.000000"))
    assert (job.currency, job.intensity_basis, job.intensity_source) == ("EUR", "location", "test")
    assert job.intensity_estimated
    assert job.tdp_estimate_j == 5400.0 * 700.0
    assert job.shift_saving_kg is None  # no flexible group
    # (in place: nothing stored)
    assert Job.objects.get(pk=job.pk).facility_kwh == 0.0


def test_a_job_with_no_rows_sums_to_nothing() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1, zone="")
    job = Job.objects.select_related("cluster__site").get(
        pk=Job.objects.create(cluster=fleet.cluster, job_key="k/1", team=fleet.team, facility_kwh=9.0).pk
    )
    jobs_footprint_sum(jobs=[job], totals={})
    assert (job.facility_kwh, job.operational_kg, job.intensity_basis, job.tdp_estimate_j) == (0.0, None, "", 0)


# job_groups_assign


def test_the_first_group_by_name_that_matches_wins_and_an_admins_choice_stays() -> None:
    # given two groups matching the same job, and a job whose group an admin set
    cluster = ClusterFactory()
    JobGroup.objects.create(name="b-sweeps", match_kind="name_prefix", match_value="sweep")
    a = JobGroup.objects.create(name="a-vision", match_kind="account", match_value="vision")
    matched = JobFactory(cluster=cluster, name="sweep-1", account="vision")
    other = JobFactory(cluster=cluster, name="eval-1", account="nlp")
    locked = JobFactory(cluster=cluster, name="sweep-2", account="vision", group_locked=True)
    # when
    changed = job_groups_assign()
    # then
    assert changed == {matched.pk: cluster.pk}
    assert Job.objects.get(pk=matched.pk).job_group == a
    assert Job.objects.get(pk=other.pk).job_group is None
    assert Job.objects.get(pk=locked.pk).job_group is None
    # and again: nothing changes
    assert job_groups_assign() == {}


@pytest.mark.parametrize(
    ("kind", "value", "job", "matches"),
    [
        ("user", "ada", {"user": "ada"}, True),
        ("namespace", "ml", {"namespace": "ml"}, True),
        ("group_key", "run-7", {"group_key": "run-7"}, True),
        ("group_key", "", {"group_key": ""}, False),  # an empty key is no key
        ("name_prefix", "", {"name": ""}, False),  # a job without a name matches no prefix
        ("account", "vision", {"account": "VISION"}, False),
    ],
)
def test_each_kind_of_match(kind: str, value: str, job: dict, matches: bool) -> None:
    group = JobGroup.objects.create(name="g", match_kind=kind, match_value=value)
    made = JobFactory(**job)
    job_groups_assign()
    assert (Job.objects.get(pk=made.pk).job_group == group) is matches


def test_a_rule_that_no_longer_matches_takes_the_group_away_within_the_scope_asked() -> None:
    # given two jobs of two clusters in a group by user
    group = JobGroup.objects.create(name="g", match_kind="user", match_value="ada")
    here, there = JobFactory(user="ada"), JobFactory(user="ada")
    job_groups_assign()
    assert Job.objects.filter(job_group=group).count() == 2
    # when the rule changes and only one cluster is asked for
    JobGroup.objects.filter(pk=group.pk).update(match_value="grace")
    changed = job_groups_assign(cluster_ids=[here.cluster_id])
    # then that cluster's job leaves the group, the other's is not touched
    assert changed == {here.pk: here.cluster_id}
    assert Job.objects.get(pk=here.pk).job_group is None
    assert Job.objects.get(pk=there.pk).job_group == group


# node_server_types_apply


def test_nodes_take_the_first_rule_by_priority_and_unmatched_ones_keep_theirs() -> None:
    # given
    cluster = ClusterFactory()
    hgx, dgx, old = (ServerType.objects.create(name=n) for n in ("hgx", "dgx", "old"))
    ServerTypeRule.objects.create(cluster=cluster, hostname_glob="gpu-*", server_type=hgx, priority=20)
    ServerTypeRule.objects.create(cluster=cluster, hostname_glob="gpu-d*", server_type=dgx, priority=10)
    d1 = NodeFactory(cluster=cluster, hostname="gpu-d1")
    a1 = NodeFactory(cluster=cluster, hostname="gpu-a1", server_type=hgx)
    login = NodeFactory(cluster=cluster, hostname="login", server_type=old)
    elsewhere = NodeFactory(hostname="gpu-d2")
    # when
    report = node_server_types_apply(cluster_id=cluster.pk)
    # then
    types = dict(Node.objects.values_list("hostname", "server_type__name"))
    assert types == {d1.hostname: "dgx", a1.hostname: "hgx", login.hostname: "old", elsewhere.hostname: None}
    assert (report.updated, report.unchanged, report.unmatched) == (1, 1, 1)


def test_only_unset_nodes_when_asked_and_nothing_without_rules() -> None:
    cluster = ClusterFactory()
    hgx, dgx = ServerType.objects.create(name="hgx"), ServerType.objects.create(name="dgx")
    typed = NodeFactory(cluster=cluster, hostname="gpu-1", server_type=dgx)
    new = NodeFactory(cluster=cluster, hostname="gpu-2")
    empty = node_server_types_apply(cluster_id=cluster.pk)
    assert (empty.updated, empty.unchanged, empty.unmatched) == (0, 0, 0)
    ServerTypeRule.objects.create(cluster=cluster, hostname_glob="gpu-*", server_type=hgx)
    report = node_server_types_apply(cluster_id=cluster.pk, only_unset=True)
    assert report.updated == 1
    assert Node.objects.get(pk=typed.pk).server_type == dgx
    assert Node.objects.get(pk=new.pk).server_type == hgx


# intensity_write, intensity_reach, intensity_delete


def _rows(*values: float, start: datetime = T0) -> list[IntensityRow]:
    return [IntensityRow(hour=start + k * HOUR, kg_per_kwh=v, line=k + 2) for k, v in enumerate(values)]


def test_an_import_counts_what_it_created_replaced_and_left_alone() -> None:
    fleet = fleet_build(servers=1)
    first = intensity_write(rows=_rows(0.3, 0.4), zone="TEST", source="em", basis="location")
    assert (first.created, first.replaced, first.unchanged, first.rows) == (2, 0, 0, 2)
    assert first.refreshed_cluster_ids == [fleet.cluster.pk]
    # a month gained its first figures: every hour of the zone's clusters
    assert first.refresh_window is None
    # when one hour changes and another is new
    second = intensity_write(rows=_rows(0.3, 0.5, 0.6), zone="TEST", source="em", basis="location")
    # then
    assert (second.created, second.replaced, second.unchanged) == (1, 1, 1)
    assert dict(IntensityHour.objects.values_list("hour", "kg_per_kwh")) == {
        T0: 0.3, T0 + HOUR: 0.5, T0 + 2 * HOUR: 0.6
    }  # fmt: skip
    # the month had figures already: its whole month, widened by the fill distance
    assert second.refresh_window == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    # the same again: nothing to write, nothing to recompute
    third = intensity_write(rows=_rows(0.3, 0.5, 0.6), zone="TEST", source="em", basis="location")
    assert (third.unchanged, third.refreshed_cluster_ids) == (3, [])
    assert third.lines()[-1] == "footprints: nothing to recompute"


def test_a_bad_import_writes_nothing_and_names_every_problem() -> None:
    fleet_build(servers=1)
    rows = [*_rows(0.3, 0.4), IntensityRow(hour=T0, kg_per_kwh=0.9, line=9)]
    with pytest.raises(IntensityError) as caught:
        intensity_write(rows=rows, zone="NOWHERE", source="", basis="average")
    problems = "\n".join(caught.value.problems)
    assert "--basis: expected one of location, market, marginal" in problems
    assert "--source" in problems
    assert "line 9: 2026-11-02 00:00 UTC is already given on line 2" in problems
    assert "--zone NOWHERE: no site uses this zone (sites use: TEST)" in problems
    assert not IntensityHour.objects.exists()


def test_a_zone_no_site_uses_may_be_imported_when_allowed_and_reaches_no_cluster() -> None:
    report = intensity_write(rows=_rows(0.3), zone="FR", source="em", basis="location", allow_unknown_zone=True)
    assert (report.created, report.refreshed_cluster_ids) == (1, [])


def test_the_reach_of_a_change_near_a_month_edge_takes_the_next_month_too() -> None:
    fleet = fleet_build(servers=1)
    edge = datetime(2026, 11, 30, 22, tzinfo=UTC)
    reach = intensity_reach(zone="TEST", basis="location", changed_hours=[edge], months_flipped=False)
    assert reach.cluster_ids == [fleet.cluster.pk]
    assert reach.window == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    # another basis reaches no cluster; nothing changed reaches none
    assert intensity_reach(zone="TEST", basis="market", changed_hours=[edge], months_flipped=False).cluster_ids == []
    assert intensity_reach(zone="TEST", basis="location", changed_hours=[], months_flipped=True).cluster_ids == []


def test_deleting_hours_reports_what_they_reached_per_zone() -> None:
    fleet = fleet_build(servers=1)
    Site.objects.create(name="other", grid_zone="OTHER")
    intensity_set("TEST", [0.3, 0.4, 0.5])
    intensity_set("OTHER", [0.2])
    # when one hour of TEST goes (its month keeps figures) and OTHER's only hour
    going = IntensityHour.objects.filter(Q(zone="TEST", hour=T0 + HOUR) | Q(zone="OTHER"))
    deleted, reaches = intensity_delete(hours=going)
    # then
    assert deleted == 2
    by_cluster = {tuple(r.cluster_ids): r.window for r in reaches}
    assert by_cluster[(fleet.cluster.pk,)] == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    assert by_cluster[()] is None  # OTHER's site has no cluster
    assert IntensityHour.objects.count() == 2


def test_idle_hours_of_a_day_without_jobs_still_reach_its_day() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    idle_hours(fleet, gpus=fleet.gpus, hours=1, start=T0 + timedelta(days=1))
    refreshed = footprints_refresh()
    assert refreshed.job_ids == set()
    assert refreshed.cluster_days == {(fleet.cluster.pk, date(2026, 11, 3))}
