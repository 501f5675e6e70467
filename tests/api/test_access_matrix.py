"""Who may read and write what, for every route of the API and every page, generated from the URL conf: a
route that the table below does not name fails with its name, so a new endpoint cannot be forgotten.

Each route is asked with GET, POST, PUT, PATCH and DELETE by each role (anonymous, a member and a lead of
team A, finance, an admin, a logged-in user in no team), about team B's objects: the member and the lead
must get 404 for them, as for anything of another team. Each request runs in a savepoint rolled back
after it, so every one meets the same world."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.api.world import ROLES, World, world_build

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
P = "?start=2026-11-02&end=2026-11-03"

# Expected answers, one per role in the order of ROLES: anonymous, member, lead, finance, admin, nobody.
# A number is the status; "login" is a redirect to a login page (the app's or the admin's).
# The API (DRF): anonymous 401, another team's object 404, fleet-wide data 403 but for admins and finance;
# finance is refused every unsafe method (403) before the route is asked whether it has the method (405).
API_ALL = "401 200 200 200 200 200"
API_TEAM_B = "401 404 404 200 200 404"
API_FLEET = "401 403 403 200 200 403"
API_NO_METHOD = "401 405 405 403 405 405"
API_GET_NO_METHOD = "401 405 405 405 405 405"  # a GET is safe: finance too learns the route has no GET
API_NO_METHOD_FLEET = "401 403 403 403 405 403"  # admins' or fleet-wide routes: refused before the method
PUBLIC = "200 200 200 200 200 200"  # an unsubscribe link: its token is the authority
NO_METHOD = "405 405 405 405 405 405"  # pages (and the schema): the method is checked first
# The pages: anonymous to the login page; team B's pages 404 for A's people and the user in no team.
PAGE_ALL = "login 200 200 200 200 200"
PAGE_TEAM_B = "login 404 404 200 200 404"
PAGE_FLEET = "login 403 403 200 200 403"
PAGE_ADMIN = "login 403 403 403 200 403"


@dataclass(frozen=True)
class Rule:
    get: str | None = None
    post: str | None = None
    other: str = API_NO_METHOD  # every method the route does not take
    query: str = ""
    body: dict | None = None


RULES: dict[str, Rule] = {
    # The API.
    "api-root": Rule(get=API_ALL),
    # The schema and its docs: no data, but a map of every route, so for logged-in users and tokens
    # (FLEETWATT_API_DOCS_LOGIN); the docs send a person to the login page. Redoc's old address goes to the docs.
    "schema": Rule(get=API_ALL, other=API_GET_NO_METHOD),
    "api-docs": Rule(get=PAGE_ALL, other="login 405 405 405 405 405"),
    "api-redoc": Rule(get="302 302 302 302 302 302", other="302 302 302 302 302 302"),
    "job-list": Rule(get=API_ALL),
    "job-detail": Rule(get=API_TEAM_B),
    "work-list": Rule(get=API_ALL, query=P),  # each caller's own teams' work (tests/api/test_work_api.py)
    # A job's work: its team's members and admins; finance only reads.
    "job-work": Rule(
        get=API_GET_NO_METHOD, post="401 404 404 403 200 404", body={"work_units": 1000, "work_unit": "request"}
    ),
    "job-action-exclude": Rule(post="401 403 403 403 201 403", other=API_NO_METHOD_FLEET, body={"reason": "m"}),
    "job-action-reassign": Rule(
        post="401 403 403 403 201 403", other=API_NO_METHOD_FLEET, body={"reason": "m", "team": "vision"}
    ),
    "team-list": Rule(get=API_ALL),
    "team-detail": Rule(get=API_TEAM_B),
    "team-rollup": Rule(get=API_TEAM_B, query=P),
    "team-compare": Rule(get=API_ALL, query=P),
    "team-daily-energy": Rule(get=API_ALL, query=P),
    # The FOCUS file: everyone, with the teams they may see (a member: theirs; finance, admins: all).
    "focus-list": Rule(get=API_ALL, query="?month=2026-11"),
    "cluster-list": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "cluster-detail": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "cluster-rollup": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET, query=P),
    "job-group-list": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "job-group-detail": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "job-group-rollup": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET, query=P),
    # How a group's runs ended: everyone logged in; a member's answer counts their teams' runs only.
    "job-group-outcomes": Rule(get=API_ALL, query=P),
    "gpu-list": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "gpu-detail": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "gpu-hours": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "flag-list": Rule(get=API_ALL),
    "flag-detail": Rule(get=API_TEAM_B),
    "flag-acknowledge": Rule(get=API_GET_NO_METHOD, post="401 404 404 403 201 404", body={"reason": "m"}),
    "flag-dispute": Rule(get=API_GET_NO_METHOD, post="401 404 404 403 201 404", body={"reason": "m"}),
    "audit-log-list": Rule(get=API_FLEET, other=API_NO_METHOD_FLEET),
    "report-list": Rule(get=API_ALL),
    "report-detail": Rule(get=API_TEAM_B),
    # When to run: the teams one may see; another team's is not found.
    "when-to-run-list": Rule(get=API_ALL),
    "when-to-run-detail": Rule(get=API_TEAM_B),
    # The frontier: of the runs one may see; a group none of one's teams ran is not found.
    "frontier-list": Rule(get=API_ALL, query="?month=2026-11"),
    "job-group-frontier": Rule(get=API_TEAM_B),
    # The pages.
    "dashboard:fleet": Rule(get=PAGE_ALL, other=NO_METHOD),
    # Where a login lands, and "My team": redirects (to the viewer's team, or the fleet page).
    "dashboard:home": Rule(get="login 302 302 302 302 302", other=NO_METHOD),
    "dashboard:my-team": Rule(get="login 302 302 302 302 302", other=NO_METHOD),
    "dashboard:team": Rule(get=PAGE_TEAM_B, other=NO_METHOD, query=P),
    "dashboard:team-jobs": Rule(get=PAGE_TEAM_B, other=NO_METHOD, query=P),
    "dashboard:team-jobs-csv": Rule(get=PAGE_TEAM_B, other=NO_METHOD, query=P),
    "dashboard:job": Rule(get=PAGE_TEAM_B, other=NO_METHOD),
    "dashboard:jobs": Rule(get=PAGE_ALL, other=NO_METHOD, query="?q=1"),
    # Team B's job by its scheduler id: its page (a redirect) for those who see team B, else not found.
    "dashboard:job-by-scheduler-id": Rule(get="login 404 404 302 302 404", other=NO_METHOD),
    "dashboard:gpu": Rule(get=PAGE_FLEET, other=NO_METHOD, query=P),
    "dashboard:groups": Rule(get=PAGE_ALL, other=NO_METHOD, query=P),
    "dashboard:status": Rule(get=PAGE_ADMIN, other=NO_METHOD),
    # The audit queue: admins; anyone else logged in gets the site's 403 (never the admin's login).
    "dashboard:audit": Rule(get=PAGE_ADMIN, other=NO_METHOD),
    # A decision by a rule: its preview (200) and its confirmation, admins only, by POST.
    "dashboard:audit-bulk": Rule(
        post="login 403 403 403 200 403",
        other=NO_METHOD,
        body={"action": "acknowledge", "kind": "failed_run", "under": "1", "currency": "EUR", "reason": "m"},
    ),
    "dashboard:audit-act": Rule(
        post="login 403 403 403 302 403", other=NO_METHOD, body={"action": "acknowledge", "reason": "m"}
    ),
    "dashboard:audit-job-act": Rule(
        post="login 403 403 403 302 403", other=NO_METHOD, body={"action": "exclude", "reason": "m"}
    ),
    # Tokens: finance's and the admins' own credentials (the one thing finance writes).
    "dashboard:tokens": Rule(get=PAGE_FLEET, post=PAGE_FLEET, other=NO_METHOD, body={"name": "m"}),
    "dashboard:token-revoke": Rule(post="login 403 403 302 404 403", other=NO_METHOD),  # finance's token
    "reports:archive": Rule(get=PAGE_ALL, other=NO_METHOD),
    "reports:report": Rule(get=PAGE_TEAM_B, other=NO_METHOD),
    "reports:resolve": Rule(post="login 403 403 403 302 403", other=NO_METHOD),
    # A preview: a team's report to whoever sees the team (their first team by default), the fleet summary
    # to admins; the user in no team has no report to preview.
    "reports:preview": Rule(get="login 200 200 200 200 403", other=NO_METHOD),
    "reports:send": Rule(post="login 403 403 403 302 403", other=NO_METHOD, body={"week": "2026-11-02"}),
    # A team's recipients: its leads and the admins (finance reads no recipients and keeps none).
    "reports:recipients": Rule(
        get="login 404 404 403 200 404",
        post="login 404 404 403 302 404",
        other=NO_METHOD,
        body={"action": "add", "email": "new@example.org"},
    ),
    # The unsubscribe link: its token is the authority, no login (GET asks, POST unsubscribes).
    "reports:unsubscribe": Rule(get=PUBLIC, post=PUBLIC, other=NO_METHOD),
}


@dataclass(frozen=True)
class Route:
    name: str  # namespace:name
    pattern: str  # the whole route, as the URL conf writes it
    params: tuple[str, ...]


def _walk(patterns: list, prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for p in patterns:
        pattern = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from _walk(p.url_patterns, pattern, inner)
        elif isinstance(p, URLPattern):
            params = tuple(sorted(re.compile(p.pattern.regex.pattern).groupindex))
            yield Route(f"{namespace}{p.name or '(unnamed)'}", pattern, params)


def routes() -> list[Route]:
    """Every route of the API and every page: the URL conf but the admin site, the login pages and healthz."""
    seen: dict[tuple[str, tuple[str, ...]], Route] = {}
    for route in _walk(get_resolver().url_patterns):
        if route.pattern.startswith("api/") or route.name.split(":")[0] in ("dashboard", "reports"):
            seen.setdefault((route.name, route.params), route)  # each router repeats the API's root
    return list(seen.values())


def test_every_route_of_the_api_and_every_page_has_a_rule() -> None:
    names = {r.name for r in routes()}
    missing = sorted(names - RULES.keys())
    assert not missing, f"routes without a rule in RULES (who may read and write them?): {missing}"
    stale = sorted(RULES.keys() - names)
    assert not stale, f"rules for routes that no longer exist: {stale}"


def _kwargs(route: Route, world: World) -> dict[str, object]:
    """Team B's object for each parameter (finance's own token for a revoke)."""
    by_prefix = {"jobs": world.job_b, "teams": world.team_b, "clusters": world.cluster, "job-groups": world.group,
                 "gpus": world.gpu_b, "flags": world.flag_b, "reports": world.report_b,
                 "when-to-run": world.team_b}  # fmt: skip
    by_name = {"team_id": world.team_b.pk, "job_id": world.job_b.pk, "gpu_id": world.gpu_b.pk,
               "flag_id": world.flag_b.pk, "report_id": world.report_b.pk, "token_id": world.finance_token.pk,
               "token": world.recipient_b.token, "format": "json",
               "scheduler": world.job_b.scheduler, "scheduler_job_id": world.job_b.job_id}  # fmt: skip
    kwargs: dict[str, object] = {}
    for param in route.params:
        if param == "pk":
            prefix = route.pattern.removeprefix("api/").lstrip("^").split("/")[0]
            kwargs[param] = by_prefix[prefix].pk
        else:
            kwargs[param] = by_name[param]
    return kwargs


def _expected(rule: Rule, method: str) -> list[str]:
    answer = {"GET": rule.get, "POST": rule.post}.get(method) or rule.other
    return answer.split()


def _answer(response) -> str:
    if response.status_code == 302 and re.match(r"/(accounts|admin)/login/", response.get("Location", "")):
        return "login"
    return str(response.status_code)


@pytest.mark.django_db
def test_access_matrix_of_every_route_role_and_method() -> None:
    world = world_build()
    clients = {}
    for role in ROLES:
        clients[role] = Client(raise_request_exception=False)
        if role != "anonymous":
            clients[role].force_login(world.users[role])
    wrong: list[str] = []
    for route in routes():
        rule = RULES[route.name]
        url = reverse(route.name, kwargs=_kwargs(route, world)) + rule.query
        is_api = route.pattern.startswith("api/")
        for method in METHODS:
            for role, expected in zip(ROLES, _expected(rule, method), strict=True):
                body = rule.body if method == "POST" else None
                with transaction.atomic():
                    if is_api or method != "POST":
                        payload = json.dumps(body or {})
                        response = clients[role].generic(method, url, payload, content_type="application/json")
                    else:
                        response = clients[role].post(url, body or {})
                    transaction.set_rollback(True)
                got = _answer(response)
                if got != expected:
                    wrong.append(f"{route.name} {method} {url} as {role}: {got}, expected {expected}")
    assert not wrong, f"{len(wrong)} answers differ from RULES:\n" + "\n".join(wrong)
