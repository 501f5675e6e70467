"""Weekly reports through a real SMTP server: once per team and week, MIME parts that parse, the API's
numbers, links that open the right pages, nothing twice (a second run, a crash after sending), nothing
to an unsubscribed recipient."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.utils.html import escape
from rest_framework.test import APIClient

from apps.pipeline.inputs import footprints_recompute
from apps.reports import services
from apps.reports.models import WeeklyReport
from apps.reports.tasks import send_weekly_reports_task
from apps.waste.advice import finding_advice
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, job_run

from .conftest import DUE, WEEK, Sink, World

pytestmark = pytest.mark.django_db
KEY = f"vision/{WEEK.isoformat()}"


def _money(value: Decimal | str) -> str:
    return f"{Decimal(str(value)).quantize(Decimal('0.01'), rounding=ROUND_HALF_EVEN):,}"


def _api_week(world: World, start: str, end: str) -> dict:
    """The team's numbers for the week from /api/teams/{id}/rollup/, as the member sees them."""
    client = APIClient()
    client.force_authenticate(world.member)
    response = client.get(
        f"/api/teams/{world.fleet.team.pk}/rollup/", {"start": start, "end": end, "granularity": "week"}
    )
    assert response.status_code == 200
    periods = response.json()["periods"]
    return {
        # the API's `cost`: the sum of the jobs' rounded costs, which the report shows to the cent
        "cost": sum((Decimal(p["cost"]) for p in periods), Decimal(0)),
        "energy_kwh": sum(p["energy_j"] for p in periods) / 3.6e6,
        "co2e_kg": sum(p["operational_kg"] + p["embodied_kg"] for p in periods),
        "gpu_hours": sum(p["gpu_hours"] for p in periods),
        "currency": response.json()["currency"],
    }


def _parts(received) -> tuple[str, str]:
    message = received.message
    assert message.get_content_type() == "multipart/alternative"
    types = [part.get_content_type() for part in message.iter_parts()]
    assert types == ["text/plain", "text/html"]
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    return text, html


def _links(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', html)


@pytest.mark.parametrize(
    ("tz", "due", "window"),
    [
        ("UTC", DUE, ("2026-11-02T00:00:00Z", "2026-11-09T00:00:00Z")),
        # 07:30 in Berlin (UTC+1 in November): the week is Berlin's Monday to Monday.
        ("Europe/Berlin", "2026-11-09T06:30:00+00:00", ("2026-11-01T23:00:00Z", "2026-11-08T23:00:00Z")),
    ],
)
def test_report_arrives_once_per_recipient_with_the_api_numbers(world: World, smtp: Sink, tz, due, window) -> None:
    # given a team with two active recipients and one who unsubscribed, its site in `tz`
    world.fleet.cluster.site.timezone = tz
    world.fleet.cluster.site.save()
    # when the hourly task runs after Monday 07:00 local
    send_weekly_reports_task(now_iso=due)
    # then each active recipient gets one message, and nobody else gets the team's report
    received = smtp.for_report(KEY)
    assert sorted(r.rcpt_tos[0] for r in received) == ["ada@example.org", "lin@example.org"]
    assert all(len(r.rcpt_tos) == 1 for r in received)
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "sent" and report.send_count == 1 and report.time_zone == tz
    assert sorted(report.delivered) == ["ada@example.org", "lin@example.org"]
    # its numbers are the API's for that team and week, in both parts
    api = _api_week(world, *window)
    assert api["cost"] > 0 and api["energy_kwh"] > 0 and api["co2e_kg"] > 0
    text, html = _parts(received[0])
    cur = api["currency"]
    for label, value in (
        ("Cost", f"{_money(api['cost'])} {cur}"),
        ("GPU energy", f"{api['energy_kwh']:,.2f} kWh (GPU)"),
        ("CO2e", f"{api['co2e_kg']:,.2f} kg"),
        ("GPU-hours", f"{api['gpu_hours']:,.1f} h"),
    ):
        assert re.search(rf"^{label}:\s+{re.escape(value)} \|", text, re.M), (label, value, text)
    assert f'data-metric="cost">{_money(api["cost"])} {cur}<' in html
    assert f'data-metric="energy_kwh">{api["energy_kwh"]:,.2f} kWh<' in html
    assert f'data-metric="co2e_kg">{api["co2e_kg"]:,.2f} kg<' in html
    # and the same numbers are archived and served by /api/reports/{id}/
    client = APIClient()
    client.force_authenticate(world.member)
    detail = client.get(f"/api/reports/{report.pk}/").json()
    assert Decimal(detail["data"]["week"]["cost"]) == api["cost"]
    assert detail["data"]["week"]["energy_kwh"] == pytest.approx(api["energy_kwh"], rel=1e-12)


def test_waste_lines_use_the_findings_units_and_the_worst_jobs_link_to_their_pages(world: World, smtp: Sink) -> None:
    send_weekly_reports_task(now_iso=DUE)
    text, html = _parts(smtp.for_report(KEY)[0])
    hog = Flag.objects.get(kind="memory_hog", job=world.jobs["hog"])
    idle = Flag.objects.get(kind="idle_allocation", job=world.jobs["idle"])
    # the hog's whole life lies in the week: its line is its finding's evidence
    hog_line = next(line for line in text.splitlines() if line.startswith("- Memory hogs"))
    assert f"1 job, {hog.evidence['gpu_hours_blocked']:,.1f} h," in hog_line
    e = hog.evidence
    assert f"{e['energy_kwh']:,.2f} kWh (GPU), {e['co2e_kg']:,.2f} kg, {_money(e['cost'])} EUR" in hog_line
    idle_line = next(line for line in text.splitlines() if line.startswith("- Idle allocations"))
    assert f"{idle.evidence['gpu_hours_blocked']:,.1f} h" in idle_line and _money(idle.evidence["cost"]) in idle_line
    assert "- Low-coverage jobs (energy partly measured: mean coverage 80 %): 1 job, 4.0 h" in text
    # no scheduler record says any of the week's jobs failed: the failed-runs line counts none
    assert "- Failed runs (failed, timed out, out of memory, node failure): 0 jobs, 0.0 h" in text
    waste_cost = Decimal(hog.evidence["cost"]) + Decimal(idle.evidence["cost"])
    assert f"Waste total: {hog.evidence['gpu_hours_blocked'] + idle.evidence['gpu_hours_blocked']:,.1f} h" in text
    assert f'data-metric="waste_cost">{_money(waste_cost)} EUR<' in html
    # the five worst jobs: only the wasteful ones, worst first, each with an absolute link to its page
    base = "https://fleetwatt.example.org"
    idle_url, hog_url = f"{base}/jobs/{world.jobs['idle'].pk}/", f"{base}/jobs/{world.jobs['hog'].pk}/"
    assert idle.evidence["cost"] > hog.evidence["cost"]
    job_links = [link for link in _links(html) if "/jobs/" in link]
    assert job_links == [idle_url, hog_url]
    assert text.index(idle_url) < text.index(hog_url)
    # each with what to do about its finding, in its own figures (apps.waste.advice), in both parts
    for flag in (idle, hog):
        line = finding_advice(flag.kind, flag.evidence, currency="EUR")
        assert f"What to do: {line}" in text and f"What to do: {escape(line)}" in html
    assert text.index("ask for fewer GPUs") < text.index(hog_url) < text.index("end the notebook or server")
    # the chart is HTML and CSS, no script and no image
    assert 'data-section="chart"' in html and "<script" not in html and "<img" not in html
    assert "location-based, zone TEST, source test" in text


def test_links_open_the_right_pages(world: World, smtp: Sink) -> None:
    send_weekly_reports_task(now_iso=DUE)
    by_rcpt = {r.rcpt_tos[0]: r for r in smtp.for_report(KEY)}
    text, html = _parts(by_rcpt["ada@example.org"])
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    links = _links(html)
    member = Client()
    member.force_login(world.member)
    # the report in the browser, for a member of the team
    report_link = next(link for link in links if "/reports/" in link and "unsubscribe" not in link)
    assert urlsplit(report_link).path == f"/reports/{report.pk}/"
    page = member.get(urlsplit(report_link).path)
    assert page.status_code == 200 and _money(report.data["week"]["cost"]).encode() in page.content
    # the job pages
    for link in (link for link in links if "/jobs/" in link):
        path = urlsplit(link).path
        assert re.fullmatch(r"/jobs/\d+/", path)
        page = member.get(path)
        assert page.status_code == 200 and str(path.split("/")[2]) in {str(world.jobs[k].pk) for k in ("idle", "hog")}
    # the team's dashboard
    team_link = next(link for link in links if "/teams/" in link)
    assert member.get(urlsplit(team_link).path).status_code == 200
    # the unsubscribe link is this recipient's: GET asks, POST unsubscribes
    unsubscribe = next(link for link in links if "/unsubscribe/" in link)
    assert world.recipients["ada"].token in unsubscribe and world.recipients["lin"].token not in html
    assert str(by_rcpt["ada@example.org"].message["List-Unsubscribe"]).strip() == f"<{unsubscribe}>"
    anonymous = Client(enforce_csrf_checks=True)
    confirm = anonymous.get(urlsplit(unsubscribe).path)
    assert confirm.status_code == 200 and b"Unsubscribe?" in confirm.content
    world.recipients["ada"].refresh_from_db()
    assert world.recipients["ada"].active  # a GET (a link scanner) unsubscribes nobody
    # RFC 8058 one-click: the mail client POSTs without a form token
    done = anonymous.post(urlsplit(unsubscribe).path, {"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200 and b"Unsubscribed" in done.content
    world.recipients["ada"].refresh_from_db()
    assert not world.recipients["ada"].active and world.recipients["ada"].unsubscribed_at is not None
    assert text.count(unsubscribe) == 1


def test_a_second_run_sends_nothing(world: World, smtp: Sink) -> None:
    send_weekly_reports_task(now_iso=DUE)
    first = len(smtp.received)
    assert len(smtp.for_report(KEY)) == 2 and len(smtp.for_report(f"fleet/{WEEK}")) == 1
    # when the task runs again an hour later (and a worker redelivers it)
    send_weekly_reports_task(now_iso=(WEEK + timedelta(days=7)).isoformat() + "T08:30:00+00:00")
    send_weekly_reports_task(now_iso=DUE)
    # then nothing more is sent
    assert len(smtp.received) == first
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "sent" and report.send_count == 1


def test_before_the_send_time_the_week_is_not_sent(world: World, smtp: Sink) -> None:
    send_weekly_reports_task(now_iso=(WEEK + timedelta(days=7)).isoformat() + "T06:59:00+00:00")
    assert not smtp.for_report(KEY)
    assert not WeeklyReport.objects.filter(week_start=WEEK).exists()


def test_a_crash_after_sending_and_before_recording_does_not_send_twice(world: World, smtp: Sink, monkeypatch) -> None:
    # given a worker that dies after the relay took the messages and before it records them as sent
    def die(**kwargs: object) -> None:
        raise RuntimeError("worker killed")

    monkeypatch.setattr(services, "_report_mark_sent", die)
    send_weekly_reports_task(now_iso=DUE)
    assert len(smtp.for_report(KEY)) == 2  # they went out
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "sending" and report.claimed_at is not None and report.sent_at is None
    # when the task runs again (the next hour, a redelivery), with a healthy worker
    monkeypatch.undo()
    send_weekly_reports_task(now_iso=DUE)
    send_weekly_reports_task(now_iso=(WEEK + timedelta(days=7)).isoformat() + "T09:30:00+00:00")
    # then nothing is sent again, and the report waits for an admin, visibly
    assert len(smtp.for_report(KEY)) == 2
    report.refresh_from_db()
    assert report.status == "sending"
    admin = Client()
    admin.force_login(world.admin)
    archive = admin.get("/reports/")
    assert b'id="in-doubt"' in archive.content and b'data-status="sending"' in archive.content
    api = APIClient()
    api.force_authenticate(world.admin)
    assert [r["id"] for r in api.get("/api/reports/", {"status": "sending"}).json()["results"]] == [
        r.pk for r in WeeklyReport.objects.filter(status="sending").order_by("-week_start", "team__name", "id")
    ]
    # the admin finds its Message-ID in the relay's log and marks it sent
    sent_ids = {str(r.message["Message-ID"]) for r in smtp.for_report(KEY)}
    stem = report.message_id.strip("<>").split("@")[0]
    assert all(mid.startswith(f"<{stem}.") for mid in sent_ids)
    assert admin.post(f"/reports/{report.pk}/resolve/").status_code == 302
    report.refresh_from_db()
    assert report.status == "sent" and len(smtp.for_report(KEY)) == 2


def test_an_unsubscribed_recipient_gets_nothing(world: World, smtp: Sink) -> None:
    # given ada unsubscribed through her link after the first report
    send_weekly_reports_task(now_iso=DUE)
    Client().post(f"/reports/unsubscribe/{world.recipients['ada'].token}/")
    # when the next week's report goes out
    next_key = f"vision/{WEEK + timedelta(days=7)}"
    send_weekly_reports_task(now_iso=(WEEK + timedelta(days=14)).isoformat() + "T07:30:00+00:00")
    # then only lin gets it; gone@ (unsubscribed from the start) never got anything
    assert [r.rcpt_tos for r in smtp.for_report(next_key)] == [["lin@example.org"]]
    assert not [r for r in smtp.received if "gone@example.org" in r.rcpt_tos]
    assert WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK + timedelta(days=7)).recipients == [
        "lin@example.org"
    ]


def test_relay_down_fails_without_claiming_and_the_next_run_sends(world: World, smtp: Sink, settings) -> None:
    port = settings.EMAIL_PORT
    settings.EMAIL_PORT = 9  # nothing listens there
    send_weekly_reports_task(now_iso=DUE)
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "failed" and "could not be reached" in report.error
    settings.EMAIL_PORT = port
    send_weekly_reports_task(now_iso=DUE)
    report.refresh_from_db()
    assert report.status == "sent" and len(smtp.for_report(KEY)) == 2


def test_a_refused_address_does_not_stop_the_others(world: World, smtp: Sink) -> None:
    smtp.refuse = {"ada@example.org"}
    send_weekly_reports_task(now_iso=DUE)
    assert [r.rcpt_tos for r in smtp.for_report(KEY)] == [["lin@example.org"]]
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "sent" and report.delivered == ["lin@example.org"] and "ada@example.org" in report.error


def test_fleet_summary_goes_to_the_admins(world: World, smtp: Sink) -> None:
    send_weekly_reports_task(now_iso=DUE)
    (summary,) = smtp.for_report(f"fleet/{WEEK}")
    assert summary.rcpt_tos == ["boss@example.org"]
    text, html = _parts(summary)
    api = _api_week(world, "2026-11-02T00:00:00Z", "2026-11-09T00:00:00Z")
    assert f"- vision: {api['gpu_hours']:,.1f} h, {api['energy_kwh']:,.2f} kWh" in text
    assert f"{_money(api['cost'])} EUR" in text


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_send_once(world: World, smtp: Sink) -> None:
    # given two workers that take the same week's report at the same moment (committed data, own connections)
    from django.db import connection

    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def run() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(services.report_send(team=world.fleet.team, week_start=WEEK).outcome)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # then one sends and the other finds it claimed
    assert sorted(outcomes) in (["in_doubt", "sent"], ["already_sent", "sent"])
    assert sorted(r.rcpt_tos[0] for r in smtp.for_report(KEY)) == ["ada@example.org", "lin@example.org"]
    assert WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK).send_count == 1


def test_a_week_on_two_intensity_bases_is_not_sent(world: World, smtp: Sink) -> None:
    # given the team also ran on a market-based site that week: a report never mixes bases
    other = fleet_build(name="c2", servers=1, basis="market")
    job_run(other, key="slurm/elsewhere", gpus=other.gpus[:1], hours=2, power_w=300, start=T0 + 5 * HOUR)
    footprints_recompute()  # as every ingest does
    send_weekly_reports_task(now_iso=DUE)
    assert not smtp.for_report(KEY)
    report = WeeklyReport.objects.get(team=world.fleet.team, week_start=WEEK)
    assert report.status == "failed" and "intensity bases" in report.error
