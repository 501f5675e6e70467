"""The rollups' documents kept ready (apps.rollups.documents): one asked for is prepared again after an ingest, and
until then the one kept before the ingest is answered, never kept as the new generation's page; an edit is seen at
once; the mark of an ingest ends by itself; what is gone is dropped, what fails is logged, never the ingest's
failure; a member's teams side by side stays theirs."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.core.kept import INGEST_STARTED_KEY, ROLLUPS_ASKED_KEY, data_changed, ingest_started, ingest_started_at
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.derive import Fact, Scope, derive
from apps.pipeline.inputs import footprints_recompute
from apps.rollups import documents
from tests.carbon.fleet_builder import T0, fleet_build, job_run

pytestmark = pytest.mark.django_db

PERIOD = f"start={T0:%Y-%m-%d}&end={T0 + timedelta(days=1):%Y-%m-%d}&granularity=day"


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    job_run(fleet, key="slurm/first", gpus=fleet.gpus[:1], hours=2, power_w=500)
    footprints_recompute()
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return fleet, member


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _ingest(fleet, key: str, django_capture_on_commit_callbacks) -> None:
    """What an ingest's task does around its write: the mark, new job-hours derived as the ingest derives them."""
    ingest_started()
    job = job_run(fleet, key=key, gpus=fleet.gpus[1:2], hours=2, power_w=700)
    with django_capture_on_commit_callbacks(execute=True):
        derive(
            Scope(cluster_ids=frozenset([fleet.cluster.pk]), start=T0, end=T0 + timedelta(hours=2),
                  job_ids=frozenset([job.pk])),
            changed={Fact.JOB_ROWS},
        )  # fmt: skip


def _cost(response) -> str:
    assert response.status_code == 200, response.content
    return response.json()["totals"]["cost_exact"]


def test_after_an_ingest_the_rollup_kept_before_is_answered_until_prepared_then_the_new_one(
    world, django_capture_on_commit_callbacks
) -> None:
    fleet, member = world
    team_rollup = f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}"
    before = _cost(_client(member).get(team_rollup))
    # when an ingest writes a second job of the team
    _ingest(fleet, "slurm/second", django_capture_on_commit_callbacks)
    # then, until the documents are prepared, the rollup kept before it is answered: from its page, and, the page
    # gone (its FLEETWATT_API_PAGE_CACHE_S is shorter than a document's life), from the document, whose page is
    # kept at the document's generation, not the new one
    assert _cost(_client(member).get(team_rollup)) == before
    redis = cache._cache.get_client()  # type: ignore[attr-defined]
    redis.delete(*redis.keys("*fleetwatt:page:*"))
    assert _cost(_client(member).get(team_rollup)) == before
    assert _cost(_client(member).get(team_rollup)) == before
    # and once prepared, the new figures, from the cache, and the ingest's mark is lifted
    report = documents.asked_prepare()
    assert (report.asked, report.prepared, report.failed) == (1, 1, 0)
    assert ingest_started_at() is None
    after = _cost(_client(member).get(team_rollup))
    assert float(after) > float(before)
    again = documents.asked_prepare()  # a second prepare (another worker's ingest) finds it current
    assert (again.prepared, again.current) == (0, 1)
    # equal to the rollup computed afresh
    cache.clear()
    assert _cost(_client(member).get(team_rollup)) == after


def test_an_edit_during_an_ingest_is_seen_at_once(world, django_capture_on_commit_callbacks) -> None:
    fleet, member = world
    team_rollup = f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}"
    before = _cost(_client(member).get(team_rollup))
    _ingest(fleet, "slurm/second", django_capture_on_commit_callbacks)
    # when an admin's edit comes while the ingest's documents are not yet prepared
    Job.objects.filter(job_key="slurm/first").update(excluded_from_bill=True)
    data_changed()
    # then nothing kept before is answered any more: the next ask computes
    assert cache.get(INGEST_STARTED_KEY) is None
    assert _cost(_client(member).get(team_rollup)) != before


def test_the_mark_of_an_ingest_ends_by_itself_and_is_off_with_a_window_of_0(world, settings) -> None:
    settings.FLEETWATT_ROLLUPS_STALE_S = 7
    ingest_started()
    ttl = cache._cache.get_client().ttl(cache.make_and_validate_key(INGEST_STARTED_KEY))  # type: ignore[attr-defined]
    assert 0 < ttl <= 7
    cache.delete(INGEST_STARTED_KEY)
    settings.FLEETWATT_ROLLUPS_STALE_S = 0
    ingest_started()
    assert ingest_started_at() is None


def test_a_second_ingest_keeps_the_first_one_s_mark(world) -> None:
    ingest_started()
    first = ingest_started_at()
    data_changed(by_ingest=True)
    ingest_started()
    assert ingest_started_at() == first


def test_what_is_gone_is_dropped_and_what_fails_is_logged_not_raised(world, monkeypatch, caplog) -> None:
    fleet, member = world
    client = _client(member)
    assert client.get(f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}").status_code == 200
    gone = Team.objects.create(name="gone")
    cache.sorted_add(  # type: ignore[attr-defined]
        ROLLUPS_ASKED_KEY, documents.Ask("team", gone.pk, T0, T0 + timedelta(days=1), "day").as_member(),
        time.time(), keep=10,
    )  # fmt: skip
    gone.delete()
    cache.sorted_add(ROLLUPS_ASKED_KEY, '["no such kind", 1]', time.time(), keep=10)  # type: ignore[attr-defined]
    broken = documents.Kind(
        load=documents.KINDS["team"].load, key=documents.KINDS["team"].key, compute=lambda *_: 1 / 0
    )
    monkeypatch.setitem(documents.KINDS, "team", broken)
    data_changed()
    # when the documents are prepared
    report = documents.asked_prepare()
    # then the asks of what is gone are dropped, the one that fails is logged, and nothing raised
    assert (report.asked, report.dropped, report.failed, report.prepared) == (3, 2, 1, 0)
    assert "not prepared" in caplog.text
    assert documents.asked_prepare().asked == 1


def test_asks_older_than_the_window_are_not_prepared_nor_past_the_budget(world, settings) -> None:
    fleet, member = world
    assert _client(member).get(f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}").status_code == 200
    data_changed()
    settings.FLEETWATT_ROLLUPS_ASKED_WITHIN_S = 60
    assert documents.asked_prepare(now=10**10).asked == 0  # asked long before `now`
    settings.FLEETWATT_ROLLUPS_PREPARE_BUDGET_S = -1
    report = documents.asked_prepare()
    assert (report.asked, report.prepared, report.left) == (1, 0, 1)


def test_a_member_s_teams_side_by_side_prepared_is_of_their_teams_as_they_are_then(
    world, django_capture_on_commit_callbacks
) -> None:
    fleet, member = world
    other = Team.objects.create(name="other")
    outsider = User.objects.create_user("bob")
    TeamMembership.objects.create(user=outsider, team=other)
    compare = f"/api/teams/compare/?{PERIOD}"
    assert [t["team"] for t in _client(member).get(compare).json()] == [fleet.team.name]
    assert _client(outsider).get(compare).json() == []
    # when the member leaves the team and an ingest's documents are prepared
    TeamMembership.objects.filter(user=member).delete()
    _ingest(fleet, "slurm/second", django_capture_on_commit_callbacks)
    assert documents.asked_prepare().prepared == 2
    # then neither sees the team's figures (the member as the next request loads it)
    assert _client(User.objects.get(pk=member.pk)).get(compare).json() == []
    assert _client(outsider).get(compare).json() == []


@pytest.mark.parametrize(("fact", "kept"), [(Fact.JOB_ROWS, True), (Fact.SCHEDULER, True), (Fact.BILLING, False)])
def test_a_derivation_keeps_an_ingest_s_mark_only_for_an_ingest_s_facts(
    world, fact, kept, django_capture_on_commit_callbacks
) -> None:
    fleet, _ = world
    ingest_started()
    job = Job.objects.get(job_key="slurm/first")
    scope = Scope(cluster_ids=frozenset([fleet.cluster.pk]), start=T0, end=T0 + timedelta(hours=2),
                  job_ids=frozenset([job.pk]))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        derive(scope, changed={fact})
    assert (ingest_started_at() is not None) == kept


def test_only_asks_that_were_answered_are_prepared_after_an_ingest(world, monkeypatch) -> None:
    """A refused ask (a period the data cannot hold, a computation that fails) was recorded before it was answered,
    and every ingest then tried it again for a day, logging an ERROR each time."""
    fleet, member = world
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(member)
    # given a rollup whose computation fails, and a period the data cannot hold
    failing = documents.Kind(
        load=documents.KINDS["team"].load, key=documents.KINDS["team"].key, compute=lambda *_: 1 / 0
    )
    monkeypatch.setitem(documents.KINDS, "team", failing)
    assert client.get(f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}").status_code == 500
    assert client.get(f"/api/teams/{fleet.team.pk}/rollup/?start=9999-12-30&end=9999-12-31").status_code == 400
    # then neither is prepared after the next ingest
    data_changed()
    assert documents.asked_prepare().asked == 0
    # and one that was answered is
    monkeypatch.undo()
    assert client.get(f"/api/teams/{fleet.team.pk}/rollup/?{PERIOD}").status_code == 200
    assert documents.asked_prepare().asked == 1
