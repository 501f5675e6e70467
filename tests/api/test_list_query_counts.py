"""Pinned query counts on every list of the API (and the team rollup, comparison and daily energy):
measured for an admin on a small data set, then again with three times the rows. A list that asks the
database once per row fails here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.rollups.services import day_sums_refresh
from tests.factories import (
    T0,
    AdminFactory,
    AuditEntryFactory,
    ClusterFactory,
    FlagFactory,
    GpuFactory,
    GpuHourFactory,
    JobFactory,
    JobGpuHourEnergyFactory,
    JobGpuHourFactory,
    JobGroupFactory,
    SiteFactory,
    TeamDayFactory,
    TeamFactory,
    WeeklyReportFactory,
)

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)
PERIOD = {"start": "2026-11-01", "end": "2026-12-01"}
SMALL, MORE = 2, 4  # 2 units of rows, then 4 more: three times as many


@dataclass
class World:
    admin: Any
    team: Any
    cluster: Any
    group: Any
    days: int = 0

    def day(self) -> int:
        """A new day of the period for each unit, so each unit is a new period of a rollup."""
        self.days += 1
        return self.days


def _jobs(w: World, n: int) -> None:
    for _ in range(n):
        job = JobFactory(cluster=w.cluster, job_group=w.group, flags=["memory_hog"])
        FlagFactory(cluster=w.cluster, job=job)


def _flags(w: World, n: int) -> None:
    for _ in range(n):
        FlagFactory(cluster=w.cluster)  # on a job of a team of its own
        gpu = GpuFactory(node__cluster=w.cluster)
        FlagFactory(kind="conservation", cluster=w.cluster, job=None, gpu=gpu, hour=T0)


def _gpus(w: World, n: int) -> None:
    for _ in range(n):
        gpu = GpuFactory(node__cluster=w.cluster)
        GpuHourFactory(gpu=gpu, hour=T0)
        GpuHourFactory(gpu=gpu, hour=T0 + timedelta(hours=1), idle_energy_j=1e5, jobs_energy_j=1.7e6)


def _teams(w: World, n: int) -> None:
    TeamFactory.create_batch(n)


def _clusters(w: World, n: int) -> None:
    for _ in range(n):
        ClusterFactory(site=SiteFactory())


def _job_groups(w: World, n: int) -> None:
    JobGroupFactory.create_batch(n)


def _reports(w: World, n: int) -> None:
    for _ in range(n):
        WeeklyReportFactory()  # a team's
        WeeklyReportFactory(team=None)  # the fleet summary


def _audit_log(w: World, n: int) -> None:
    AuditEntryFactory.create_batch(n, actor=w.admin, job__cluster=w.cluster)


def _team_days(w: World, n: int) -> None:
    for _ in range(n):
        TeamDayFactory(team=w.team, cluster=w.cluster, day=T0.date() + w.day() * DAY)


def _other_teams_days(w: World, n: int) -> None:
    for _ in range(n):
        TeamDayFactory(team=TeamFactory(), cluster=w.cluster, day=T0.date() + w.day() * DAY)


def _job_hours(w: World, n: int, **job: Any) -> None:
    for _ in range(n):
        hour = T0 + w.day() * DAY
        days = {"job__first_day": hour.date(), "job__last_day": hour.date()}  # as its summary records them
        row = JobGpuHourFactory(job__cluster=w.cluster, hour=hour, **days, **{f"job__{k}": v for k, v in job.items()})
        JobGpuHourEnergyFactory(job=row.job, gpu=row.gpu, hour=hour)
        GpuHourFactory(gpu=row.gpu, hour=hour)
        day_sums_refresh(cluster_ids=[row.gpu.node.cluster_id], days=[hour.date()])  # as the derivation does


def _group_hours(w: World, n: int) -> None:
    _job_hours(w, n, job_group=w.group)


def _results(body: bytes) -> int:
    return len(json.loads(body)["results"])


def _listed(body: bytes) -> int:
    return len(json.loads(body))


def _periods(body: bytes) -> int:
    return len(json.loads(body)["periods"])


def _csv_rows(body: bytes) -> int:
    return len(list(csv.DictReader(io.StringIO(body.decode()))))


@dataclass(frozen=True)
class Endpoint:
    path: str  # with {team}, {cluster}, {group} filled in from the world
    seed: Callable[[World, int], None]  # adds n units of rows
    rows: Callable[[bytes], int]  # rows the response shows
    per_unit: int  # rows a unit adds to the response
    queries: int | None  # pinned; None: measured on the small data set (see N_PLUS_ONE)
    query: dict[str, str] = field(default_factory=dict)


# Every list pages by a cursor (no COUNT: 3 queries, as jobs); a rollup (and compare) reads its jobs' costs once
# more, for `cost` (the sum of the jobs' rounded costs; docs/api.md, "Money").
ENDPOINTS = {
    "jobs": Endpoint("/api/jobs/", _jobs, _results, 1, queries=3),
    "jobs-csv-streamed": Endpoint("/api/jobs/", _jobs, _csv_rows, 1, queries=3, query={"format": "csv"}),
    "flags": Endpoint("/api/flags/", _flags, _results, 2, queries=3),
    "gpus": Endpoint("/api/gpus/", _gpus, _results, 1, queries=3),
    "teams": Endpoint("/api/teams/", _teams, _results, 1, queries=3),
    "clusters": Endpoint("/api/clusters/", _clusters, _results, 1, queries=3),
    "job-groups": Endpoint("/api/job-groups/", _job_groups, _results, 1, queries=3),
    "reports": Endpoint("/api/reports/", _reports, _results, 2, queries=3),
    "audit-log": Endpoint("/api/audit-log/", _audit_log, _results, 1, queries=3),
    # The sums in minor units ask whether their range has days past retention (one query) before reading. A team's
    # rollup also reads its counted findings for its waste (and, where it has some, their rows: one query more).
    "team-rollup": Endpoint("/api/teams/{team}/rollup/", _team_days, _periods, 1, queries=8, query=PERIOD),
    "teams-compare": Endpoint("/api/teams/compare/", _other_teams_days, _listed, 1, queries=7, query=PERIOD),
    "teams-daily-energy": Endpoint("/api/teams/daily-energy/", _other_teams_days, _listed, 1, queries=3, query=PERIOD),
    "cluster-rollup": Endpoint("/api/clusters/{cluster}/rollup/", _job_hours, _periods, 1, queries=9, query=PERIOD),
    "job-group-rollup": Endpoint("/api/job-groups/{group}/rollup/", _group_hours, _periods, 1, queries=9, query=PERIOD),
}
N_PLUS_ONE: dict[str, str] = {}  # endpoints with a known query per row, marked xfail until mended


@pytest.fixture
def world() -> World:
    site = SiteFactory()
    return World(admin=AdminFactory(), team=TeamFactory(), cluster=ClusterFactory(site=site), group=JobGroupFactory())


def _fetch(client: Client, endpoint: Endpoint, w: World) -> tuple[int, bytes]:
    """The response, read to its end (a streamed one too), so every query it makes is counted."""
    cache.clear()  # rollups are kept in Redis: measure their computation
    path = endpoint.path.format(team=w.team.pk, cluster=w.cluster.pk, group=w.group.pk)
    response = client.get(path, endpoint.query)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, body


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=N_PLUS_ONE[name]))
        if name in N_PLUS_ONE
        else name
        for name in ENDPOINTS
    ],
)
def test_list_query_count_does_not_grow_with_rows(
    name: str, world: World, client: Client, django_assert_num_queries
) -> None:
    endpoint = ENDPOINTS[name]
    client.force_login(world.admin)
    # given: a small data set
    endpoint.seed(world, SMALL)
    with CaptureQueriesContext(connection) as measured:
        status, small = _fetch(client, endpoint, world)
    assert status == 200, small[:500]
    if endpoint.queries is not None:
        assert len(measured) == endpoint.queries, [q["sql"] for q in measured.captured_queries]
    # when: three times as many rows
    endpoint.seed(world, MORE)
    with django_assert_num_queries(len(measured)):
        status, large = _fetch(client, endpoint, world)
    # then: the same queries, and the new rows are in the answer
    assert status == 200
    assert endpoint.rows(large) - endpoint.rows(small) == MORE * endpoint.per_unit
