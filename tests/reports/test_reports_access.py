"""Who sees which report, in the browser and through /api/reports/; who previews, sends and keeps
recipients; the command."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.reports.models import ReportRecipient, WeeklyReport
from apps.reports.schedule import next_send, zone
from apps.reports.tasks import send_weekly_reports_task

from .conftest import DUE, WEEK, Sink, World

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(world: World, smtp: Sink) -> World:
    send_weekly_reports_task(now_iso=DUE)
    assert WeeklyReport.objects.filter(status="sent").count() == 3  # vision, nlp, the fleet summary
    return world


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_non_member_cannot_see_another_teams_report(sent: World) -> None:
    vision = WeeklyReport.objects.get(team=sent.fleet.team, week_start=WEEK)
    nlp = WeeklyReport.objects.get(team=sent.other_team, week_start=WEEK)
    fleet = WeeklyReport.objects.get(team__isnull=True, week_start=WEEK)
    assert _client(sent.member).get(f"/reports/{vision.pk}/").status_code == 200
    assert _client(sent.outsider).get(f"/reports/{vision.pk}/").status_code == 404
    assert _client(sent.outsider).get(f"/reports/{nlp.pk}/").status_code == 200
    assert _client(sent.member).get(f"/reports/{fleet.pk}/").status_code == 404
    assert _client(sent.admin).get(f"/reports/{fleet.pk}/").status_code == 200
    assert Client().get(f"/reports/{vision.pk}/").status_code == 302  # to the login page
    archive = _client(sent.outsider).get("/reports/").content.decode()
    assert f"/reports/{nlp.pk}/" in archive and f"/reports/{vision.pk}/" not in archive


def test_api_reports_scoping(sent: World) -> None:
    vision = WeeklyReport.objects.get(team=sent.fleet.team, week_start=WEEK)
    nlp = WeeklyReport.objects.get(team=sent.other_team, week_start=WEEK)
    assert APIClient().get("/api/reports/").status_code in (401, 403)
    mine = _api(sent.member).get("/api/reports/").json()["results"]
    assert [r["id"] for r in mine] == [vision.pk] and mine[0]["team"] == "vision" and mine[0]["status"] == "sent"
    assert "html" not in mine[0] and mine[0]["recipient_count"] == 2
    assert _api(sent.member).get(f"/api/reports/{nlp.pk}/").status_code == 404
    assert [r["id"] for r in _api(sent.outsider).get("/api/reports/").json()["results"]] == [nlp.pk]
    everything = _api(sent.admin).get("/api/reports/").json()["results"]
    assert {r["team"] for r in everything} == {"vision", "nlp", None}
    assert [r["id"] for r in _api(sent.admin).get("/api/reports/", {"team": "nlp"}).json()["results"]] == [nlp.pk]
    assert len(_api(sent.admin).get("/api/reports/", {"fleet": "true"}).json()["results"]) == 1
    detail = _api(sent.member).get(f"/api/reports/{vision.pk}/").json()
    assert detail["text"] == vision.text and detail["data"]["team_name"] == "vision"
    csv = _api(sent.admin).get("/api/reports/", {"format": "csv"})
    assert csv.status_code == 200 and b"week_start" in csv.content


def test_a_team_previews_its_report_and_admins_send_it(world: World, smtp: Sink) -> None:
    team = world.fleet.team
    query = {"team": team.pk, "week": WEEK.isoformat()}
    member_page = _client(world.member).get("/reports/preview/", query)
    assert member_page.status_code == 200 and b"Plain-text part" in member_page.content
    assert b"Send now" not in member_page.content and b"fleet summary" not in member_page.content
    assert _client(world.outsider).get("/reports/preview/", query).status_code == 404  # not their team
    page = _client(world.admin).get("/reports/preview/", query)
    assert page.status_code == 200 and b"Plain-text part" in page.content
    assert not smtp.received and not WeeklyReport.objects.exists()  # a preview sends and claims nothing
    assert _client(world.member).post("/reports/send/", query).status_code == 403
    assert _client(world.admin).post("/reports/send/", query).status_code == 302
    assert len(smtp.received) == 2
    _client(world.admin).post("/reports/send/", query)  # already sent: nothing
    assert len(smtp.received) == 2
    _client(world.admin).post("/reports/send/", {**query, "again": "1"})  # the admin's explicit resend
    assert len(smtp.received) == 4
    assert WeeklyReport.objects.get(team=team, week_start=WEEK).send_count == 2
    assert _client(world.admin).get("/reports/preview/", {"week": WEEK.isoformat()}).status_code == 200  # fleet


def test_leads_and_admins_keep_recipients(world: World) -> None:
    url = f"/reports/teams/{world.fleet.team.pk}/recipients/"
    assert _client(world.member).get(url).status_code == 403
    assert _client(world.outsider).get(url).status_code == 404
    lead = _client(world.lead)
    assert lead.get(url).status_code == 200
    lead.post(url, {"action": "add", "email": "New@Example.org"})
    assert ReportRecipient.objects.get(team=world.fleet.team, email="new@example.org").active
    lead.post(url, {"action": "add", "email": "gone@example.org"})  # subscribes it again
    assert ReportRecipient.objects.get(email="gone@example.org").active
    lead.post(url, {"action": "add", "email": "not an address"})
    assert not ReportRecipient.objects.filter(email="not an address").exists()
    lead.post(url, {"action": "remove", "recipient": world.recipients["ada"].pk})
    assert not ReportRecipient.objects.filter(pk=world.recipients["ada"].pk).exists()


def test_command_dry_run_sends_nothing_and_week_must_be_a_monday(world: World, smtp: Sink) -> None:
    out = StringIO()
    call_command("send_weekly_reports", "--week", WEEK.isoformat(), "--team", "vision", "--dry-run", stdout=out)
    assert "Subject: fleetwatt weekly report: vision" in out.getvalue() and "Cost:" in out.getvalue()
    assert not smtp.received and not WeeklyReport.objects.exists()
    with pytest.raises(CommandError, match="Monday"):
        call_command("send_weekly_reports", "--week", "2026-11-03")
    with pytest.raises(CommandError, match="No team"):
        call_command("send_weekly_reports", "--team", "nobody")
    out = StringIO()
    call_command("send_weekly_reports", "--week", WEEK.isoformat(), "--team", "vision", stdout=out)
    assert "vision week of 2026-11-02: sent (2 delivered)" in out.getvalue()
    assert len(smtp.received) == 2  # --team: no fleet summary


def test_api_reports_list_query_count_does_not_grow_with_reports(sent: World, django_assert_max_num_queries) -> None:
    client = _api(sent.admin)
    with django_assert_max_num_queries(2):  # the count and the page (teams joined), whatever the number of reports
        assert len(client.get("/api/reports/").json()["results"]) == 3


def test_the_preview_says_when_the_next_report_goes_out_and_to_whom(world: World, settings) -> None:
    # given a team with two recipients, its lead and one of its members
    settings.FLEETWATT_REPORT_WEEKDAY, settings.FLEETWATT_REPORT_HOUR = 0, 7
    for client, sees_addresses in ((_client(world.lead), True), (_client(world.member), False)):
        # when they preview the team's report (the team chosen for them: their only one)
        page = client.get("/reports/preview/")
        html = page.content.decode()
        # then the page says when the next one goes out, for which week, and to whom
        assert page.status_code == 200 and page.context["team"] == world.fleet.team
        next_at, next_week = page.context["next_at"], page.context["next_week"]
        assert next_at > timezone.now() and next_at - timezone.now() <= timedelta(days=7)
        assert (next_at.weekday(), next_at.hour) == (0, 7) and next_week == (next_at - timedelta(days=7)).date()
        assert f"{next_at:%A} {next_at.day} {next_at:%b %Y}, 07:00" in html
        addresses = {r.email for r in ReportRecipient.objects.filter(team=world.fleet.team, active=True)}
        assert len(addresses) == 2
        assert all((a in html) == sees_addresses for a in addresses)
        assert sees_addresses or "It goes to 2 recipients, chosen by the team's leads." in html


def test_the_next_send_is_the_first_local_send_time_after_now() -> None:
    berlin = zone("Europe/Berlin")
    tuesday = datetime(2026, 12, 1, 9, 0, tzinfo=berlin)
    assert next_send(now=tuesday, tz=berlin) == (datetime(2026, 12, 7, 7, 0, tzinfo=berlin), date(2026, 11, 30))
    just_before = datetime(2026, 12, 7, 6, 59, tzinfo=berlin)
    assert next_send(now=just_before, tz=berlin)[0] == datetime(2026, 12, 7, 7, 0, tzinfo=berlin)
    just_after = datetime(2026, 12, 7, 7, 1, tzinfo=berlin)
    assert next_send(now=just_after, tz=berlin) == (datetime(2026, 12, 14, 7, 0, tzinfo=berlin), date(2026, 12, 7))
    # a send time on Wednesday, 18:00
    assert next_send(now=tuesday, tz=berlin, weekday=2, hour=18)[0] == datetime(2026, 12, 2, 18, 0, tzinfo=berlin)
