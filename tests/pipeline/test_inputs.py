"""apps.pipeline.inputs: a change of what footprints are made from, written and derived in one transaction. Imported
intensity reaches the footprints of the hours it covers (and a derivation that fails leaves the import unwritten);
bad rows write and derive nothing; deleted intensity is filled in, never zero, and says so; an admin's edit of a site
or a server type's rules recomputes the clusters it reaches, and nothing when it reaches none; a recompute over a
window leaves the hours outside it as they were. The fleet config's apply: tests/config/test_config.py; the
footprint arithmetic: tests/carbon/test_footprint.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from apps.carbon.intensity import IntensityRow
from apps.carbon.models import IntensityHour, ServerType, ServerTypeRule, Site
from apps.carbon.services import IntensityError
from apps.fleet.models import Node
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline import inputs
from apps.pipeline.inputs import (
    footprint_inputs_changed,
    footprints_recompute,
    intensity_delete,
    intensity_import,
    server_type_rules_changed,
)
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import T0, Fleet, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

H = timedelta(hours=1)


@pytest.fixture
def fleet() -> Fleet:
    """Two servers of one GPU; a job on both for three hours at 500 W; the zone's intensity 0.3 kg/kWh, derived."""
    fleet = fleet_build(servers=2, gpus_per_server=1)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=3, power_w=500.0)
    intensity_set("TEST", [0.3] * 3)
    footprints_recompute()
    return fleet


def _job() -> Job:
    return Job.objects.get(job_key="slurm/1")


def _rows_kg() -> dict[datetime, float]:
    kg: dict[datetime, float] = {}
    for hour, operational in JobGpuHour.objects.values_list("hour", "operational_kg"):
        kg[hour] = kg.get(hour, 0.0) + (operational or 0.0)
    return kg


def test_imported_intensity_reaches_the_footprints_of_its_hours(fleet: Fleet) -> None:
    before = _rows_kg()
    # when the second hour's intensity is imported anew, doubled
    report = intensity_import(rows=[IntensityRow(T0 + H, 0.6)], zone="TEST", source="grid v2", basis="location")
    # then that hour's footprints double, the others stay, and the job's is their sum
    after = _rows_kg()
    assert after[T0 + H] == pytest.approx(2 * before[T0 + H])
    assert after[T0] == before[T0] and after[T0 + 2 * H] == before[T0 + 2 * H]
    assert _job().operational_kg == pytest.approx(sum(after.values()))
    assert report.replaced == 1 and report.gpu_hours_refreshed is not None and report.gpu_hours_refreshed > 0


def test_a_derivation_that_fails_leaves_the_import_unwritten(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a step failed")

    monkeypatch.setattr(inputs, "derive", fail)
    with pytest.raises(RuntimeError):
        intensity_import(rows=[IntensityRow(T0 + H, 0.6)], zone="TEST", source="grid v2", basis="location")
    assert IntensityHour.objects.get(zone="TEST", hour=T0 + H).kg_per_kwh == 0.3


def test_bad_rows_write_and_derive_nothing(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[Any] = []
    monkeypatch.setattr(inputs, "derive", lambda *a, **k: derived.append(a))
    stored = sorted(IntensityHour.objects.values_list("hour", "kg_per_kwh", "source"))
    rows = [IntensityRow(T0 + 3 * H, 0.2), IntensityRow(T0 + 3 * H, 0.25), IntensityRow(T0 + 4 * H, -1.0)]
    with pytest.raises(IntensityError):
        intensity_import(rows=rows, zone="TEST", source="grid v2", basis="location")
    assert sorted(IntensityHour.objects.values_list("hour", "kg_per_kwh", "source")) == stored and derived == []


def test_deleted_intensity_is_filled_in_never_zero_and_said_so(fleet: Fleet) -> None:
    assert not _job().intensity_estimated
    deleted = intensity_delete(hours=IntensityHour.objects.filter(zone="TEST", hour=T0 + H))
    assert deleted == 1
    job = _job()
    assert job.intensity_estimated and job.operational_kg is not None and job.operational_kg > 0
    assert _rows_kg()[T0 + H] > 0


def test_an_edit_of_a_site_recomputes_its_clusters_footprints(fleet: Fleet) -> None:
    facility_before = _job().facility_kwh
    site = fleet.cluster.site
    assert site is not None
    Site.objects.filter(pk=site.pk).update(pue=1.5)  # the admin's edit, saved
    refreshed = footprint_inputs_changed(site_ids=[site.pk])
    assert refreshed == GpuHour.objects.filter(gpu__node__cluster=fleet.cluster).count()
    assert _job().facility_kwh == pytest.approx(facility_before * 1.5 / 1.2)


def test_an_edit_that_reaches_no_cluster_recomputes_nothing(fleet: Fleet) -> None:
    lonely = Site.objects.create(name="empty", grid_zone="NONE", pue=1.1, electricity_price_per_kwh=Decimal("0.1"))
    before = _job().cost
    assert footprint_inputs_changed(site_ids=[lonely.pk]) is None
    assert footprint_inputs_changed() is None
    assert _job().cost == before


def test_a_clusters_hostname_rules_type_its_nodes_and_what_changed_is_recomputed(fleet: Fleet) -> None:
    # given no rule yet: nothing to do
    assert server_type_rules_changed(cluster_id=fleet.cluster.pk) is None
    # when a rule types the first node as a server with twice the overhead
    heavy = ServerType.objects.create(name="heavy", node_overhead_factor=2.6, embodied_kg_per_server=3000.0,
                                      service_life_h=43800.0, gpus_per_server=1)  # fmt: skip
    ServerTypeRule.objects.create(cluster=fleet.cluster, hostname_glob="c1-n0", server_type=heavy)
    server_kwh = dict(JobGpuHour.objects.filter(hour=T0).values_list("gpu__node__hostname", "server_kwh"))
    refreshed = server_type_rules_changed(cluster_id=fleet.cluster.pk)
    # then the node is typed, its rows' server energy doubles, the other node's stays
    assert refreshed is not None and refreshed > 0
    assert Node.objects.get(hostname="c1-n0").server_type == heavy
    after = dict(JobGpuHour.objects.filter(hour=T0).values_list("gpu__node__hostname", "server_kwh"))
    assert after["c1-n0"] == pytest.approx(2 * server_kwh["c1-n0"]) and after["c1-n1"] == server_kwh["c1-n1"]
    # and the same rules again change nothing, and recompute nothing
    assert server_type_rules_changed(cluster_id=fleet.cluster.pk) is None


def test_a_recompute_over_a_window_leaves_the_hours_outside_it_as_they_were(fleet: Fleet) -> None:
    IntensityHour.objects.update(kg_per_kwh=0.9)  # changed by hand, outside the services
    before = _rows_kg()
    refreshed = footprints_recompute(cluster_ids=[fleet.cluster.pk], start=T0 + H, end=T0 + 2 * H)
    after = _rows_kg()
    assert refreshed == 2  # the window's GPU-hours
    assert after[T0 + H] == pytest.approx(3 * before[T0 + H])
    assert after[T0] == before[T0] and after[T0 + 2 * H] == before[T0 + 2 * H]
    # and recomputed whole, every hour follows; the job's footprint is its rows' sum again
    assert footprints_recompute() == 6
    assert _job().operational_kg == pytest.approx(sum(_rows_kg().values()))
    assert _rows_kg()[T0] == pytest.approx(3 * before[T0])


def test_recomputing_twice_gives_the_same_rows(fleet: Fleet) -> None:
    def figures() -> list[tuple[Any, ...]]:
        return sorted(JobGpuHour.objects.values_list("pk", "facility_kwh", "operational_kg", "embodied_kg", "cost"))

    first = figures()
    footprints_recompute()
    assert figures() == first
