"""The fleet page's "Teams compared" has its numbers in a table, with a totals row whose cost is the bill: the sum
of the teams' billed costs, as the API's compare and each team's rollup give them; and links to the month's FOCUS
file."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.api.world import world_build

pytestmark = pytest.mark.django_db

PERIOD = {"start": "2026-11-02", "end": "2026-11-04"}


def _cells(html: str, row_id: str) -> list[str]:
    row = re.search(rf'<tr id="{row_id}">(.*?)</tr>', html, re.S)
    assert row, row_id
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(1), re.S)]


def test_the_totals_row_is_the_bill_of_every_team() -> None:
    w = world_build()
    for role in ("admin", "finance"):
        page = Client()
        page.force_login(w.users[role])
        html = page.get("/", PERIOD).content.decode()
        api = APIClient()
        api.force_authenticate(w.users[role])
        compared = api.get("/api/teams/compare/", PERIOD).json()
        bill = sum(Decimal(t["cost"]) for t in compared)
        rollups = sum(
            Decimal(api.get(f"/api/teams/{team.pk}/rollup/", PERIOD).json()["totals"]["cost"])
            for team in (w.team_a, w.team_b)
        )
        total = _cells(html, "teams-compared-total")
        assert total[0] == "Total (the bill)"
        assert Decimal(total[4].replace(",", "")) == bill == rollups > 0
        assert len(re.findall(r'<tr data-team="', html)) == len(compared) == 2
        assert 'href="/api/focus/?month=2026-11&amp;format=csv"' in html


def test_a_member_gets_no_fleet_table() -> None:
    w = world_build()
    page = Client()
    page.force_login(w.users["member"])
    assert 'id="teams-compared"' not in page.get("/", PERIOD).content.decode()
