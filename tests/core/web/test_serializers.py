"""apps.core.web.serializers: the compiled plan renders a row exactly as DRF's own walk of the fields would, for model
instances and for `values()` rows alike: plain fields, times in UTC as DRF writes them, a missing link as null, a
callable attribute called, method fields on the serializer; what it cannot render the same (a nested serializer, a
field not in a values() row) is refused when the plan is made, not rendered wrong. Compared with DRF itself here and
on the jobs list in tests/api/test_jobs_api.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone as django_timezone
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import serializers

from apps.core.web.serializers import PlannedRepresentationMixin
from apps.fleet.models import Cluster
from tests.factories import ClusterFactory, SiteFactory


class _Drf(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    energy_j = serializers.FloatField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    hours = serializers.FloatField(source="hours_run")  # a method of the object: called
    team = serializers.CharField(source="team.name", allow_null=True)
    team_id = serializers.PrimaryKeyRelatedField(source="team", read_only=True)
    cost = serializers.DecimalField(max_digits=10, decimal_places=2)
    label = serializers.SerializerMethodField()
    secret = serializers.CharField(write_only=True)

    def get_label(self, job: Any) -> str:
        return f"{job.name} ({job.id})"


class _Planned(PlannedRepresentationMixin, _Drf):
    row_method_columns = {"label": ("name", "id")}


class _Job(SimpleNamespace):
    def hours_run(self) -> float:
        return self.energy_j / 3.6e6


def _job(**fields: Any) -> _Job:
    base = {
        "id": 7, "name": "train", "energy_j": 1.5e6, "start": datetime(2026, 11, 2, 10, 0, 0, 250000, tzinfo=UTC),
        "end": None, "team": SimpleNamespace(name="vision", pk=3), "cost": "12.345", "secret": "x",
    }  # fmt: skip
    return _Job(**(base | fields))


def test_an_instance_is_rendered_as_drf_renders_it() -> None:
    job = _job()
    assert _Planned(job).data == _Drf(job).data
    assert _Planned(job).data["start"] == "2026-11-02T10:00:00.250000Z"
    assert "secret" not in _Planned(job).data and _Planned(job).data["hours"] == pytest.approx(1.5e6 / 3.6e6)


def test_a_missing_link_is_null_as_in_drf() -> None:
    job = _job(team=None)
    planned = _Planned(job).data
    assert planned["team"] is None and planned["team_id"] is None
    assert planned == _Drf(job).data


def test_a_time_in_another_zone_goes_through_drf_and_gives_the_same_text() -> None:
    job = _job(start=datetime(2026, 11, 2, 11, 0, tzinfo=timezone(timedelta(hours=1))))
    assert _Planned(job).data["start"] == _Drf(job).data["start"]


# hypothesis bounds its times naively, then gives them the zone asked for
FIRST, LAST = datetime(2000, 1, 1), datetime(2100, 1, 1)  # noqa: DTZ001


@given(
    energy=st.floats(allow_nan=False, allow_infinity=False),
    start=st.datetimes(min_value=FIRST, max_value=LAST, timezones=st.just(UTC)),
    name=st.text(max_size=20),
    cost=st.decimals(min_value=0, max_value=10**7, places=2, allow_nan=False),
)
def test_any_row_is_rendered_as_drf_renders_it(energy: float, start: datetime, name: str, cost: Any) -> None:
    job = _job(energy_j=energy, start=start, name=name, cost=cost)
    assert _Planned(job).data == _Drf(job).data


def test_a_values_row_is_rendered_as_its_instance_is() -> None:
    job = _job()
    row = {
        "id": 7, "name": "train", "energy_j": 1.5e6, "start": job.start, "end": None, "hours_run": job.hours_run(),
        "team__name": "vision", "team": 3, "cost": "12.345",
    }  # fmt: skip
    # each field's column (a related field's: the column it shows), then the method fields' columns, once each
    assert _Planned.row_keys() == list(row)
    planned = _Planned().to_representation(row)
    assert planned == _Drf(job).data | {"team_id": 3}
    assert planned["label"] == "train (7)"  # the method got the row, whose columns read as attributes


def test_a_method_field_reading_a_column_it_did_not_list_says_which() -> None:
    class Careless(PlannedRepresentationMixin, serializers.Serializer):
        label = serializers.SerializerMethodField()
        row_method_columns = {"label": ("name",)}

        def get_label(self, job: Any) -> str:
            return job.owner

    with pytest.raises(AttributeError, match="owner: not a column of the row"):
        Careless().to_representation({"name": "x"})


def test_a_nested_serializer_is_refused_when_the_plan_is_made() -> None:
    class Nested(PlannedRepresentationMixin, serializers.Serializer):
        team = _Drf()

    with pytest.raises(TypeError, match="nested serializers are not planned"):
        Nested().to_representation(SimpleNamespace(team=None))
    with pytest.raises(TypeError, match="not rendered from values"):
        Nested().to_representation({"team": None})


def test_a_method_field_without_its_columns_is_refused_for_values_rows() -> None:
    class Unlisted(PlannedRepresentationMixin, serializers.Serializer):
        label = serializers.SerializerMethodField()

        def get_label(self, row: Any) -> str:
            return "x"

    with pytest.raises(TypeError, match=r"Unlisted\.label: not rendered from values"):
        Unlisted.row_keys()


@pytest.mark.django_db
def test_model_instances_and_their_values_rows_render_alike() -> None:
    class ClusterRow(PlannedRepresentationMixin, serializers.ModelSerializer):
        site = serializers.SlugRelatedField(slug_field="name", read_only=True)

        class Meta:
            model = Cluster
            fields = ["id", "name", "scrape_interval_s", "created_at", "scheduler_synced_through", "site"]

    ClusterFactory(name="a", site=SiteFactory(name="paris"), scheduler_synced_through=datetime(2026, 11, 2, tzinfo=UTC))
    ClusterFactory(name="b", site=None)
    clusters = Cluster.objects.order_by("name")
    drf = [serializers.ModelSerializer.to_representation(ClusterRow(), c) for c in clusters]
    planned = [ClusterRow(c).data for c in clusters]
    rows = [ClusterRow().to_representation(r) for r in clusters.values(*ClusterRow.row_keys())]
    assert ClusterRow.row_keys() == ["id", "name", "scrape_interval_s", "created_at", "scheduler_synced_through",
                                     "site__name"]  # fmt: skip
    assert planned == drf == rows
    assert rows[0]["site"] == "paris" and rows[1]["site"] is None
    assert rows[0]["scheduler_synced_through"] == "2026-11-02T00:00:00Z" and rows[1]["scheduler_synced_through"] is None
    assert django_timezone.get_current_timezone_name() == "UTC"
