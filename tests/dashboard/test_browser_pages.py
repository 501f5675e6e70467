"""Every page for every role in Debian's chromium (issue 13): no serious or critical axe-core violation, a
chart's legend, a table that sorts and filters, quick ranges, a phone's width (390 px) without the page
scrolling sideways, and, with FLEETWATT_TEST_SCREENSHOTS=1, a screenshot of each page at both widths
(test-artifacts/screenshots/, git-ignored; off by default, to keep the walk short). Issue 35: every page says each
thing one way (tests/dashboard/page_words.py), and at a phone's width its per-day charts stand one under the
other and each table keeps a money column in sight.

One browser and one set of data for the whole walk: each page is loaded once per role at a desktop's width
(and once more at a phone's), so that the walk adds seconds, not minutes."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.template import Context, Template

from apps.core.access.policy import FINANCE_GROUP
from apps.core.web.views import server_error
from apps.fleet.models import TeamMembership
from apps.pipeline.inputs import footprints_recompute
from apps.reports.models import ReportRecipient
from apps.waste.kinds import FlagKind
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

from .page_words import SHOWN_JS, shown_problems
from .test_fleet_dashboard import ARTIFACTS, _login, browser  # noqa: F401 (fixture)

AXE = Path(__file__).resolve().parents[2] / "frontend" / "static" / "vendor" / "axe-core" / "axe.min.js"
SCREENSHOTS = ARTIFACTS / "screenshots"
TAKE_SCREENSHOTS = os.environ.get("FLEETWATT_TEST_SCREENSHOTS") == "1"
PERIOD = "?start=2026-11-02&end=2026-11-04"
# Every chart drawn, or its container saying why not.
CHARTS_SETTLED = (
    "[...document.querySelectorAll('.chart')].every(c => c.querySelector('.main-svg') || c.textContent.trim())"
)
# Charts side by side: a row of charts (.chart-row) whose charts share a line (each chart's box must start below
# the one before it), or a chart whose own panels (Plotly's subplots) share a line.
CHARTS_SIDE_BY_SIDE = """() => {
  const rows = [...document.querySelectorAll('.chart-row')].flatMap((row) => {
    const boxes = [...row.querySelectorAll(':scope > .chart')].map((c) => c.getBoundingClientRect());
    return boxes.slice(1).some((b, i) => b.top < boxes[i].bottom - 1) ? [row.id] : [];
  });
  const apart = (a, b) => a[1] <= b[0] || b[1] <= a[0];
  const panels = [...document.querySelectorAll('.js-plotly-plot')].filter((gd) => {
    const full = gd._fullLayout;
    const boxes = ((full && full._subplots && full._subplots.cartesian) || []).map((id) => {
      const [, x, y] = /^(x\\d*)(y\\d*)$/.exec(id);
      return { x: full[x.replace('x', 'xaxis')].domain, y: full[y.replace('y', 'yaxis')].domain };
    });
    return boxes.some((a, i) => boxes.slice(i + 1).some((b) => apart(a.x, b.x) && !apart(a.y, b.y)));
  }).map((gd) => gd.id + ' (its panels)');
  return rows.concat(panels);
}"""
# The tables (scrolled to their start) none of whose money columns (a header saying cost, money or a currency) is
# wholly in the window: 'table: its money headers'.
MONEY_OUT_OF_SIGHT = """() => {
  const MONEY = /\\b(cost|money|EUR|USD)\\b/i;
  const inSight = (cell) => {
    const box = cell.getBoundingClientRect();
    return box.left >= 0 && box.right <= innerWidth + 0.5;
  };
  const out = [];
  for (const table of document.querySelectorAll('main table')) {
    if (!table.offsetParent) continue;  // not shown (a closed <details>)
    const wrap = table.closest('.table-wrap');
    if (wrap) wrap.scrollLeft = 0;
    const head = table.tHead ? table.tHead.rows[0] : table.rows[0];
    if (!head || ![...head.cells].every((c) => c.tagName === 'TH')) continue;
    const columns = [];
    let x = 0;
    for (const th of head.cells) { if (MONEY.test(th.textContent)) columns.push(x); x += th.colSpan; }
    const shown = (column) => [...table.rows].filter((r) => !r.hidden).every((row) => {
      let at = 0;
      for (const cell of row.cells) { if (at === column) return cell.colSpan > 1 || inSight(cell); at += cell.colSpan; }
      return true;
    });
    if (columns.length && !columns.some(shown)) out.push((table.id || table.className || 'a table') + ': ' +
      [...head.cells].filter((th) => MONEY.test(th.textContent)).map((th) => th.textContent.trim()).join(', '));
  }
  return out;
}"""


def _axe_serious(page) -> list[str]:
    """axe-core's serious and critical violations on the page, as 'rule: target' lines."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
             .filter(v => v.impact === 'serious' || v.impact === 'critical')
             .flatMap(v => v.nodes.map(n => v.id + ': ' + n.target.join(' ')))"""
    )
    return list(found)


def _shot(page, name: str) -> None:
    if TAKE_SCREENSHOTS:
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _visit(page, url: str, shot: str, *, status: int = 200) -> list[str]:
    """The page's axe-core violations and the words it says otherwise than the pages' way, each named by `shot`."""
    answer = page.goto(url)
    assert answer is not None and answer.status == status, f"{url}: {answer and answer.status}"
    page.wait_for_function(CHARTS_SETTLED)
    _shot(page, shot)
    words = shown_problems(page.evaluate(SHOWN_JS))
    return [f"{shot}: {v}" for v in _axe_serious(page)] + [f"{shot}: {w}" for w in words]


@pytest.fixture
def walk_data():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 48)
    big = job_run(fleet, key="slurm/1", gpus=fleet.gpus[:4], hours=30, power_w=600)
    small = job_run(fleet, key="slurm/2", gpus=fleet.gpus[4:6], hours=6, power_w=450, start=T0 + 10 * HOUR)
    # the big one failed, as its scheduler recorded it; the small one held memory it did not use
    big.state, big.user, big.name, big.exit_code, big.scheduler, big.job_id = "failed", "ada", "train", 1, "slurm", "1"
    big.submitted_at = big.scheduler_start = T0
    big.scheduler_end = big.scheduler_seen_at = T0 + 30 * HOUR
    big.save()
    footprints_recompute()  # (the failed run's finding among its figures)
    Flag.objects.update_or_create(kind=FlagKind.MEMORY_HOG, cluster=fleet.cluster, job=small, defaults={
        "evidence": {"sm_percent": 0.4, "memory_bytes": 40 * 2**30, "gpu_hours_blocked": 12.0}})  # fmt: skip
    Flag.objects.create(  # a finding on a GPU-hour, for the audit queue's form without a job
        kind=FlagKind.COUNTER_RESET, cluster=fleet.cluster, gpu=fleet.gpus[6], hour=T0 + HOUR,
        evidence={"device_energy_j": 1_800_000.0, "dcgm_energy_j": 1_750_000.0, "residual_j": 50_000.0,
                  "residual_ratio": 0.0286, "counter_resets": 1, "agent_version": "1.4.0", "contract_gaps": []},
    )  # fmt: skip
    User.objects.create_user("boss", password="pw-boss", is_staff=True)
    fin = User.objects.create_user("fin", password="pw-fin")
    fin.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    ada = User.objects.create_user("ada", password="pw-ada")
    TeamMembership.objects.create(user=ada, team=fleet.team)
    lea = User.objects.create_user("lea", password="pw-lea")
    TeamMembership.objects.create(user=lea, team=fleet.team, role=TeamMembership.Role.LEAD)
    ReportRecipient.objects.create(team=fleet.team, email="vision-leads@example.org")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return {"team": fleet.team, "big": big, "small": small, "gpu": fleet.gpus[0]}


def _pages(data: dict, role: str) -> dict[str, tuple[str, int]]:
    team, job, gpu = data["team"].pk, data["big"].pk, data["gpu"].pk
    pages = {
        "fleet": (f"/{PERIOD}", 200),
        "team": (f"/teams/{team}/{PERIOD}", 200),
        "team-jobs": (f"/teams/{team}/jobs/{PERIOD}", 200),
        "job": (f"/jobs/{job}/", 200),
        "jobs": ("/jobs/?q=slurm", 200),
        "groups": (f"/groups/{PERIOD}", 200),
        "reports": ("/reports/", 200),
        "not-found": ("/teams/999999/", 404),
        "bad-range": ("/?start=2026-11-04&end=2026-11-02", 400),
    }
    if role == "lead":  # the pages a lead sees otherwise than a member
        return {
            "team": pages["team"],
            "report-preview": (f"/reports/preview/?team={team}&week=2026-11-02", 200),
            "recipients": (f"/reports/teams/{team}/recipients/", 200),
        }
    if role == "member":
        pages["gpu-refused"] = (f"/gpus/{gpu}/{PERIOD}", 403)
    else:
        pages |= {"gpu": (f"/gpus/{gpu}/{PERIOD}", 200), "tokens": ("/tokens/", 200)}
    if role == "admin":
        pages |= {
            "status": ("/status/", 200),
            "audit": ("/audit/?status=", 200),
            "report-preview": (f"/reports/preview/?team={team}&week=2026-11-02", 200),
            "recipients": (f"/reports/teams/{team}/recipients/", 200),
        }
    return pages


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_page_for_every_role_is_accessible_and_fits_a_phone(walk_data, live_server, browser) -> None:  # noqa: F811
    # given a team with two jobs, and a member of it, its lead, an admin and finance
    violations: list[str] = []
    overflow: list[str] = []
    side_by_side: list[str] = []
    money_hidden: list[str] = []
    for role, (user, password) in {
        "member": ("ada", "pw-ada"),
        "lead": ("lea", "pw-lea"),
        "admin": ("boss", "pw-boss"),
        "finance": ("fin", "pw-fin"),
    }.items():
        # axe-core is injected as an inline script: this walk is about access, not the CSP (test_browser_csp.py)
        page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
        if role == "member":  # the login page, once
            violations += _visit(page, f"{live_server.url}/accounts/login/", "login")
        _login(page, live_server.url, user, password)
        # when each of the role's pages is opened
        for name, (path, status) in _pages(walk_data, role).items():
            violations += _visit(page, live_server.url + path, f"{role}-{name}", status=status)
        # then the Tokens link is there only for those who may use it
        sees_all = role in ("admin", "finance")
        assert page.goto(f"{live_server.url}/{PERIOD}").ok
        page.wait_for_function(CHARTS_SETTLED)
        assert (page.locator("header nav >> text=Tokens").count() == 1) == sees_all
        # and the GPU pages are linked, from the fleet page and the job's hours, for those who may open them
        assert page.locator("details.gpu-list a[href*='/gpus/']").count() == (8 if sees_all else 0)
        page.goto(f"{live_server.url}/jobs/{walk_data['big'].pk}/")
        assert (page.locator("#job-hours a[href*='/gpus/']").count() > 0) == sees_all
        # and at a phone's width no page scrolls sideways (wide tables scroll inside their card), a row of charts
        # stands one under the other, and each table's money is in sight at its start, for every role
        page.set_viewport_size({"width": 390, "height": 844})
        for name, (path, status) in _pages(walk_data, role).items():
            assert page.goto(live_server.url + path).status == status
            page.wait_for_function(CHARTS_SETTLED)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 390:
                overflow.append(f"{role}-{name}: {width} px")
            side_by_side += [f"{role}-{name}: {row}" for row in page.evaluate(CHARTS_SIDE_BY_SIDE)]
            money_hidden += [f"{role}-{name}: {table}" for table in page.evaluate(MONEY_OUT_OF_SIGHT)]
            _shot(page, f"phone-{role}-{name}")
        page.close()
    assert not violations, "\n".join(violations)
    assert not overflow, overflow
    assert not side_by_side, side_by_side
    assert not money_hidden, money_hidden


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_charts_have_legends_tables_sort_and_filter_and_quick_ranges(walk_data, live_server, browser) -> None:  # noqa: F811
    # given a member on the team's page, whose jobs were all split one way (a single method)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    _login(page, live_server.url, "ada", "pw-ada")
    page.goto(f"{live_server.url}/teams/{walk_data['team'].pk}/{PERIOD}")
    page.wait_for_selector("#method-chart .main-svg")

    # then the split-method chart still has its legend and a title
    legend = page.evaluate(
        "(() => { const c = document.getElementById('method-chart');"
        " return {shown: c.layout.showlegend, entries: c.querySelectorAll('.legend .traces').length,"
        " title: c.layout.title.text, traces: c.data.length}; })()"
    )
    assert legend["shown"] is True and legend["entries"] == legend["traces"] >= 1 and "kWh" in legend["title"]

    # when the top jobs are sorted by cost, ascending then descending
    rows = "#top-jobs tbody tr[data-job-key]"
    keys = lambda: page.eval_on_selector_all(rows, "rs => rs.filter(r => !r.hidden).map(r => r.dataset.jobKey)")  # noqa: E731
    assert keys() == ["slurm/1", "slurm/2"]  # the server's order: costliest first
    page.click("#top-jobs thead >> button:has-text('Cost')")
    assert keys() == ["slurm/2", "slurm/1"]
    assert page.get_attribute("#top-jobs thead th:has(button:has-text('Cost'))", "aria-sort") == "ascending"
    page.keyboard.press("Enter")  # the header's button keeps the focus: a keyboard sorts too
    assert keys() == ["slurm/1", "slurm/2"]

    # and filtered by a job's key
    page.fill("input[data-filter-for=top-jobs]", "slurm/2")
    assert keys() == ["slurm/2"]
    page.fill("input[data-filter-for=top-jobs]", "")
    assert keys() == ["slurm/1", "slurm/2"]

    # and a quick range sets the form's days and shows them (end exclusive: 7 days up to today)
    page.click(".quick-ranges >> text=Last 7 days")
    page.wait_for_load_state("load")
    assert "start=" in page.url and "end=" in page.url
    start, end = (page.input_value(f"form.period input[name={n}]") for n in ("start", "end"))
    assert (date.fromisoformat(end) - date.fromisoformat(start)).days == 7


# The pages' answers to a person's mistakes and refusals, without a browser.


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("?start=2026-11-04&end=2026-11-02", "must be before end"),
        ("?start=2024-01-01&end=2026-11-02", "at most 400 days"),
    ],
)
def test_a_reversed_or_too_long_range_is_refused_with_a_message(client, query: str, says: str) -> None:
    # given a member
    client.force_login(User.objects.create_user("ada"))
    # when the fleet page is asked for a reversed range, or one longer than the API's rollups cover
    answer = client.get(f"/{query}")
    # then the page refuses it in the site's layout, saying why, instead of showing another window
    assert answer.status_code == 400
    body = answer.content.decode()
    assert says in body and 'class="top"' in body
    # with the period as it was asked for, in a form to correct it (the script adds the quick ranges to it)
    start, end = (part.split("=")[1] for part in query[1:].split("&"))
    assert 'form method="get" action="/" class="period"' in body
    assert f'name="start" value="{start}"' in body and f'name="end" value="{end}"' in body


@pytest.mark.django_db
def test_a_member_refused_a_gpu_page_gets_the_site_s_403_page_and_no_tokens_link(client) -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    client.force_login(User.objects.create_user("ada"))
    refused = client.get(f"/gpus/{fleet.gpus[0].pk}/")
    assert refused.status_code == 403
    body = refused.content.decode()
    assert 'class="top"' in body and "for admins and finance" in body
    assert "/tokens/" not in client.get("/").content.decode()
    assert client.get("/tokens/").status_code == 403


@pytest.mark.django_db
def test_a_reassign_without_a_team_is_a_form_error_not_a_404(client) -> None:
    # given an admin on a job's page
    fleet = fleet_build(servers=1, gpus_per_server=1)
    job = job_run(fleet, key="slurm/9", gpus=fleet.gpus, hours=1, power_w=300)
    client.force_login(User.objects.create_user("boss", is_staff=True))
    # when a reassignment is sent without choosing a team
    answer = client.post(
        f"/audit/jobs/{job.pk}/act/", {"action": "reassign_team", "team": "", "reason": "wrong team"}, follow=True
    )
    # then the job's page says what is missing, and the job keeps its team
    assert answer.status_code == 200
    assert "Choose the team to reassign the job to." in answer.content.decode()
    job.refresh_from_db()
    assert job.team == fleet.team


def test_the_500_page_is_the_site_s_layout_rendered_without_the_request(rf) -> None:
    answer = server_error(rf.get("/teams/1/"))
    assert answer.status_code == 500
    body = answer.content.decode()
    assert "Server error" in body and 'class="top"' in body and "Log out" not in body


def test_the_pages_number_formats_are_the_report_s() -> None:
    # given the template filters every page loads ({% load numbers %})
    shown = Template(
        "{% load numbers %}{{ j|joules }}|{{ j|qty_kwh }}|{{ e|qty:2 }}|{{ c|money }}|{{ r|ratio_pct }}"
        "|{{ none|qty_kwh }}|{{ c|billed:'EUR' }}|{{ c|billed:'JPY' }}"
    ).render(Context({"j": 2160000, "e": 8824.129, "c": "7814.675", "r": 0.8123, "none": None}))
    # then thousands are grouped and joules read as kWh, as the weekly report prints them; a billed amount to its
    # currency's minor unit
    assert shown == "0.600 kWh|0.600|8,824.13|7,814.68|81 %||7,814.68|7,815"
