"""The audit: each action changes what it should, writes exactly one log row, needs a reason, is for
admins only; the log cannot be changed, even by a raw statement."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.utils import DatabaseError
from rest_framework.test import APIClient

from apps.carbon.models import JobGroup
from apps.core.web.pagination import AuditCursorPagination
from apps.fleet.models import Team, TeamMembership
from apps.pipeline.inputs import footprints_recompute
from apps.rollups.selectors import cluster_rollup, team_rollup
from apps.waste import audit
from apps.waste.api.views import AuditLogViewSet
from apps.waste.models import AuditEntry, Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db
PERIOD = {"start": T0, "end": T0 + 24 * HOUR, "granularity": "day"}


@pytest.fixture
def setup():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    keep = job_run(fleet, key="slurm/keep", gpus=fleet.gpus[:2], hours=10, power_w=600)
    odd = job_run(fleet, key="slurm/odd", gpus=fleet.gpus[2:3], hours=7, power_w=90)
    footprints_recompute()
    flag = Flag.objects.create(kind="memory_hog", cluster=fleet.cluster, job=odd, evidence={"gpu_hours_blocked": 7})
    admin = User.objects.create_user("boss", is_staff=True)
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return fleet, keep, odd, flag, admin, member


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _team_cost(team: Team) -> Decimal:
    return sum((p["cost"] for p in team_rollup(team=team, **PERIOD)["periods"]), Decimal(0))


def test_acknowledge_and_dispute_write_one_row_each(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    response = _client(admin).post(f"/api/flags/{flag.pk}/acknowledge/", {"reason": "debugging session"})
    assert response.status_code == 201
    flag.refresh_from_db()
    assert flag.status == "acknowledged"
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.job_id, entry.reason) == (
        admin,
        "acknowledge",
        odd.pk,
        "debugging session",
    )
    assert entry.before == {"status": "open"} and entry.after == {"status": "acknowledged"}
    assert _client(admin).post(f"/api/flags/{flag.pk}/dispute/", {"reason": "split looks wrong"}).status_code == 201
    assert AuditEntry.objects.count() == 2


def test_exclude_leaves_the_team_bill_but_not_the_fleet_totals(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    team_before = _team_cost(fleet.team)
    cluster_before = cluster_rollup(cluster=fleet.cluster, **PERIOD)["periods"][0]["cost"]
    response = _client(admin).post(f"/api/jobs/{odd.pk}/exclude/", {"reason": "test run", "flag": flag.pk})
    assert response.status_code == 201
    odd.refresh_from_db()
    assert _team_cost(fleet.team) == team_before - odd.cost  # to the cent
    assert cluster_rollup(cluster=fleet.cluster, **PERIOD)["periods"][0]["cost"] == cluster_before
    entry = AuditEntry.objects.get()
    assert entry.before["excluded_from_bill"] is False and entry.after["excluded_from_bill"] is True
    assert entry.flag_id == flag.pk


def test_reassign_moves_the_job_to_the_cent_and_later_ingests_keep_it(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    nlp = Team.objects.create(name="nlp")
    vision_before = _team_cost(fleet.team)
    response = _client(admin).post(f"/api/jobs/{odd.pk}/reassign/", {"reason": "nlp's notebook", "team": "nlp"})
    assert response.status_code == 201
    odd.refresh_from_db()
    assert odd.team == nlp and odd.team_locked
    assert _team_cost(fleet.team) == vision_before - odd.cost
    assert _team_cost(nlp) == odd.cost
    assert AuditEntry.objects.get().after["team"] == "nlp"
    group = JobGroup.objects.create(name="notebooks", match_kind="user", match_value="nobody")
    assert (
        _client(admin).post(f"/api/jobs/{odd.pk}/reassign/", {"reason": "x", "job_group": group.name}).status_code
        == 201
    )
    assert AuditEntry.objects.count() == 2


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/flags/{flag}/acknowledge/", {}),
        ("/api/flags/{flag}/dispute/", {"reason": "  "}),
        ("/api/jobs/{job}/exclude/", {"reason": ""}),
        ("/api/jobs/{job}/reassign/", {"team": "vision"}),
    ],
)
def test_every_action_refuses_without_a_reason(setup, url: str, body: dict) -> None:
    fleet, keep, odd, flag, admin, member = setup
    response = _client(admin).post(url.format(flag=flag.pk, job=odd.pk), body)
    assert response.status_code == 400
    assert not AuditEntry.objects.exists()
    odd.refresh_from_db()
    assert not odd.excluded_from_bill and Flag.objects.get(pk=flag.pk).status == "open"


def test_non_admins_are_refused(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    client = _client(member)
    assert client.get("/api/flags/").status_code == 200  # members see their team's findings
    assert client.post(f"/api/flags/{flag.pk}/acknowledge/", {"reason": "mine"}).status_code == 403
    assert client.post(f"/api/jobs/{odd.pk}/exclude/", {"reason": "mine"}).status_code == 403
    assert client.get("/api/audit-log/").status_code == 403
    assert not AuditEntry.objects.exists()


def test_the_log_cannot_be_changed_even_by_raw_sql(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    _client(admin).post(f"/api/flags/{flag.pk}/acknowledge/", {"reason": "fine"})
    for statement in ("UPDATE waste_auditentry SET reason = 'nothing'", "DELETE FROM waste_auditentry"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert AuditEntry.objects.get().reason == "fine"


def test_audit_log_api_and_csv(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    _client(admin).post(f"/api/jobs/{odd.pk}/exclude/", {"reason": "a test, not work"})
    rows = _client(admin).get("/api/audit-log/").json()["results"]
    assert [(r["action"], r["job_key"], r["actor"]) for r in rows] == [("exclude", "slurm/odd", "boss")]
    csv_text = _client(admin).get("/api/audit-log/", {"format": "csv"}).content.decode()
    assert "a test, not work" in csv_text and csv_text.splitlines()[0].startswith("id,at,actor,action")


def test_a_page_of_the_log_reads_its_rows_by_the_newest_first_index(setup) -> None:
    """Not the whole log joined to its jobs and sorted (42 ms at 5,000 entries, growing with the log)."""
    fleet, keep, odd, flag, admin, member = setup
    _client(admin).post(f"/api/jobs/{odd.pk}/exclude/", {"reason": "a test, not work"})
    page = AuditLogViewSet.queryset.order_by(*AuditCursorPagination.ordering)[:21]  # the view's, as it pages
    sql, params = page.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a test's few rows: a scan would win on cost
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "audit_newest_first" in plan and "Sort" not in plan, plan


def test_a_rule_s_decisions_are_each_logged_as_one_decision_once(setup) -> None:
    fleet, keep, odd, flag, admin, member = setup
    other = Flag.objects.create(kind="failed_run", cluster=fleet.cluster, job=keep, evidence={"gpu_hours_blocked": 20})
    decided = Flag.objects.create(kind="failed_run", cluster=fleet.cluster, job=odd, status="acknowledged")
    # a member may not, and a rule needs a reason as any decision
    with pytest.raises(PermissionError):
        audit.flags_review(actor=member, flag_ids=[flag.pk, other.pk], action="acknowledge", reason="mine")
    with pytest.raises(audit.AuditError, match="reason"):
        audit.flags_review(actor=admin, flag_ids=[flag.pk, other.pk], action="acknowledge", reason=" ")
    with pytest.raises(audit.AuditError, match="Unknown review"):
        audit.flags_review(actor=admin, flag_ids=[flag.pk, other.pk], action="exclude", reason="x")
    assert not AuditEntry.objects.exists()
    # when an admin acknowledges three findings, one of them decided already
    entries = audit.flags_review(actor=admin, flag_ids=[flag.pk, other.pk, decided.pk], action="acknowledge",
                                 reason="a sweep's known failures")  # fmt: skip
    # then the two open ones are, each with its line as flag_review writes one; the decided one is left as it was
    single = audit.flag_review(actor=admin, flag=decided, action="dispute", reason="for the shape")
    assert [e.flag_id for e in entries] == sorted([flag.pk, other.pk])
    for entry in entries:
        assert (entry.actor, entry.action, entry.reason, entry.before, entry.after, entry.gpu_id, entry.hour) == (
            admin, "acknowledge", "a sweep's known failures", {"status": "open"}, {"status": "acknowledged"},
            single.gpu_id, single.hour,
        )  # fmt: skip
        assert entry.job_id == Flag.objects.get(pk=entry.flag_id).job_id and entry.flag_kind
    statuses = Flag.objects.filter(pk__in=[flag.pk, other.pk, decided.pk]).order_by("pk").values_list("status")
    assert [s for (s,) in statuses] == ["acknowledged", "acknowledged", "disputed"]
    # and the same decision again decides nothing
    assert audit.flags_review(actor=admin, flag_ids=[flag.pk, other.pk], action="acknowledge", reason="again") == []
    assert AuditEntry.objects.count() == 3
