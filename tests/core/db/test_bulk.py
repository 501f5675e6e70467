"""Writing many rows in one statement (apps.core.db.bulk): rows given as instances or as columns give the same
stored rows, with binary parameters on Django's own connection (inside its transaction); bad input is
refused before anything is written."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import transaction

from apps.core.db.bulk import columns_update, columns_upsert, rows_update, rows_upsert
from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, tzinfo=UTC)
FIELDS = ["source", "device_energy_j", "sampled_s", "counter_resets", "contract_gaps", "agent_energy_j"]


def _stored() -> list[tuple]:
    return list(GpuHour.objects.order_by("gpu_id").values_list("gpu_id", "hour", *FIELDS, "idle_cost"))


def test_columns_and_instances_store_the_same_rows() -> None:
    gpus = fleet_build(servers=1, gpus_per_server=3).gpus
    values = [
        ("agent", 1.5e6, 3600.0, 0, ["sm"], None),
        ("dcgm", 2.0, 12.0, 2, [], 7.0),
        ("agent", 0.0, 0, 1, ["sm", "mem"], 1e-9),  # an int where a float goes
    ]
    rows_upsert(
        [GpuHour(gpu=g, hour=T0, **dict(zip(FIELDS, v, strict=True))) for g, v in zip(gpus, values, strict=True)],
        unique_fields=["gpu", "hour"],
        update_fields=FIELDS,
    )
    by_instances = _stored()
    GpuHour.objects.all().delete()
    columns_upsert(
        GpuHour,
        {"gpu": [g.pk for g in gpus], "hour": [T0] * 3} | {f: [v[i] for v in values] for i, f in enumerate(FIELDS)},
        unique_fields=["gpu", "hour"],
        update_fields=FIELDS,
    )
    assert _stored() == by_instances
    assert by_instances[0][2:] == ("agent", 1.5e6, 3600.0, 0, ["sm"], None, Decimal(0))  # defaults filled in


def test_an_upsert_updates_only_the_named_fields() -> None:
    gpu = fleet_build(servers=1, gpus_per_server=1).gpus[0]
    GpuHour.objects.create(gpu=gpu, hour=T0, source="agent", device_energy_j=1.0, sampled_s=10.0)
    columns_upsert(
        GpuHour,
        {"gpu_id": [gpu.pk], "hour": [T0], "source": ["dcgm"], "device_energy_j": [2.0], "sampled_s": [99.0]},
        unique_fields=["gpu", "hour"],
        update_fields=["device_energy_j"],
    )
    row = GpuHour.objects.get()
    assert (row.source, row.device_energy_j, row.sampled_s) == ("agent", 2.0, 10.0)


def test_updates_by_columns_and_by_instances_agree() -> None:
    gpus = fleet_build(servers=1, gpus_per_server=2).gpus
    rows = [GpuHour.objects.create(gpu=g, hour=T0, source="agent", device_energy_j=1.0) for g in gpus]
    columns_update(GpuHour, [r.pk for r in rows], {"idle_cost": [Decimal("0.25"), 3], "idle_facility_kwh": [1, 2.5]})
    assert sorted(GpuHour.objects.values_list("idle_cost", "idle_facility_kwh")) == [
        (Decimal("0.25"), 1.0),
        (Decimal(3), 2.5),
    ]
    for r in rows:
        r.idle_cost, r.contract_gaps = Decimal("1.5"), ["x"]
    rows_update(rows, ["idle_cost", "contract_gaps"])  # an array column: through VALUES
    assert list(GpuHour.objects.values_list("idle_cost", "contract_gaps")) == [(Decimal("1.5"), ["x"])] * 2


def test_an_update_by_partition_key_writes_the_rows_of_those_hours_only() -> None:
    # given one GPU's rows in two months (two partitions)
    gpu = fleet_build(servers=1, gpus_per_server=1).gpus[0]
    december = datetime(2026, 12, 1, 5, tzinfo=UTC)
    rows = [GpuHour.objects.create(gpu=gpu, hour=h, source="agent", device_energy_j=1.0) for h in (T0, december)]
    # when both are updated with their hours given
    columns_update(GpuHour, [r.pk for r in rows], {"idle_cost": [1, 2]}, partition_key=("hour", [r.hour for r in rows]))
    # then each row has its own value, as without the key
    assert list(GpuHour.objects.order_by("hour").values_list("hour", "idle_cost")) == [
        (T0, Decimal(1)),
        (december, Decimal(2)),
    ]
    # and a row given with another hour than its own is not written
    columns_update(GpuHour, [rows[0].pk], {"idle_cost": [9]}, partition_key=("hour", [december]))
    assert GpuHour.objects.get(pk=rows[0].pk).idle_cost == Decimal(1)
    with pytest.raises(ValueError, match="different lengths"):
        columns_update(GpuHour, [rows[0].pk], {"idle_cost": [9]}, partition_key=("hour", [T0, december]))


def test_writes_join_the_callers_transaction() -> None:
    gpu = fleet_build(servers=1, gpus_per_server=1).gpus[0]
    with pytest.raises(RuntimeError), transaction.atomic():
        columns_upsert(
            GpuHour,
            {"gpu_id": [gpu.pk], "hour": [T0], "source": ["agent"], "device_energy_j": [1.0]},
            unique_fields=["gpu", "hour"],
            update_fields=["device_energy_j"],
        )
        assert GpuHour.objects.count() == 1  # visible inside it
        raise RuntimeError
    assert GpuHour.objects.count() == 0  # rolled back with it


def test_bad_columns_are_refused_and_nothing_is_written() -> None:
    gpu = fleet_build(servers=1, gpus_per_server=1).gpus[0]
    with pytest.raises(ValueError, match="different lengths"):
        columns_upsert(
            GpuHour,
            {"gpu_id": [gpu.pk], "hour": [T0, T0], "source": ["agent"], "device_energy_j": [1.0]},
            unique_fields=["gpu", "hour"],
            update_fields=[],
        )
    with pytest.raises(Exception, match="no_such_field"):
        columns_upsert(GpuHour, {"no_such_field": [1]}, unique_fields=["gpu", "hour"], update_fields=[])
    with pytest.raises(ValueError, match="different lengths"):
        columns_update(GpuHour, [1, 2], {"idle_cost": [1]})
    with pytest.raises(ValueError, match="array columns"):
        columns_update(GpuHour, [1], {"contract_gaps": [["x"]]})
    assert GpuHour.objects.count() == 0
    columns_upsert(GpuHour, {"gpu_id": []}, unique_fields=["gpu", "hour"], update_fields=[])  # nothing to do
    columns_update(GpuHour, [], {"idle_cost": []})
