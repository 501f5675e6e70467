"""Pages of the API's lists and sums kept per data generation (apps.core.page_cache): a repeat is served
from the cache; every change of what a page shows is seen at once; nobody gets a page of teams not theirs."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.carbon.models import JobGroup
from apps.core.access.policy import FINANCE_GROUP
from apps.core.kept import GENERATION_KEY, data_changed, data_generation
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.reports.models import WeeklyReport
from apps.waste.models import Flag
from tests.carbon.fleet_builder import fleet_build, job_run

pytestmark = pytest.mark.django_db
JOBS = "/api/jobs/?page_size=10"
FLAGS = "/api/flags/?page_size=10"


@pytest.fixture
def fleet():
    fleet = fleet_build(servers=1)
    mine = job_run(fleet, key="slurm/mine", gpus=fleet.gpus[:1], hours=2, power_w=500)
    other_team = Team.objects.create(name="other")
    theirs = job_run(fleet, key="slurm/theirs", gpus=fleet.gpus[1:2], hours=2, power_w=500)
    Job.objects.filter(pk=theirs.pk).update(team=other_team)
    footprints_recompute()
    Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=mine, evidence={})
    Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=theirs, evidence={})
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    outsider = User.objects.create_user("bob")
    TeamMembership.objects.create(user=outsider, team=other_team)
    return fleet, member, outsider


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _keys() -> list[str]:
    return sorted(k for k in cache._cache.get_client().keys("*fleetwatt:page:*"))  # type: ignore[attr-defined]


def test_a_repeated_page_is_served_from_the_cache_as_it_was_rendered(fleet) -> None:
    _, member, _ = fleet
    first = _client(member).get(JOBS)
    assert first.status_code == 200 and len(_keys()) == 1
    Job.objects.update(name="renamed behind the cache's back")  # not a write the app makes: no new generation
    again = _client(member).get(JOBS)
    assert again.status_code == 200 and again.content == first.content
    assert again["Content-Type"] == first["Content-Type"] == "application/json"


def test_each_caller_gets_the_rows_of_its_own_teams(fleet) -> None:
    fleet_, member, outsider = fleet
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name=FINANCE_GROUP))
    for path in (JOBS, FLAGS):
        mine = _client(member).get(path).json()["results"]
        theirs = _client(outsider).get(path).json()["results"]
        every = _client(finance).get(path).json()["results"]
        assert {r["team"] for r in mine} == {fleet_.team.name}
        assert {r["team"] for r in theirs} == {"other"}
        assert mine and theirs and len(every) == len(mine) + len(theirs)
    assert len(_keys()) == 6  # a page per list and scope


def test_a_change_of_what_the_page_shows_is_seen_at_once(fleet) -> None:
    fleet_, member, _ = fleet
    admin = User.objects.create_user("boss", is_staff=True)
    client = _client(member)
    assert {r["team"] for r in client.get(JOBS).json()["results"]} == {fleet_.team.name}
    # the admin renames the team
    team = Team.objects.get(pk=fleet_.team.pk)
    team.name = "vision"
    team.save()
    assert {r["team"] for r in client.get(JOBS).json()["results"]} == {"vision"}
    # the job reports its work
    job = Job.objects.get(job_key="slurm/mine")
    assert client.get(JOBS).json()["results"][0]["functional_unit"] == "run"
    assert client.post(f"/api/jobs/{job.pk}/work/", {"work_units": 5, "work_unit": "request"}).status_code == 200
    assert client.get(JOBS).json()["results"][0]["functional_unit"] == "request"
    # an admin acknowledges the finding
    flag = Flag.objects.get(job=job, kind="memory_hog")

    def status() -> str:
        return next(r["status"] for r in client.get(FLAGS).json()["results"] if r["id"] == flag.pk)

    assert status() == "open"
    assert _client(admin).post(f"/api/flags/{flag.pk}/acknowledge/", {"reason": "expected"}).status_code == 201
    assert status() == "acknowledged"


def test_a_derivation_moves_the_generation_on(fleet) -> None:
    before = data_generation()
    footprints_recompute()
    assert data_generation() > before


def test_only_json_pages_that_answered_200_are_kept(fleet) -> None:
    _, member, _ = fleet
    client = _client(member)
    assert client.get("/api/jobs/?state=nonsense").status_code == 400
    assert client.get("/api/jobs/?nonsense=1").status_code == 400
    assert client.get("/api/jobs/", {"format": "csv", "page_size": 10}).status_code == 200
    assert client.get(JOBS, HTTP_ACCEPT="text/html").status_code == 200  # the browsable API
    assert _keys() == []


def test_no_page_is_kept_when_the_setting_is_0(fleet, settings) -> None:
    settings.FLEETWATT_API_PAGE_CACHE_S = 0
    _, member, _ = fleet
    assert _client(member).get(JOBS).status_code == 200
    assert _keys() == []


def test_anonymous_callers_are_refused_before_the_cache(fleet) -> None:
    _, member, _ = fleet
    assert _client(member).get(JOBS).status_code == 200
    assert APIClient().get(JOBS).status_code in (401, 403)


def test_the_generation_restarts_from_0_when_redis_forgot_it(fleet) -> None:
    cache.delete(GENERATION_KEY)
    assert data_generation() == 0
    _, member, _ = fleet
    assert _client(member).get(JOBS).status_code == 200


def test_an_admin_and_finance_are_kept_apart(fleet) -> None:
    """Both see every team, but only admins the fleet's weekly summaries: their pages are not shared."""
    fleet_, _, _ = fleet
    admin = User.objects.create_user("boss", is_staff=True)
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name=FINANCE_GROUP))
    WeeklyReport.objects.create(team=None, week_start=date(2026, 11, 23))
    WeeklyReport.objects.create(team=fleet_.team, week_start=date(2026, 11, 23))
    assert len(_client(admin).get("/api/reports/").json()["results"]) == 2
    assert len(_client(finance).get("/api/reports/").json()["results"]) == 1
    assert len(_client(admin).get("/api/reports/").json()["results"]) == 2


def test_a_report_sent_is_seen_at_once(fleet) -> None:
    fleet_, member, _ = fleet
    report = WeeklyReport.objects.create(team=fleet_.team, week_start=date(2026, 11, 23))
    client = _client(member)
    assert client.get("/api/reports/").json()["results"][0]["status"] == "pending"
    WeeklyReport.objects.filter(pk=report.pk).update(status=WeeklyReport.Status.SENT)  # as a send leaves it
    assert client.get("/api/reports/").json()["results"][0]["status"] == "sent"


def test_the_fleet_lists_and_sums_are_kept_and_see_changes_at_once(fleet) -> None:
    fleet_, member, _ = fleet
    admin = _client(User.objects.create_user("boss", is_staff=True))
    group = JobGroup.objects.create(name="llm", match_kind=JobGroup.MatchKind.values[0], match_value="x")
    Job.objects.filter(job_key="slurm/mine").update(job_group=group)
    footprints_recompute()
    period = "month=2026-11"
    pages = [
        "/api/gpus/?page_size=5", "/api/clusters/", "/api/job-groups/", "/api/teams/", "/api/audit-log/",
        f"/api/teams/compare/?{period}", f"/api/teams/daily-energy/?{period}",
        f"/api/job-groups/{group.pk}/rollup/?{period}&granularity=month",
        f"/api/job-groups/{group.pk}/outcomes/?{period}",
        f"/api/teams/{fleet_.team.pk}/rollup/?{period}", f"/api/clusters/{fleet_.cluster.pk}/rollup/?{period}",
    ]  # fmt: skip
    first = {path: admin.get(path) for path in pages}
    assert all(r.status_code == 200 for r in first.values()), {p: r.status_code for p, r in first.items()}
    assert len(_keys()) == len(pages)
    assert all(admin.get(path).content == first[path].content for path in pages)
    # the admin renames a GPU's model, then takes a decision: both show at once
    gpu = fleet_.gpus[0]
    gpu.model_name = "NVIDIA H100"
    gpu.save()
    assert "NVIDIA H100" in admin.get("/api/gpus/?page_size=5").content.decode()
    flag = Flag.objects.get(job__job_key="slurm/mine")
    assert admin.post(f"/api/flags/{flag.pk}/acknowledge/", {"reason": "expected"}).status_code == 201
    assert [e["action"] for e in admin.get("/api/audit-log/").json()["results"]] == ["acknowledge"]
    # the admin takes the job off its team's bill: the team's rollup (kept as a page, and as its own document)
    team_rollup = f"/api/teams/{fleet_.team.pk}/rollup/?{period}"
    billed = admin.get(team_rollup).json()["totals"]["energy_j"]
    job = Job.objects.get(job_key="slurm/mine")
    assert admin.post(f"/api/jobs/{job.pk}/exclude/", {"exclude": True, "reason": "a test"}).status_code == 201
    assert admin.get(team_rollup).json()["totals"]["energy_j"] < billed
    # a member's answer counts its teams' runs only, and is kept apart from the admin's
    outcomes = f"/api/job-groups/{group.pk}/outcomes/?{period}"
    mine = _client(member).get(outcomes)
    assert mine.status_code == 200 and mine.json()["total"] == admin.get(outcomes).json()["total"]


def test_a_page_of_an_older_generation_is_computed_again_and_replaces_it(fleet) -> None:
    _, member, _ = fleet
    client = _client(member)
    first = client.get(JOBS)
    [key] = _keys()
    Job.objects.update(name="renamed")
    data_changed()
    again = client.get(JOBS)
    assert again.content != first.content and {r["name"] for r in again.json()["results"]} == {"renamed"}
    assert _keys() == [key]  # overwritten, not a second entry beside the stale one
    stamp, _ = cache.get(key.decode().split(":", 2)[2])  # (Django's raw key: ":<version>:<key>")
    assert stamp == data_generation()


def test_a_forgotten_generation_starts_past_every_page_kept(fleet) -> None:
    """Redis evicted the generation (or it was flushed) while pages of generation 0 or 1 stayed: none is served."""
    _, member, _ = fleet
    client = _client(member)
    cache.delete(GENERATION_KEY)
    first = client.get(JOBS)
    Job.objects.update(name="renamed behind the cache's back")
    cache.delete(GENERATION_KEY)  # forgotten again, the page kept: it may be of any generation
    again = client.get(JOBS)
    assert {r["name"] for r in again.json()["results"]} == {"renamed behind the cache's back"} != first.json()
    data_changed()
    assert data_generation() > 10**15  # microseconds since 1970: past any counted generation


def test_a_change_while_redis_is_unreachable_fails_nothing(settings) -> None:
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2, "retry_after_s": 0.2},
        }
    }
    from apps.core import kept

    kept._bump()  # the increment, then the fresh start, both missed (the increment is replayed later)
    data_changed()
    assert data_generation() == 0


def test_a_rollup_kept_before_a_change_is_replaced_not_left_beside(fleet) -> None:
    from apps.rollups.selectors import team_rollup_cached

    fleet_, _, _ = fleet
    period = {"start": datetime(2026, 11, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}
    first = team_rollup_cached(team=fleet_.team, granularity="day", **period)
    rollups = sorted(cache._cache.get_client().keys("*fleetwatt:rollup:*"))  # type: ignore[attr-defined]
    data_changed()
    assert team_rollup_cached(team=fleet_.team, granularity="day", **period) == first
    assert sorted(cache._cache.get_client().keys("*fleetwatt:rollup:*")) == rollups  # type: ignore[attr-defined]
