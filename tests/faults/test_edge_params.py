"""Every parameter read at the edge by apps.core.web.params (issue: no input breaks it). Found by hand against the demo:
a cursor holding `p=garbage`, `p=NaN`, a day out of range, 672 nines or a NUL byte answered 500 on every list
(psycopg.DataError, a date Django could not read); `?month=0000-01`, `?month=9999-12`, `?week=9999-W52` and
`?start=9999-12-30&end=9999-12-31T23:59:59` answered 500 on the rollups, compare, daily energy, outcomes and
/api/focus/ (year 0, OverflowError); `?month=` in full-width digits and `?month=2026-11%0A` were November; a NUL
byte in a page's input (a search, a path, an unsubscribe link, a decision's reason, a token's name) answered 500;
`work_unit` "req\\n" was stored as "req". Each is now a 400 that names the parameter, and nothing is written."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.core.models import ApiToken
from apps.jobs.models import Job
from apps.waste.models import AuditEntry
from tests.api.world import World, world_build

FULL_WIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))
pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> World:
    return world_build()


def _api(world: World, role: str = "admin") -> APIClient:
    client = APIClient()
    client.force_login(world.users[role])
    return client


def _page(world: World, role: str = "admin") -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def _cursor(querystring: str) -> str:
    return base64.b64encode(querystring.encode()).decode()


CURSOR_LISTS = ["/api/jobs/", "/api/flags/", "/api/reports/", "/api/audit-log/", "/api/gpus/", "/api/teams/",
                "/api/clusters/", "/api/job-groups/", "/api/gpus/{gpu}/hours/"]  # fmt: skip
BAD_POSITIONS = {
    "/api/jobs/": ["p=garbage", "p=NaN", "p=9999-99-99", "p=" + "9" * 672, "p=a\x00b", "p=10000-01-01"],
    "/api/flags/": ["p=garbage", "p=NaN", "p=" + "9" * 672, "p=a\x00b"],
    "/api/reports/": ["p=garbage", "p=2026-02-30", "p=" + "9" * 672, "p=a\x00b"],
    "/api/audit-log/": ["p=garbage", "p=NaN", "p=" + "9" * 672, "p=a\x00b"],
    "/api/gpus/": ["p=a\x00b", "p=" + "x" * 2000],
    "/api/teams/": ["p=a\x00b"],
    "/api/clusters/": ["p=a\x00b"],
    "/api/job-groups/": ["p=a\x00b"],
    "/api/gpus/{gpu}/hours/": ["p=garbage", "p=NaN", "p=9999-99-99", "p=a\x00b", "p=10000-01-01"],
}


@pytest.mark.parametrize("path", CURSOR_LISTS)
def test_a_cursor_that_no_page_wrote_is_a_400_naming_the_cursor(world: World, path: str) -> None:
    client, url = _api(world), path.format(gpu=world.gpu_b.pk)
    for querystring in [*BAD_POSITIONS[path], "o=" + "9" * 5000, "r=x"]:
        response = client.get(url, {"cursor": _cursor(querystring)})
        assert response.status_code == 400, (path, querystring[:40], response.status_code)
        assert "cursor" in response.json()
    for raw in ("%%%", "é", "\x00"):
        assert client.get(url, {"cursor": raw}).status_code == 400


@pytest.mark.parametrize("path", CURSOR_LISTS)
def test_the_cursors_a_list_writes_are_read_back(world: World, path: str) -> None:
    # given a list walked one row a page (the rows' own times, days and names in the cursors)
    client, url, query, pages = _api(world), path.format(gpu=world.gpu_b.pk), {"page_size": "1"}, 0
    while url:
        response = client.get(url, query)
        assert response.status_code == 200, (url, response.content[:200])
        url, query, pages = response.json()["next"], {}, pages + 1
    assert pages >= 1


PERIOD_ENDPOINTS = [
    "/api/teams/{team}/rollup/",
    "/api/clusters/{cluster}/rollup/",
    "/api/job-groups/{group}/rollup/",
    "/api/teams/compare/",
    "/api/teams/daily-energy/",
    "/api/job-groups/{group}/outcomes/",
]
BAD_PERIODS = [
    {"month": "0000-01"},
    {"month": "9999-12"},
    {"month": "1999-12"},
    {"month": "\uff12\uff10\uff12\uff16-11"},
    {"month": "2026-11\n"},
    {"week": "9999-W52"},
    {"week": "0001-W01"},
    {"week": "2026-W48\n"},
    {"start": "9999-12-30", "end": "9999-12-31T23:59:59"},
    {"start": "0001-01-01", "end": "0001-01-03"},
    {"start": "2026-11-01", "end": "2026-11-02\n"},
    {"start": "\uff12\uff10\uff12\uff16-11-01", "end": "2026-11-02"},
    {"start": "2026-11-01\x00", "end": "2026-11-02"},
    {"start": "111111111111111111111111111111", "end": "2026-11-02"},
]


@pytest.mark.parametrize("endpoint", PERIOD_ENDPOINTS)
def test_periods_the_data_cannot_hold_are_a_400_naming_the_parameter(world: World, endpoint: str) -> None:
    client = _api(world)
    path = endpoint.format(team=world.team_b.pk, cluster=world.cluster.pk, group=world.group.pk)
    for query in BAD_PERIODS:
        response = client.get(path, query)
        assert response.status_code == 400, (path, query, response.status_code)
        named = {k for k in query if k in response.json()}
        assert named, (path, query, response.json())
    assert client.get(path, {"month": "2026-11"}).status_code == 200
    assert client.get(path, {"week": "2026-W45"}).status_code == 200
    assert client.get(path, {"start": "2026-11-02", "end": "2026-11-03T00:00:00+01:00"}).status_code == 200


def test_the_focus_export_reads_its_month_strictly(world: World) -> None:
    client = _api(world, "finance")
    for month in ("0000-01", "9999-12", "1999-12", "\uff12\uff10\uff12\uff16-11", "2026-11\n", "2026-1", "2026-11-01"):
        response = client.get("/api/focus/", {"month": month})
        assert response.status_code == 400, (month, response.status_code)
        assert "month" in response.json()
    assert client.get("/api/focus/", {"month": "2026-11"}).status_code == 200


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/jobs/", {"user": "alice\n"}),
        ("/api/jobs/", {"job_id": "12\n"}),
        ("/api/jobs/", {"partition": "gpu\x1b"}),
        ("/api/jobs/", {"account": "x" * 201}),
        ("/api/jobs/", {"start": "2026-11-02\n"}),
        ("/api/jobs/", {"end": "0001-01-01"}),
        ("/api/gpus/", {"hostname": "node\n"}),
        ("/api/gpus/", {"start": "9999-12-31"}),
        ("/api/reports/", {"since": "\uff12\uff10\uff12\uff16-11-02"}),
        ("/api/reports/", {"week_start": "2026-11-02\n"}),
        ("/api/flags/", {"older_than_days": "\uff11\uff12"}),
        ("/api/flags/", {"older_than_days": "1.5"}),
        ("/api/audit-log/", {"job": "\uff11"}),
        ("/api/audit-log/", {"job": "1\n"}),
        ("/api/jobs/", {"end": "%"}),  # (found by the fuzz: django-filter formats its messages with %)
        ("/api/jobs/", {"user": "%s\n"}),
    ],
)
def test_list_filters_read_their_values_strictly(world: World, path: str, query: dict) -> None:
    response = _api(world).get(path, query)
    assert response.status_code == 400, (path, query, response.status_code)
    assert set(query) <= set(response.json())


def test_an_id_in_an_api_path_is_ascii_digits(world: World) -> None:
    client = _api(world)
    job = world.job_b.pk
    assert client.get(f"/api/jobs/{job}/").status_code == 200
    for odd in (str(job).translate(FULL_WIDTH), f"{job}%0A", f"{job}%00"):
        assert client.get(f"/api/jobs/{odd}/").status_code == 404, odd


def test_work_unit_with_a_newline_is_refused_and_nothing_is_stored(world: World) -> None:
    client = _api(world, "member")
    response = client.post(f"/api/jobs/{world.job_a.pk}/work/", {"work_units": 3, "work_unit": "req\n"}, format="json")
    assert response.status_code == 400 and "work_unit" in response.json()
    assert Job.objects.get(pk=world.job_a.pk).work_units is None


def test_a_reason_the_database_cannot_hold_is_a_400_through_the_api(world: World) -> None:
    client = _api(world)
    for reason in ("a\x00b", "\ud800", "x" * 5001):  # (JSON escapes: a lone surrogate cannot be UTF-8)
        body = json.dumps({"reason": reason})
        response = client.post(f"/api/flags/{world.flag_b.pk}/acknowledge/", body, content_type="application/json")
        assert response.status_code == 400 and "reason" in response.json()
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "/jobs/?q=a%00b",
        "/jobs/?q=invoice%0A",
        "/jobs/?mine=%00",
        "/jobs/slurm/a%00b/",
        "/reports/?team=a%00b",
        "/reports/?since=2026-11-02%0A",
        "/reports/preview/?week=1999-12-31",
        "/?start=2026-11-01%0A",
        "/?start=1999-12-31",
        "/audit/?older_than_days=%EF%BC%91",
    ],
)
def test_pages_refuse_what_their_parameters_do_not_take(world: World, url: str) -> None:
    response = _page(world).get(url)
    assert response.status_code == 400, (url, response.status_code)
    assert b"<h1>Bad request</h1>" in response.content


def test_an_unsubscribe_link_with_a_nul_byte_is_a_400_without_login(world: World) -> None:
    anonymous = Client()
    assert anonymous.get("/reports/unsubscribe/a%00b/").status_code == 400
    assert anonymous.post("/reports/unsubscribe/a%00b/").status_code == 400
    assert anonymous.get(f"/reports/unsubscribe/{world.recipient_b.token}/").status_code == 200


def test_page_forms_refuse_text_the_database_cannot_hold_and_write_nothing(world: World) -> None:
    admin, finance = _page(world), _page(world, "finance")
    for url, form in [
        (f"/audit/{world.flag_b.pk}/act/", {"action": "acknowledge", "reason": "a\x00b"}),
        (f"/audit/{world.flag_b.pk}/act/", {"action": "ack\x00", "reason": "ok"}),
        (f"/audit/jobs/{world.job_b.pk}/act/", {"action": "exclude", "reason": "a\x00b"}),
        (f"/audit/jobs/{world.job_b.pk}/act/", {"action": "reassign_team", "team": "a\x00b", "reason": "ok"}),
        (f"/audit/jobs/{world.job_b.pk}/act/", {"action": "reassign_group", "job_group": "a\x00b", "reason": "ok"}),
    ]:
        response = admin.post(url, form)
        assert response.status_code == 400, (url, form, response.status_code)
    assert not AuditEntry.objects.exists()
    tokens = ApiToken.objects.count()
    assert finance.post("/tokens/", {"name": "ERP\x00"}).status_code == 400
    assert finance.post("/tokens/", {"name": "x" * 101}).status_code == 400
    assert ApiToken.objects.count() == tokens
    # a reason of several lines is a reason
    several = {"action": "acknowledge", "reason": "seen\r\nok"}
    assert admin.post(f"/audit/{world.flag_b.pk}/act/", several).status_code == 302
    assert AuditEntry.objects.get().reason == "seen\r\nok"
