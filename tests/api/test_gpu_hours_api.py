"""A GPU's power limit and SM clock in the GPU API: `/api/gpus/{id}/` sums them up over the period (the worked example
of docs/arithmetic.md, "A GPU's settings over a period"), `/api/gpus/{id}/hours/` gives each GPU-hour's, null where
nobody exported them, never 0; admins and finance only; a parameter it does not take is a 400; the list is unchanged."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from apps.fleet.models import TeamMembership
from tests.carbon.fleet_builder import HOUR, T0, fleet_build
from tests.telemetry.test_selectors import SETTINGS_HOURS, settings_hours_store

pytestmark = pytest.mark.django_db

PERIOD = {"start": T0.isoformat(), "end": (T0 + 4 * HOUR).isoformat()}


@pytest.fixture
def fleet():
    fleet = fleet_build(servers=1, gpus_per_server=2)
    settings_hours_store(fleet.gpus[0])
    return fleet


@pytest.fixture
def gpu(fleet):
    return fleet.gpus[0]


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def admin() -> APIClient:
    return _client(User.objects.create_user("boss", is_staff=True))


def test_a_gpu_s_answer_sums_up_its_settings_over_the_period(gpu, admin) -> None:
    # when
    answer = admin.get(f"/api/gpus/{gpu.pk}/", PERIOD)
    # then: docs/arithmetic.md's worked example
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["hours"] == 4
    assert (body["power_limit_w"], body["power_limit_min_w"], body["power_limit_max_w"]) == (600.0, 500.0, 700.0)
    assert body["power_limit_hours"] == 3 and body["sm_clock_hours"] == 3
    assert body["sm_clock_mhz"] == pytest.approx(1730.0)
    # an hour nobody exported them in: unknown, never 0
    late = admin.get(f"/api/gpus/{gpu.pk}/", {"start": (T0 + 3 * HOUR).isoformat()}).json()
    assert late["hours"] == 1 and late["power_limit_w"] is None and late["sm_clock_mhz"] is None
    assert late["power_limit_hours"] == 0


def test_each_gpu_hour_with_its_settings_page_by_page_and_as_csv(gpu, admin) -> None:
    # when: two hours a page
    rows, url = [], f"/api/gpus/{gpu.pk}/hours/?page_size=2"
    while url:
        page = admin.get(url)
        assert page.status_code == 200, page.content
        rows += page.json()["results"]
        url = page.json()["next"]
    # then: each hour once, oldest first, as stored
    assert [r["hour"] for r in rows] == [(T0 + h * HOUR).isoformat().replace("+00:00", "Z") for h in range(4)]
    got = [(r["power_limit_w"], r["power_limit_min_w"], r["power_limit_max_w"], r["sm_clock_mhz"]) for r in rows]
    assert got == SETTINGS_HOURS
    assert rows[0]["source"] == "agent" and rows[0]["device_energy_j"] == 1.0e6
    # a period, and the CSV: an unknown figure an empty cell, not 0
    text = admin.get(f"/api/gpus/{gpu.pk}/hours/", {**PERIOD, "start": (T0 + 2 * HOUR).isoformat(), "format": "csv"})
    table = list(csv.DictReader(io.StringIO(text.content.decode())))
    assert [r["power_limit_w"] for r in table] == ["500.0", ""]
    assert [r["sm_clock_mhz"] for r in table] == ["1410.0", ""]


def test_the_list_is_unchanged(gpu, admin) -> None:
    listed = admin.get("/api/gpus/", PERIOD).json()["results"]
    assert len(listed) == 2 and "power_limit_w" not in listed[0]


def test_fleet_wide_readers_only_and_bad_asks_are_refused(fleet, gpu, admin) -> None:
    # given a member of a team and a finance reader
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team, role="member")
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name="finance"))
    for path in (f"/api/gpus/{gpu.pk}/", f"/api/gpus/{gpu.pk}/hours/"):
        assert APIClient().get(path).status_code in (401, 403)
        assert _client(member).get(path).status_code == 403
        assert _client(finance).get(path).status_code == 200
    # an unknown GPU, a parameter the list does not take, a time that is none
    assert admin.get("/api/gpus/999999/hours/").status_code == 404
    unknown = admin.get(f"/api/gpus/{gpu.pk}/hours/", {"hour": "1"})
    assert unknown.status_code == 400 and "hour" in unknown.json()["detail"]
    bad = admin.get(f"/api/gpus/{gpu.pk}/hours/", {"start": "yesterday"})
    assert bad.status_code == 400 and "start" in bad.json()
    assert admin.get(f"/api/gpus/{gpu.pk}/", {"end": "2026-13-01"}).status_code == 400
