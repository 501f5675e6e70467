"""A report document to its email: subject, HTML and plain-text parts, headers (templates in
frontend/templates/reports/email/)."""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

from .formatting import money
from .selectors import absolute


@dataclass(frozen=True)
class Rendered:
    subject: str
    html: str
    text: str


def mail_domain() -> str:
    """The domain of the sender's address, for Message-IDs."""
    return parseaddr(settings.DEFAULT_FROM_EMAIL)[1].rpartition("@")[2] or "fleetwatt.localhost"


def team_subject(doc: dict[str, Any]) -> str:
    cur = doc["currency"]
    return (
        f"fleetwatt weekly report: {doc['team_label']}, {doc['week_label']}: "
        f"{money(doc['week']['cost'])} {cur}, waste {money(doc['waste_total']['cost'])} {cur}"
    ).replace("  ", " ")


def team_report_render(doc: dict[str, Any], *, report_url: str, unsubscribe_url: str = "") -> Rendered:
    """The team's email. Without `unsubscribe_url`: the archived copy (no recipient's link in it)."""
    subject = team_subject(doc)
    context = {
        "report": doc,
        "subject": subject,
        "base_url": settings.FLEETWATT_BASE_URL.rstrip("/"),
        "report_url": report_url,
        "team_url": absolute(reverse("dashboard:team", args=[doc["team_id"]])),
        "unsubscribe_url": unsubscribe_url,
    }
    return Rendered(
        subject=subject,
        html=render_to_string("reports/email/team.html", context),
        text=render_to_string("reports/email/team.txt", context),
    )


def fleet_summary_render(doc: dict[str, Any], *, report_url: str) -> Rendered:
    total = doc["total"]
    tail = f": {money(total['cost'])} {doc['currency']}" if total else ""
    subject = f"fleetwatt fleet summary, {doc['week_label']}{tail}"
    context = {
        "report": doc,
        "subject": subject,
        "base_url": settings.FLEETWATT_BASE_URL.rstrip("/"),
        "report_url": report_url,
        "archive_url": absolute(reverse("reports:archive")),
    }
    return Rendered(
        subject=subject,
        html=render_to_string("reports/email/fleet.html", context),
        text=render_to_string("reports/email/fleet.txt", context),
    )


def message_build(
    rendered: Rendered, *, to: str, message_id: str, report_key: str, unsubscribe_url: str = ""
) -> EmailMultiAlternatives:
    """multipart/alternative: text/plain first, text/html second (clients show the last they can)."""
    headers = {
        "Message-ID": message_id,
        "Auto-Submitted": "auto-generated",  # RFC 3834: no auto-replies
        "X-Fleetwatt-Report": report_key,
    }
    if unsubscribe_url:
        # RFC 8058 one-click unsubscribe: the client POSTs to the link; the token is the authority.
        headers["List-Unsubscribe"] = f"<{unsubscribe_url}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message = EmailMultiAlternatives(
        subject=rendered.subject, body=rendered.text, from_email=settings.DEFAULT_FROM_EMAIL, to=[to], headers=headers
    )
    message.attach_alternative(rendered.html, "text/html")
    return message
