"""hypothesis over every page's query parameters and forms (issue: no input breaks it): the pages are not in the
API's schema, so each is asked with arbitrary values for every parameter it reads (and one it does not), a path's
free part (a scheduler's job id, an unsubscribe token) too, and each form posted with arbitrary fields, as the roles
that reach it, with DEBUG on as the demo runs: never a 5xx, never a traceback. Values: the odd ones that broke a
page before, any text over Unicode with NUL bytes and control characters, days, times and numbers of any size.
Counted per page (tests/fuzz/conftest.py); about 420 cases, some 10 to 15 s on two cores."""

from __future__ import annotations

import zlib
from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from apps.pipeline import decisions
from tests.api.world import World, world_build

from .conftest import assert_no_server_error
from .values import ODD_STRINGS, ODD_VALUES, TEXT

pytestmark = pytest.mark.django_db

PERIOD = ("start", "end")
# path (team A's or B's objects: {team}, {gpu}, {job}, {report}, {flag}, {free}: a free path part), the parameters
# it reads, and the roles that reach it: admin ("a"), member ("m"), finance ("f"), anonymous ("x").
PAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "/": (PERIOD, "am"),
    "/teams/{team}/": (PERIOD, "am"),
    "/gpus/{gpu}/": (PERIOD, "af"),
    "/jobs/{job}/": ((), "am"),
    "/jobs/": (("q", "mine"), "am"),
    "/jobs/slurm/{free}/": ((), "am"),
    "/groups/": (PERIOD, "am"),
    "/status/": ((), "a"),
    "/audit/": (("kind", "status", "team", "cluster", "older_than_days", "order", "page", *PERIOD), "a"),
    "/tokens/": ((), "f"),
    "/reports/": (("team", "fleet", "status", "week_start", "since"), "am"),
    "/reports/{report}/": ((), "a"),
    "/reports/preview/": (("team", "week"), "a"),
    "/reports/teams/{team}/recipients/": ((), "a"),
    "/reports/unsubscribe/{free}/": ((), "x"),
    "/accounts/login/": (("next",), "x"),
}
FORMS: dict[str, tuple[tuple[str, ...], str]] = {
    "/tokens/": (("name", "days"), "f"),
    "/tokens/{token}/revoke/": ((), "f"),
    "/audit/bulk/": (("action", "kind", "under", "currency", "reason", "confirm", "selection", *PERIOD), "a"),
    "/audit/{flag}/act/": (("action", "reason", "next"), "a"),
    "/audit/jobs/{job}/act/": (("action", "reason", "team", "job_group", "flag", "next"), "a"),
    "/reports/teams/{team}/recipients/": (("action", "email", "recipient"), "a"),
    "/reports/send/": (("team", "week", "again"), "a"),
    "/reports/{report}/resolve/": ((), "a"),
    "/reports/unsubscribe/{free}/": ((), "x"),
    "/accounts/login/": (("username", "password", "next"), "x"),
}
EXAMPLES = {"a": 16, "m": 8, "f": 10, "x": 10}  # per page or form, by role
FORM_ACTIONS = st.sampled_from(["acknowledge", "dispute", "exclude", "include", "reassign_team", "reassign_group",
                                "add", "remove", "bogus"])  # fmt: skip


def _clients(world: World) -> dict[str, Client]:
    clients = {"x": Client(raise_request_exception=False)}
    for code, role in {"a": "admin", "m": "member", "f": "finance"}.items():
        clients[code] = Client(raise_request_exception=False)
        clients[code].force_login(world.users[role])
    return clients


def _url(path: str, world: World, free: str) -> str:
    return path.format(
        team=world.team_b.pk, gpu=world.gpu_b.pk, job=world.job_b.pk, report=world.report_b.pk,
        flag=world.flag_b.pk, token=world.finance_token.pk, free=quote(free, safe=""),
    )  # fmt: skip


def _check(client: Client, method: str, path: str, world: World, params: tuple[str, ...], examples: int, role: str):
    endpoint = f"{method} {path}"
    fields = {p: ODD_VALUES for p in params} | {"x": ODD_VALUES}  # and one the page does not read
    if method == "POST" and "action" in params:
        fields["action"] = st.one_of(FORM_ACTIONS, ODD_VALUES)

    @seed(zlib.crc32(f"{endpoint} {role}".encode()))
    @given(values=st.fixed_dictionaries({}, optional=fields), free=st.one_of(st.sampled_from(ODD_STRINGS), TEXT))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def ask(values: dict[str, str], free: str) -> None:
        url = _url(path, world, free or "x")
        response = client.get(url, values) if method == "GET" else client.post(url, values)
        assert_no_server_error(endpoint, response.status_code, response.content, (url, values))

    ask()


def test_every_page_and_form_answers_arbitrary_input_without_a_server_error(settings_debug) -> None:
    # given a fleet with a row in every list, and the roles
    world = world_build()
    decisions.flag_review(actor=world.users["admin"], flag=world.flag_a, action="acknowledge", reason="seen")
    clients = _clients(world)
    # when every page is asked, and every form posted, with arbitrary values
    for method, table in (("GET", PAGES), ("POST", FORMS)):
        for path, (params, roles) in table.items():
            for role in roles:
                _check(clients[role], method, path, world, params, EXAMPLES[role], role)
    # then (checked in each case) no answer was a server error or showed a traceback
