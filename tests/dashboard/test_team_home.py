"""The team lead's home (issue 35, item 2): on the team page, the waste by finding kind (every kind, adding up to the
waste counted) and the period by user and by job group (adding up to the bill in the headline, to the cent); the
period's every job on a page of its own, filtered and paged, and as CSV with its figures inside the period (the jobs
on the bill adding up to the bill); a bad parameter a 400 page, another team's jobs a 404."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from apps.waste.kinds import WASTE_KINDS
from apps.waste.selectors import period_waste, team_counted_flags

from .team_home_world import PERIOD, PERIOD_END, PERIOD_START, SMALL_JOBS, TeamHomeWorld, team_home_world_build

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[TeamHomeWorld]:
    """One world for the module, rolled back after it."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield team_home_world_build()
        transaction.set_rollback(True)


def _client(world: TeamHomeWorld) -> Client:
    client = Client()
    client.force_login(world.lead)
    return client


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def _money(cell: str) -> Decimal:
    return Decimal(_text(cell).split()[0].replace(",", ""))


def _cells(html: str, table_id: str, cell_class: str) -> list[str]:
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert table, table_id
    return re.findall(rf'<td class="num {cell_class}">(.*?)</td>', table.group(1), re.S)


@pytest.fixture(scope="module")
def team_page(world: TeamHomeWorld, django_db_blocker: Any) -> str:
    with django_db_blocker.unblock():
        answer = _client(world).get(f"/teams/{world.vision.pk}/", PERIOD)
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_waste_by_kind_lists_every_kind_the_most_money_first_adding_up_to_the_waste_counted(
    world: TeamHomeWorld, team_page: str
) -> None:
    # given the team page of a period where one job was idle and then failed: two kinds on the same GPU-hours
    rows = re.findall(r'<tr data-kind="([a-z_]+)"><td class="num kind-cost">(.*?)</td>\s*<td>(.*?)</td>', team_page)
    # then every waste kind is listed once, a kind with no finding at zero
    assert sorted(kind for kind, _, _ in rows) == sorted(WASTE_KINDS)
    lines = {kind: (_money(cost), _text(words)) for kind, cost, words in rows}
    assert lines["memory_hog"] == (Decimal("0.00"), "0 memory hogs")
    assert lines["idle_allocation"][1] == "1 idle allocation" and lines["failed_run"][1] == "1 failed run"
    # the most money first
    costs = [_money(cost) for _, cost, _ in rows]
    assert costs == sorted(costs, reverse=True) and costs[0] > 0
    # and the kinds add up to the waste counted, each GPU-hour once (under the idle allocation, the first kind)
    counted = re.search(r'id="waste-counted-cost">([^<]*)<', team_page)
    assert counted and sum(costs) == Decimal(counted.group(1).replace(",", ""))
    assert lines["failed_run"][0] == 0  # its GPU-hours are all the idle allocation's too


def test_the_kinds_split_of_period_waste_adds_up_to_its_total(world: TeamHomeWorld) -> None:
    found = period_waste(flags=team_counted_flags(team=world.vision, start=PERIOD_START, end=PERIOD_END),
                         start=PERIOD_START, end=PERIOD_END)  # fmt: skip
    once = list(found.per_kind_once.values())
    assert sum((f.cost for f in once), Decimal(0)) == found.total.cost > 0
    assert sum(f.gpu_hours for f in once) == pytest.approx(found.total.gpu_hours)
    # each kind on its own still counts its own findings' hours: their sum counts the shared hours twice
    assert sum((f.cost for f in found.per_kind.values()), Decimal(0)) > found.total.cost


@pytest.mark.parametrize("table_id", ["by-user", "by-group"])
def test_the_breakdowns_add_up_to_the_bill_in_the_headline_to_the_cent(team_page: str, table_id: str) -> None:
    # given the headline's bill
    headline = re.search(r'id="total-cost">([^<]*)<', team_page)
    assert headline
    bill = _money(headline.group(1))
    # when the lines of a breakdown are added up
    cells = _cells(team_page, table_id, "line-cost")
    lines = [_money(c) for c in cells]
    # then they are the bill to the cent, money sorted, and the table's total row says so
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', team_page, re.S)
    assert table
    total = re.search(r'<tfoot>.*?<td class="num line-cost">(.*?)</td>', table.group(1), re.S)
    assert total and _money(total.group(1)) == bill > 0
    body = lines[: len(lines) - 1]  # (the last cell is the total row's)
    assert sum(body, Decimal(0)) == bill
    assert body == sorted(body, reverse=True)


def test_the_breakdowns_name_users_and_groups_plainly(team_page: str) -> None:
    by_user = re.search(r'<table id="by-user">(.*?)</table>', team_page, re.S)
    by_group = re.search(r'<table id="by-group">(.*?)</table>', team_page, re.S)
    assert by_user and by_group
    users = _text(by_user.group(1))
    assert "erin" in users and "ada" in users and "No user known" in users
    assert "carol" not in users  # her one job is off the bill
    groups = _text(by_group.group(1))
    assert "sweeps" in groups and "In no job group" in groups
    assert "&amp;group=none" in by_group.group(1) and "&amp;user=erin" in by_user.group(1)


def test_the_job_list_pages_fifty_the_costliest_first_and_filters_by_user_state_and_group(
    world: TeamHomeWorld,
) -> None:
    client = _client(world)
    url = f"/teams/{world.vision.pk}/jobs/"
    # every job of the period: erin's small ones and six others (nlp's is another team's)
    first = client.get(url, PERIOD).content.decode()
    keys = re.findall(r'<tr data-job-key="([^"]+)"', first)
    assert len(keys) == 50 and "Page 1 of 2" in first
    assert keys[0] == "slurm/1"  # the costliest in the period
    second = re.findall(r'<tr data-job-key="([^"]+)"', client.get(url, {**PERIOD, "page": "2"}).content.decode())
    assert len(second) == SMALL_JOBS + 6 - 50 and not set(keys) & set(second)
    assert "slurm/7" not in keys + second
    # filtered
    ada = re.findall(r'data-job-key="([^"]+)"', client.get(url, {**PERIOD, "user": "ada"}).content.decode())
    assert ada == ["slurm/1", "slurm/2"]
    failed = client.get(url, {**PERIOD, "state": "failed"}).content.decode()
    assert re.findall(r'data-job-key="([^"]+)"', failed) == ["slurm/1", "slurm/6"]
    assert "excluded from the bill" in failed
    grouped = client.get(url, {**PERIOD, "group": str(world.group.pk), "user": "bob"}).content.decode()
    assert re.findall(r'data-job-key="([^"]+)"', grouped) == ["slurm/4"]
    alone = client.get(url, {**PERIOD, "group": "none", "user": "bob"}).content.decode()
    assert re.findall(r'data-job-key="([^"]+)"', alone) == ["slurm/3"]


def _export(world: TeamHomeWorld, **query: str) -> list[dict[str, str]]:
    answer = _client(world).get(f"/teams/{world.vision.pk}/jobs.csv", {**PERIOD, **query})
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))


def test_the_export_has_each_jobs_part_inside_the_period_and_the_jobs_on_the_bill_add_up_to_the_bill(
    world: TeamHomeWorld, team_page: str
) -> None:
    rows = _export(world)
    jobs, total = rows[:-1], rows[-1]
    assert len(jobs) == SMALL_JOBS + 6 and total["job_key"] == "total"
    headline = re.search(r'id="total-cost">([^<]*)<', team_page)
    assert headline
    billed = sum((Decimal(r["period_cost"]) for r in jobs if r["on_bill"] == "true"), Decimal(0))
    assert billed == Decimal(total["period_cost"]) == _money(headline.group(1))
    # a job that started the day before counts only its hours inside the period (24 of its 30, on 2 GPUs)
    before = next(r for r in jobs if r["job_key"] == "slurm/1")
    assert float(before["period_gpu_hours"]) == pytest.approx(48.0)
    assert world.jobs["slurm/1"].gpu_hours == pytest.approx(60.0)
    assert before["period_start"] == "2026-11-02" and before["period_end"] == "2026-11-04"
    assert before["currency"] == "EUR" and before["job_group"] == "sweeps"
    # no float noise: every quantity has at most 6 decimal places
    for r in jobs:
        for column in ("period_gpu_hours", "period_energy_kwh", "period_facility_kwh", "period_co2e_kg"):
            assert len(r[column].partition(".")[2]) <= 6, (column, r[column])
    # filtered, and without the total row
    bob = _export(world, user="bob", totals="false")
    assert [r["job_key"] for r in bob] == ["slurm/4", "slurm/3"]  # the costliest in the period first


@pytest.mark.parametrize(
    "query",
    [
        {"state": "exploded"},
        {"page": "0"},
        {"page": "3"},
        {"page": "\u0661"},  # an Arabic-Indic one
        {"group": "sweeps"},
        {"user": "a\x00b"},
        {"start": "2026-11-04", "end": "2026-11-02"},
        {"totals": "maybe"},
    ],
)
def test_a_bad_parameter_is_the_sites_400_page(world: TeamHomeWorld, query: dict[str, str]) -> None:
    client = _client(world)
    for path in ("jobs/", "jobs.csv"):
        if "totals" in query and path == "jobs/":
            continue
        if "page" in query and path == "jobs.csv":
            continue
        answer = client.get(f"/teams/{world.vision.pk}/{path}", {**PERIOD, **query})
        assert answer.status_code == 400, (path, query)
        assert "Bad request" in answer.content.decode()


def test_another_teams_member_finds_no_such_team(world: TeamHomeWorld) -> None:
    client = Client()
    client.force_login(world.stranger)
    for path in ("", "jobs/", "jobs.csv"):
        assert client.get(f"/teams/{world.vision.pk}/{path}", PERIOD).status_code == 404
    assert Client().get(f"/teams/{world.vision.pk}/jobs/", PERIOD).status_code == 302  # to the login
