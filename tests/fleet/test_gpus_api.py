"""The GPUs list renders `values()` rows by its serializer's plan (apps.core.web.serializers): the same output as DRF
rendering the annotated GPU instances, with and without a period, across a page boundary of its cursor."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from apps.core.web.serializers import PlannedRepresentationMixin
from apps.fleet.api.serializers import GpuSerializer
from apps.fleet.api.views import GpuViewSet
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, job_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("period", ["", f"start={T0.isoformat()}&end={(T0 + HOUR).isoformat()}"])
def test_gpu_rows_render_exactly_as_drf_renders_the_gpus(period) -> None:
    fleet = fleet_build(servers=1)
    job_run(fleet, key="slurm/a", gpus=fleet.gpus[:3], hours=2, power_w=500)
    footprints_recompute()
    admin = User.objects.create_user("boss", is_staff=True)
    client = APIClient()
    client.force_authenticate(admin)
    listed, url = [], f"/api/gpus/?page_size=3&{period}".replace("+", "%2B")
    while url:
        page = client.get(url)
        assert page.status_code == 200, page.content
        listed += page.json()["results"]
        url = page.json()["next"]
    view = GpuViewSet(action="retrieve", format_kwarg=None)
    view.request = Request(APIRequestFactory().get(f"/api/gpus/?{period}".replace("+", "%2B")))
    gpus = list(view.get_queryset())
    assert len(listed) == len(gpus) == 8 and any(g.hours_count for g in gpus)
    drf_own = [super(PlannedRepresentationMixin, GpuSerializer()).to_representation(g) for g in gpus]
    assert listed == drf_own


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/gpus/", "/api/teams/", "/api/clusters/", "/api/job-groups/"])
def test_an_unknown_query_parameter_on_the_fleet_lists_is_a_400_naming_it(path: str) -> None:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True, is_superuser=True))
    answer = client.get(path, {"clustr": "a"})  # a typo of `cluster`
    assert answer.status_code == 400
    assert "Unknown query parameter: clustr" in answer.content.decode()
    assert client.get(path, {"page_size": 5}).status_code == 200


@pytest.mark.django_db
def test_the_gpu_list_still_takes_its_period_and_filters() -> None:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True, is_superuser=True))
    query = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z", "hostname": "x", "model_name": "H100"}
    assert client.get("/api/gpus/", query).status_code == 200
