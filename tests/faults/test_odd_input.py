"""Odd input answered 500 (nothing written): `?page_size=²` (`str.isdigit()` takes it, `int()` does not),
`?end=0001-01-03` on the fleet, team and GPU pages and `/reports/preview/?week=0001-01-01` or `9999-12-31`
(OverflowError), a JSON body nested 100,000 deep (RecursionError). Every integer and date parameter is now
read strictly: a clear 400 (a page saying which parameter and why, for the pages), never a 500."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.reports.models import WeeklyReport
from apps.waste.models import AuditEntry
from tests.api.world import World, world_build

pytestmark = pytest.mark.django_db

NOT_WHOLE_NUMBERS = ["²", "١٢", "1.0", " 5", "5 ", "+5", "0x10", "9" * 5000, "1e3", ""]


@pytest.fixture
def world() -> World:
    return world_build()


def _client(world: World, role: str = "admin") -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


@pytest.mark.parametrize("path", ["/api/jobs/", "/api/flags/", "/api/gpus/", "/api/reports/", "/api/audit-log/"])
def test_page_size_takes_only_ascii_whole_numbers(world: World, path: str) -> None:
    client = _client(world)
    for value in NOT_WHOLE_NUMBERS:
        response = client.get(path, {"page_size": value})
        assert response.status_code == 400, (path, value, response.status_code)
        assert "page_size" in response.json()
    assert client.get(path, {"page_size": "7"}).status_code == 200


ODD_DATES = [
    {"end": "0001-01-03"},
    {"start": "0001-01-01"},
    {"end": "9999-12-31"},
    {"start": "9999-12-31", "end": "9999-12-31"},
    {"start": "2026-11-03", "end": "2026-11-02"},  # backwards
    {"start": "2020-01-01", "end": "2026-11-02"},  # longer than a rollup covers
    {"end": "2026-11-02T00:00:00+05:00"},  # a time where the page reads a day
    {"end": "\uff12\uff10\uff12\uff16-11-02"},  # full-width digits
    {"start": "20261102"},
    {"end": "2026-02-30"},
]


@pytest.mark.parametrize("query", ODD_DATES, ids=[str(q) for q in ODD_DATES])
def test_pages_refuse_dates_they_cannot_read_with_a_400_page(world: World, query: dict) -> None:
    client = _client(world)
    for path in ("/", f"/teams/{world.team_b.pk}/", f"/gpus/{world.gpu_b.pk}/"):
        response = client.get(path, query)
        assert response.status_code == 400, (path, query, response.status_code)
        assert b"<h1>Bad request</h1>" in response.content
        assert any(k.encode() in response.content for k in query), response.content


def test_pages_still_read_their_dates(world: World) -> None:
    client = _client(world)
    for path in ("/", f"/teams/{world.team_b.pk}/", f"/gpus/{world.gpu_b.pk}/"):
        assert client.get(path, {"start": "2026-11-02", "end": "2026-11-03"}).status_code == 200
        assert client.get(path, {"start": "", "end": ""}).status_code == 200  # the form's empty fields
        assert client.get(path).status_code == 200


@pytest.mark.parametrize(
    "query",
    [{"week": "0001-01-01"}, {"week": "9999-12-31"}, {"week": "2026-13-01"}, {"team": "²"}, {"team": "9" * 30}],
)
def test_the_report_preview_refuses_odd_weeks_and_teams(world: World, query: dict) -> None:
    client = _client(world)
    response = client.get("/reports/preview/", query)
    assert response.status_code == 400, (query, response.status_code)
    sent = client.post("/reports/send/", query)
    assert sent.status_code == 400, (query, sent.status_code)
    assert WeeklyReport.objects.count() == 1  # the world's own


def test_recipients_refuse_an_odd_recipient_id(world: World) -> None:
    response = _client(world).post(
        f"/reports/teams/{world.team_b.pk}/recipients/", {"action": "remove", "recipient": "x²"}
    )
    assert response.status_code == 400


@pytest.mark.parametrize("path", ["/jobs/{}/", "/teams/{}/", "/gpus/{}/", "/reports/{}/", "/api/jobs/{}/"])
def test_ids_beyond_the_database_range_are_not_found(world: World, path: str) -> None:
    assert _client(world).get(path.format("9" * 30)).status_code == 404


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_json_body_nested_too_deep_is_a_400(world: World) -> None:
    member = APIClient()
    member.force_login(world.users["member"])
    admin = APIClient()
    admin.force_login(world.users["admin"])
    for client, url in (
        (member, f"/api/jobs/{world.job_a.pk}/work/"),
        (admin, f"/api/flags/{world.flag_b.pk}/acknowledge/"),
        (admin, f"/api/jobs/{world.job_b.pk}/exclude/"),
    ):
        response = client.post(url, _deep(100_000), content_type="application/json")
        assert response.status_code == 400, (url, response.status_code)
        body = '{"reason": ' + _deep(100_000) + "}"
        assert client.post(url, body, content_type="application/json").status_code == 400
    assert not AuditEntry.objects.exists()
    assert Job.objects.get(pk=world.job_a.pk).work_units is None


def test_actions_answer_through_their_format_suffix(world: World) -> None:
    """Found by the access matrix: the routers also route `.../work.json`, and the actions, not taking the
    `format` argument, answered 500."""
    member, admin = APIClient(), APIClient()
    member.force_login(world.users["member"])
    admin.force_login(world.users["admin"])
    period = "?start=2026-11-02&end=2026-11-03"
    work = {"work_units": 3, "work_unit": "request"}
    assert member.post(f"/api/jobs/{world.job_a.pk}/work.json", work, format="json").status_code == 200
    assert admin.post(f"/api/flags/{world.flag_b.pk}/acknowledge.json", {"reason": "ok"}).status_code == 201
    assert admin.post(f"/api/jobs/{world.job_b.pk}/exclude.json", {"reason": "ok"}).status_code == 201
    for path in (
        f"/api/teams/{world.team_b.pk}/rollup.json",
        "/api/teams/compare.json",
        "/api/teams/daily-energy.json",
        f"/api/clusters/{world.cluster.pk}/rollup.json",
        f"/api/job-groups/{world.group.pk}/rollup.json",
    ):
        assert admin.get(path + period).status_code == 200, path


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/audit/", {"older_than_days": "1e308"}),
        ("/audit/", {"older_than_days": "²"}),
        ("/audit/", {"kind": "no-such-kind"}),
        ("/audit/", {"team": "\x00"}),
        ("/reports/", {"since": "99999-01-01"}),
        ("/reports/", {"week_start": "2026-13-01"}),
        ("/reports/", {"status": "nope"}),
    ],
)
def test_filtered_pages_refuse_values_they_would_have_ignored(world: World, path: str, query: dict) -> None:
    response = _client(world).get(path, query)
    assert response.status_code == 400, (path, query, response.status_code)
    assert b"<h1>Bad request</h1>" in response.content


def test_the_fleet_page_shows_the_prometheus_url_to_admins_only_and_without_credentials(client) -> None:
    from django.contrib.auth.models import User

    from apps.fleet.models import Cluster

    Cluster.objects.create(name="c9", prometheus_url="http://scraper:s3cret@prom.example.org:9090/")
    member = User.objects.create_user("reader")
    client.force_login(member)
    assert b"prom.example.org" not in client.get("/").content
    admin = User.objects.create_user("boss", is_staff=True)
    client.force_login(admin)
    page = client.get("/").content
    assert b"http://prom.example.org:9090/" in page and b"s3cret" not in page
