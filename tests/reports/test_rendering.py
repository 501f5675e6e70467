"""A report document to its email (apps/reports/rendering.py): the subject with the week's money and its waste, the
HTML and text parts, the recipient's unsubscribe link only in their copy, the headers of an automatic message. The
whole email over SMTP: tests/reports/test_weekly_email.py."""

from __future__ import annotations

from typing import Any

import pytest

from apps.reports.rendering import (
    Rendered,
    fleet_summary_render,
    mail_domain,
    message_build,
    team_report_render,
    team_subject,
)
from apps.reports.selectors import fleet_summary_build, report_build, report_document
from tests.carbon.fleet_builder import fleet_build

from .conftest import WEEK

pytestmark = pytest.mark.django_db

UNSUBSCRIBE = "https://fleetwatt.example.org/reports/unsubscribe/abc/"


@pytest.fixture
def doc(settings: Any) -> dict[str, Any]:
    settings.FLEETWATT_BASE_URL = "https://fleetwatt.example.org/"
    team = fleet_build(servers=1, gpus_per_server=1).team
    return report_document(report_build(team=team, week_start=WEEK))


def test_the_subject_says_the_team_the_week_its_money_and_its_waste() -> None:
    doc = {"currency": "EUR", "team_label": "Vision", "week_label": "2 – 8 Nov 2026",
           "week": {"cost": "1234.567"}, "waste_total": {"cost": "0.125"}}  # fmt: skip
    assert team_subject(doc) == "fleetwatt weekly report: Vision, 2 – 8 Nov 2026: 1,234.57 EUR, waste 0.12 EUR"
    # no currency (a week with no priced job): no double space
    assert "  " not in team_subject({**doc, "currency": ""})


def test_a_recipients_copy_has_their_unsubscribe_link_and_the_archived_one_none(doc: dict[str, Any]) -> None:
    mine = team_report_render(doc, report_url="https://fleetwatt.example.org/reports/1/", unsubscribe_url=UNSUBSCRIBE)
    archived = team_report_render(doc, report_url="https://fleetwatt.example.org/reports/1/")
    assert UNSUBSCRIBE in mine.html and UNSUBSCRIBE in mine.text
    assert "unsubscribe" not in archived.html.lower() and "unsubscribe" not in archived.text.lower()
    assert mine.subject == archived.subject == team_subject(doc)
    # the links are absolute, with no doubled slash after the base URL
    assert f"https://fleetwatt.example.org/teams/{doc['team_id']}/" in mine.html
    assert "example.org//" not in mine.html + mine.text


def test_the_fleet_summarys_subject_has_a_total_only_where_there_is_one(doc: dict[str, Any]) -> None:
    summary = report_document(fleet_summary_build(week_start=WEEK))
    with_total = fleet_summary_render(summary, report_url="https://x/r/")
    assert with_total.subject.startswith("fleetwatt fleet summary, ") and with_total.subject.endswith(": 0.00 ")
    without = fleet_summary_render({**summary, "total": None}, report_url="https://x/r/")
    assert without.subject == f"fleetwatt fleet summary, {summary['week_label']}"
    assert "https://fleetwatt.example.org/reports/" in without.html  # the archive's link


def test_the_message_is_text_then_html_with_the_headers_of_an_automatic_mail() -> None:
    rendered = Rendered(subject="s", html="<p>h</p>", text="t")
    message = message_build(
        rendered,
        to="ada@example.org",
        message_id="<m.1@example.org>",
        report_key="vision/w",
        unsubscribe_url=UNSUBSCRIBE,
    )
    assert (message.body, message.alternatives[0][1]) == ("t", "text/html")
    assert message.to == ["ada@example.org"]
    assert message.extra_headers["Auto-Submitted"] == "auto-generated"
    assert message.extra_headers["List-Unsubscribe"] == f"<{UNSUBSCRIBE}>"
    assert message.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    plain = message_build(rendered, to="boss@example.org", message_id="<m.2@example.org>", report_key="fleet/x")
    assert "List-Unsubscribe" not in plain.extra_headers and plain.extra_headers["X-Fleetwatt-Report"] == "fleet/x"


@pytest.mark.parametrize(
    ("sender", "domain"),
    [
        ("fleetwatt <reports@gpu.example.org>", "gpu.example.org"),
        ("reports@example.com", "example.com"),
        ("", "fleetwatt.localhost"),  # no sender: a domain of its own
    ],
)
def test_the_message_ids_domain_is_the_senders(settings: Any, sender: str, domain: str) -> None:
    settings.DEFAULT_FROM_EMAIL = sender
    assert mail_domain() == domain
