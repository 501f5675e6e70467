"""The audit queue's triage: the open findings and the money at stake per kind, the list by money at stake in pages,
a decision by a rule (previewed, then each finding logged as one decision, once), who decided what, when and why, and
queries that do not grow with the findings. One world for the module (rolled back after it); each test in its own
savepoint."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.fleet.models import Cluster, Gpu
from apps.jobs.models import Job, JobGpuHour
from apps.waste.kinds import FlagKind
from apps.waste.models import AuditEntry, Flag
from tests.factories import T0 as HOUR_T0
from tests.factories import (
    AdminFactory,
    ClusterFactory,
    GpuFactory,
    JobFactory,
    JobGpuHourFactory,
    TeamFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
PERIOD = {"start": "2026-11-02", "end": "2026-11-03"}
RULE = {"action": "acknowledge", "kind": "failed_run", "under": "1", "currency": "EUR", **PERIOD,
        "reason": "a known scheduler bug"}  # fmt: skip


@dataclass
class World:
    cluster: Cluster
    gpu: Gpu
    admin: User
    member: User
    flags: dict[str, Flag]
    decided: AuditEntry  # the decision on flags["failed_acknowledged"]


def _finding(kind: str, cluster: Cluster, gpu: Gpu, cost: str | None, *, hour=HOUR_T0, status="open", **job) -> Flag:
    """A finding on a job of one GPU-hour costing `cost` (no row: None)."""
    job = JobFactory(cluster=cluster, **job)
    if cost is not None:
        JobGpuHourFactory(job=job, gpu=gpu, hour=hour, cost=Decimal(cost))
    return Flag.objects.create(kind=kind, cluster=cluster, job=job, status=status,
                               evidence={"state": "failed", "gpu_hours_blocked": 1.0, "cost": cost or "0"})  # fmt: skip


def _build() -> World:
    cluster = ClusterFactory()
    gpu = GpuFactory(node__cluster=cluster)
    team = TeamFactory(name="vision")
    admin = AdminFactory(username="boss")
    member = UserFactory(username="ada")
    f = {}
    for name, cost in (("failed_040", "0.40"), ("failed_090", "0.90"), ("failed_0996", "0.996"),
                       ("failed_500", "5.00"), ("failed_1200", "12.00")):  # fmt: skip
        f[name] = _finding(FlagKind.FAILED_RUN, cluster, gpu, cost, team=team)
    f["failed_excluded"] = _finding(FlagKind.FAILED_RUN, cluster, gpu, "0.10", team=team, excluded_from_bill=True)
    f["failed_long_ago"] = _finding(FlagKind.FAILED_RUN, cluster, gpu, "0.20", team=team, hour=HOUR_T0 - timedelta(30))
    f["failed_acknowledged"] = _finding(FlagKind.FAILED_RUN, cluster, gpu, "0.30", team=team, status="acknowledged")
    f["hog"] = _finding(FlagKind.MEMORY_HOG, cluster, gpu, "8.00", team=team)
    f["idle_disputed"] = _finding(FlagKind.IDLE_ALLOCATION, cluster, gpu, "3.00", team=team, status="disputed")
    f["coverage"] = _finding(FlagKind.LOW_COVERAGE, cluster, gpu, "2.00", team=team)
    f["reset"] = Flag.objects.create(kind=FlagKind.COUNTER_RESET, cluster=cluster, gpu=gpu, hour=HOUR_T0,
                                     evidence={"counter_resets": 1})  # fmt: skip
    decided = AuditEntry.objects.create(
        actor=admin, action="acknowledge", job=f["failed_acknowledged"].job, flag_id=f["failed_acknowledged"].pk,
        flag_kind=FlagKind.FAILED_RUN, reason="a known bug", before={"status": "open"},
        after={"status": "acknowledged"},
    )  # fmt: skip
    return World(cluster, gpu, admin, member, f, decided)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> Iterator[World]:
    with django_db_blocker.unblock(), transaction.atomic():
        try:
            yield _build()
        finally:
            transaction.set_rollback(True)


def _client(user: User, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def _text(html: str) -> str:
    return unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


def _table(html: str, table_id: str) -> str:
    at = html.index(f'id="{table_id}"')
    return html[at : html.index("</table>", at)]


def _listed(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-flag="(\d+)" data-kind', _table(html, "audit-queue"))]


def test_the_summary_counts_open_findings_and_money_at_stake_per_kind(world: World) -> None:
    # when an admin opens the queue on the day the findings' hours are in
    html = _client(world.admin).get("/audit/", PERIOD).content.decode()
    # then each kind is a line in plain words, the money at stake first: open and disputed findings of jobs on the
    # bill, their cost in the period (the excluded job's, and the one with nothing in the period, are worth nothing)
    summary = _table(html, "audit-summary")
    rows = {kind: _text(row) for kind, row in re.findall(r'<tr data-kind="(\w+)">(.*?)</tr>', summary, re.S)}
    assert list(rows) == ["failed_run", "memory_hog", "idle_allocation", "counter_reset", "low_coverage"]
    assert rows["failed_run"] == "Failed Run — the scheduler's word 7 0 19.30 EUR"  # 0.40 + 0.90 + 0.996 + 5 + 12
    assert rows["memory_hog"].endswith(" 1 0 8.00 EUR")
    assert rows["idle_allocation"].endswith(" 0 1 3.00 EUR")
    assert rows["counter_reset"].endswith(" 1 0 none (not waste)")
    assert "_" not in _text(summary)
    # and the total counts each GPU-hour once, as the team page and the weekly report do
    assert _text(summary[summary.index("<tfoot>") :]) == "All kinds 10 1 30.30 EUR"


def test_the_list_is_by_money_at_stake_and_in_pages(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    f = world.flags
    client = _client(world.admin)
    # the largest money at stake first; then the findings with none at stake (the excluded job's, the one outside
    # the period, a GPU-hour's, a measurement's), oldest first
    by_money = [f[k].pk for k in ("failed_1200", "hog", "failed_500", "failed_0996", "failed_090", "failed_040",
                                  "failed_excluded", "failed_long_ago", "coverage", "reset")]  # fmt: skip
    html = client.get("/audit/", PERIOD).content.decode()
    assert _listed(html) == by_money
    row = _text(html[html.index(f'data-flag="{f["failed_1200"].pk}"') :])
    assert "12.00 EUR" in row
    assert _listed(client.get("/audit/", {**PERIOD, "order": "oldest"}).content.decode()) == sorted(by_money)
    # in pages, whose links keep the filters
    monkeypatch.setattr("apps.dashboard.audit_views.PAGE_SIZE", 4)
    second = client.get("/audit/", {**PERIOD, "page": "2"}).content.decode()
    assert _listed(second) == by_money[4:8]
    assert "Findings 5 to 8 of 10" in _text(second) and "page 2 of 3" in _text(second)
    assert 'href="?start=2026-11-02&amp;end=2026-11-03&amp;page=3"' in second
    failed = client.get("/audit/", {**PERIOD, "kind": "failed_run"}).content.decode()
    assert _listed(failed) == by_money[:1] + by_money[2:5]


@pytest.mark.parametrize(
    ("query", "named"),
    [({"page": "0"}, "page"), ({"page": "4"}, "page"), ({"page": "x"}, "page"), ({"page": "1.5"}, "page"),
     ({"order": "cost"}, "order")],
)  # fmt: skip
def test_a_page_or_order_the_queue_does_not_have_is_the_styled_400(world, monkeypatch, query, named) -> None:
    monkeypatch.setattr("apps.dashboard.audit_views.PAGE_SIZE", 4)
    answer = _client(world.admin).get("/audit/", {**PERIOD, **query})
    assert answer.status_code == 400
    assert "<h1>Bad request</h1>" in answer.content.decode() and f"{named}: " in _text(answer.content.decode())


def test_a_decided_row_says_who_when_and_why(world: World) -> None:
    entry = world.decided
    said = f"acknowledged by boss on {entry.at:%Y-%m-%d %H:%M} UTC: “a known bug”"
    html = _client(world.admin).get("/audit/", {**PERIOD, "status": "acknowledged"}).content.decode()
    row = html[html.index(f'data-flag="{world.flags["failed_acknowledged"].pk}"') :]
    assert said in _text(row[: row.index("</tr>")])
    recent = _text(_table(html, "recently-decided"))
    assert f"{entry.at:%Y-%m-%d %H:%M} UTC boss acknowledged (Failed Run) {entry.job.job_key} a known bug" in recent


def _preview(client: Client, **changes: str) -> tuple[int, str, str]:
    """The rule's preview: its count and the selection its confirmation carries."""
    answer = client.post("/audit/bulk/", {**RULE, **changes})
    html = answer.content.decode()
    count = int(re.search(r'id="rule-count">The rule takes <strong>(\d+)</strong>', html)[1])
    selection = re.search(r'name="selection" value="(\w+)"', html)
    return count, selection[1] if selection else "", html


def test_a_rule_is_previewed_then_each_finding_decided_and_logged_once(world: World) -> None:
    f = world.flags
    client = _client(world.admin)
    logged = AuditEntry.objects.count()
    # given the preview of "acknowledge every failed run under 1 EUR that day": the open ones of jobs on the bill
    # with something at stake that day (0.996 EUR reads 1.00: not under 1)
    count, selection, html = _preview(client)
    assert count == 2 and AuditEntry.objects.count() == logged  # nothing written yet
    assert "Failed Run findings under 1.00 EUR each" in _text(html) and "1.30 EUR at stake in all" in _text(html)
    # when the admin confirms it
    answer = client.post("/audit/bulk/", {**RULE, "confirm": "yes", "selection": selection}, follow=True)
    # then each finding is acknowledged and logged as one decision, as a decision on one finding is
    taken = {f["failed_040"].pk, f["failed_090"].pk}
    assert set(Flag.objects.filter(status="acknowledged", kind="failed_run").values_list("pk", flat=True)) == {
        *taken,
        f["failed_acknowledged"].pk,
    }
    new = AuditEntry.objects.filter(flag_id__in=taken)
    assert sorted((e.flag_id, e.job_id, e.actor_id, e.action, e.flag_kind, e.reason, e.before, e.after)
                  for e in new) == sorted(
        (pk, Flag.objects.get(pk=pk).job_id, world.admin.pk, "acknowledge", "failed_run", "a known scheduler bug",
         {"status": "open"}, {"status": "acknowledged"}) for pk in taken
    )  # fmt: skip
    assert "2 findings acknowledged" in _text(answer.content.decode())
    # and the same rule sent again decides nothing new
    again = client.post("/audit/bulk/", {**RULE, "confirm": "yes", "selection": selection}, follow=True)
    assert AuditEntry.objects.count() == logged + 2
    assert "nothing was decided" in _text(again.content.decode())


def test_a_rule_whose_findings_changed_since_the_preview_decides_nothing(world: World) -> None:
    client = _client(world.admin)
    count, selection, _ = _preview(client, under="6")
    assert count == 4  # 0.40, 0.90, 0.996, 5.00
    client.post(f"/audit/{world.flags['failed_500'].pk}/act/", {"action": "dispute", "reason": "looks wrong"})
    logged = AuditEntry.objects.count()
    answer = client.post("/audit/bulk/", {**RULE, "under": "6", "confirm": "yes", "selection": selection})
    assert answer.status_code == 409 and "changed since the preview (3 now)" in _text(answer.content.decode())
    assert AuditEntry.objects.count() == logged and Flag.objects.filter(status="acknowledged").count() == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"kind": "low_coverage"}, "kind"),  # no money at stake: not a rule's
        ({"under": "-1"}, "under"),
        ({"under": "one"}, "under"),
        ({"under": ""}, "under"),
        ({"under": "1e3"}, "under"),
        ({"currency": "eur"}, "currency"),
        ({"reason": "  "}, "reason"),
        ({"action": "exclude"}, "action"),
        ({"end": "2026-11-01"}, "start"),
    ],
)
def test_a_rule_the_page_cannot_read_is_refused_and_writes_nothing(world, change: dict, named: str) -> None:
    logged = AuditEntry.objects.count()
    for confirm in ({}, {"confirm": "yes", "selection": "x"}):
        answer = _client(world.admin).post("/audit/bulk/", {**RULE, **change, **confirm})
        assert answer.status_code == 400, change
        assert "<h1>Bad request</h1>" in answer.content.decode() and f"{named}: " in _text(answer.content.decode())
    assert AuditEntry.objects.count() == logged and Flag.objects.filter(status="acknowledged").count() == 1


def test_a_rule_is_for_admins_by_post_with_the_csrf_token(world: World) -> None:
    confirm = {**RULE, "confirm": "yes", "selection": _preview(_client(world.admin))[1]}
    assert _client(world.member).post("/audit/bulk/", confirm).status_code == 403
    assert _client(world.admin).get("/audit/bulk/", confirm).status_code == 405
    assert _client(world.admin, enforce_csrf_checks=True).post("/audit/bulk/", confirm).status_code == 403
    assert Flag.objects.filter(status="acknowledged").count() == 1


def _more_findings(world: World, n: int) -> None:
    """`n` more open failed runs, each on a job of its own with a row in the period, half of them decided on."""
    jobs = Job.objects.bulk_create(
        [Job(cluster=world.cluster, job_key=f"slurm/more-{i}", team=world.flags["hog"].job.team, start=HOUR_T0,
             currency="EUR") for i in range(n)]
    )  # fmt: skip
    JobGpuHour.objects.bulk_create(
        [JobGpuHour(job=j, gpu=world.gpu, hour=HOUR_T0, source="agent", cost=Decimal("0.5") + i) for i, j in
         enumerate(jobs)]
    )  # fmt: skip
    flags = Flag.objects.bulk_create([Flag(kind=FlagKind.FAILED_RUN, cluster=world.cluster, job=j) for j in jobs])
    AuditEntry.objects.bulk_create(
        [AuditEntry(actor=world.admin, action="exclude", job=fl.job, flag_id=fl.pk, flag_kind=fl.kind, reason="x")
         for fl in flags[::2]]
    )  # fmt: skip


def test_the_page_s_queries_do_not_grow_with_the_findings(world: World) -> None:
    client = _client(world.admin)
    client.get("/audit/", PERIOD)  # the session and the caches warm
    with CaptureQueriesContext(connection) as few:
        assert client.get("/audit/", PERIOD).status_code == 200
    _more_findings(world, 120)  # a full page of rows, each with a job, a team and a decision, and two pages more
    with CaptureQueriesContext(connection) as many:
        html = client.get("/audit/", {**PERIOD, "page": "2"}).content.decode()
    assert len(_listed(html)) == 50
    # (the first page's one more: the jobs that ran in its GPU-hour finding's hour; the queue's order is three: the
    # findings at stake, how many findings, the page's ids)
    assert len(many.captured_queries) <= len(few.captured_queries) <= 14, [q["sql"][:90] for q in few.captured_queries]
