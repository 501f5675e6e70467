"""The three roles' questions, answered in Debian's chromium in at most 3 clicks each from where a login lands
(issue 35, "Done when"): a team lead, finance and an admin, each clicking links and buttons (no URL typed), on a
team lead's period (tests/dashboard/team_home_world.py) seen on 5 November 2026. Each answer is read on the page
it ends on, which has no serious or critical axe-core violation and says each thing one way (page_words.py).

One browser and one set of data for the three walks."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Avg
from django.utils import timezone

from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.derive import Fact, Scope, derive
from apps.reports.models import ReportRecipient
from apps.telemetry.models import GpuHour
from apps.waste.kinds import FlagKind, FlagStatus
from apps.waste.models import Flag
from tests.carbon.fleet_builder import HOUR, T0, job_run

from .page_words import SHOWN_JS, shown_problems
from .team_home_world import TeamHomeWorld, team_home_world_build
from .test_browser_pages import CHARTS_SETTLED, _axe_serious
from .test_fleet_dashboard import browser  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOW = datetime(2026, 11, 5, 12, tzinfo=UTC)  # a Thursday: this month is 1-5 November, this week 2-5 November
MAX_CLICKS = 3
RECIPIENTS = ("lin@example.org", "vision-leads@example.org")
SMALL_FAILED = ("slurm/901", "slurm/902", "slurm/903")  # ten minutes each on a GPU: under 1 EUR
HOT = "slurm/950"  # the one job that drew 650 W: its GPU is the hottest


def _world() -> TeamHomeWorld:
    """The team lead's period, with an admin, the team's report recipients, three small failed runs and a hot
    GPU."""
    world = team_home_world_build()
    fleet = world.fleet
    gpu2, gpu1 = fleet.gpus[2], fleet.gpus[1]
    made = [
        job_run(fleet, key=key, gpus=[gpu2], hours=1, power_w=121.7, start=T0 + (10 + k) * HOUR)
        for k, key in enumerate(SMALL_FAILED)
    ]
    JobGpuHour.objects.filter(job__in=made).update(occupancy_s=600, sampled_s=600)
    GpuHour.objects.filter(gpu=gpu2, hour__gte=T0 + 10 * HOUR, hour__lt=T0 + 13 * HOUR).update(occupied_s=600)
    made.append(job_run(fleet, key=HOT, gpus=[gpu1], hours=10, power_w=650, start=T0 + 30 * HOUR))
    JobGpuHour.objects.filter(job=made[-1]).update(sm_s=3400.0)
    for job in made:
        job.team, job.user, job.scheduler, job.job_id = world.vision, "ada", "slurm", job.job_key.split("/")[1]
        job.state = "failed" if job.job_key in SMALL_FAILED else "completed"
        job.name = "render" if job.job_key == HOT else "smoke-test"
        job.exit_code, job.signal = (1 if job.state == "failed" else 0), 0
        job.last_seen = job.scheduler_seen_at = job.scheduler_end = job.start + HOUR * (10 if job.job_key == HOT else 1)
        job.scheduler_start = job.start
        job.save()
    with transaction.atomic():
        derive(Scope(), changed={Fact.GROUP_RULES, Fact.FACTORS, Fact.SCHEDULER})
    User.objects.create_user("boss", password="pw-boss", is_staff=True)
    for email in RECIPIENTS:
        ReportRecipient.objects.create(team=world.vision, email=email)
    return world


class Walk:
    """A role's questions from where its login lands: every click counted, each answer's page checked."""

    def __init__(self, page, base: str, username: str, password: str) -> None:
        self.page, self.base, self.clicks = page, base, 0
        self.problems: list[str] = []
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        self.landing = self._settled()

    def _settled(self) -> str:
        self.page.wait_for_load_state("load")
        self.page.wait_for_function(CHARTS_SETTLED)
        return self.page.url

    def start(self) -> None:
        """Back where the login landed, for the next question (not a click: where the role begins)."""
        self.page.goto(self.landing)
        self._settled()
        self.clicks = 0

    def click(self, selector: str) -> None:
        """A click on a link or a button, then the page it leads to, drawn."""
        self.clicks += 1
        self.page.locator(selector).first.click()
        self._settled()

    def download(self, selector: str) -> str:
        """A click on a link that downloads a file: the file's text."""
        self.clicks += 1
        with self.page.expect_download() as download:
            self.page.locator(selector).first.click()
        return download.value.path().read_text()

    def answered(self, question: str) -> None:
        """The question took at most MAX_CLICKS; the page its answer is on passes axe-core and says things one
        way."""
        if self.clicks > MAX_CLICKS:
            self.problems.append(f"{question}: {self.clicks} clicks")
        self.problems += [f"{question}: {v}" for v in _axe_serious(self.page)]
        self.problems += [f"{question}: {w}" for w in shown_problems(self.page.evaluate(SHOWN_JS))]


def _figure(text: str) -> Decimal:
    """The first figure of a text ("1,234.50 EUR" -> 1234.50)."""
    found = re.search(r"-?[\d,]+(\.\d+)?", text)
    assert found, text
    return Decimal(found.group(0).replace(",", ""))


@pytest.fixture
def walk_world(monkeypatch: pytest.MonkeyPatch) -> TeamHomeWorld:
    monkeypatch.setattr(timezone, "now", lambda: NOW)  # the server's "this month", "this week" and "next report"
    return _world()


def _page(browser, live_server):  # noqa: F811
    # axe-core is injected as an inline script: this walk is about the questions, not the CSP (test_browser_csp.py)
    page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    page.clock.set_fixed_time(NOW)  # the browser's quick ranges agree with the server's days
    return page


def _lead(walk: Walk, world: TeamHomeWorld) -> None:
    page = walk.page
    # a lead lands on the team's page, this month
    assert page.locator("h1").first.inner_text() == "Vision" and "start=2026-11-01" in page.url

    # what did my team cost this month: the headline, the bill (the API's, for the same days)
    rollup = page.request.get(f"{walk.base}/api/teams/{world.vision.pk}/rollup/?start=2026-11-01&end=2026-11-06")
    assert _figure(page.inner_text("#total-cost")) == Decimal(rollup.json()["totals"]["cost"]) > 0
    walk.answered("lead: what did my team cost this month")

    # which of my jobs wasted the most: the waste table's first row, the most money first
    worst = page.locator("#waste tbody tr").first
    assert worst.get_attribute("data-job-key") == "slurm/1"
    costs = [_figure(c) for c in page.locator("#waste tbody tr td:last-child").all_inner_texts()]
    assert costs == sorted(costs, reverse=True)
    walk.answered("lead: which of my jobs wasted the most")

    # what should I change: that job's page says what to do, with its own figures
    walk.click("#waste tbody tr >> nth=0 >> a[href*='/jobs/']")
    advice = page.locator("#job-flags .advice").all_inner_texts()
    assert advice and all(line.startswith("What to do:") for line in advice)
    walk.answered("lead: what should I change")

    # when is our weekly report sent, and to whom
    walk.start()
    walk.click("#team-report")
    sent = page.inner_text("#next-report")
    assert "Monday 9 Nov 2026, 07:00" in sent and "UTC" in sent
    assert all(email in page.inner_text("#report-recipients") for email in RECIPIENTS)
    walk.answered("lead: when is our weekly report sent and to whom")


def _finance(walk: Walk, world: TeamHomeWorld) -> None:
    page = walk.page
    # the month's bill per team with a total
    walk.click(".quick-ranges >> text=This month")
    assert "start=2026-11-01" in page.url
    rows = {
        r.get_attribute("data-team"): _figure(r.locator("td").last.inner_text())
        for r in page.locator("#teams-compared tbody tr[data-team]").all()
    }
    total = _figure(page.locator("#teams-compared-total td").last.inner_text())
    bill = sum(
        Decimal(page.request.get(f"{walk.base}/api/teams/{t.pk}/rollup/?start=2026-11-01&end=2026-11-06").json()
                ["totals"]["cost"])
        for t in (world.vision, world.nlp)
    )  # fmt: skip
    assert set(rows) == {"vision", "nlp"} and total == sum(rows.values()) == bill
    walk.answered("finance: the month's bill per team with a total")

    # the month's FOCUS export, from the same page
    focus = walk.download("#focus-month")
    lines = list(csv.DictReader(io.StringIO(focus)))
    assert lines and {"BilledCost", "BillingPeriodStart"} <= set(lines[0])
    assert all(r["BillingPeriodStart"].startswith("2026-11-01") for r in lines)
    walk.answered("finance: download the month's FOCUS export")

    # an API key, and an example command that works
    walk.start()
    walk.click("header nav >> text=Tokens")
    page.fill("input[name=name]", "ledger")
    walk.click("button:has-text('Create')")
    example = page.inner_text("#new-key-example")
    key = page.inner_text("#new-key-value")
    assert example.startswith("curl ") and f"Authorization: Bearer {key}" in example
    url = re.search(r'"(https?://[^"]+)"', example)
    assert url
    fetched = page.request.get(url.group(1), headers={"Authorization": f"Bearer {key}"})
    assert fetched.ok and "BilledCost" in fetched.text()
    walk.answered("finance: create an API key and see an example curl")


def _admin(walk: Walk, world: TeamHomeWorld) -> None:
    page = walk.page
    # what needs attention now
    strip = page.inner_text("#attention")
    assert re.search(r"\d+ waste findings? open or disputed", strip) and "EUR at stake" in strip
    walk.answered("admin: what needs attention now")

    # which findings cost the most: the queue, the most money first
    walk.click("#attention-audit")
    stakes = [_figure(s) for s in page.locator("#audit-queue tbody td.stake").all_inner_texts() if "none" not in s]
    assert stakes and stakes == sorted(stakes, reverse=True)
    assert page.locator("#audit-queue tbody tr").first.locator("a[href*='/jobs/']").first.inner_text() == "slurm/1"
    walk.answered("admin: which findings cost the most")

    # acknowledge all failed runs under 1 EUR this week: the rule, its preview, its confirmation
    assert page.locator("#audit-rule-form select[name=kind]").input_value() == FlagKind.FAILED_RUN
    assert page.locator("#audit-rule-form input[name=under]").input_value() == "1"
    page.fill("#audit-rule-form input[name=reason]", "smoke tests, expected to fail")
    walk.click("#audit-rule-form button[type=submit]")
    assert "takes 3 open findings" in page.inner_text("#rule-count")
    walk.click("#rule-confirm button[type=submit]")
    assert "3 findings acknowledged" in page.inner_text(".messages")
    failed = Flag.objects.filter(kind=FlagKind.FAILED_RUN)
    assert {f.job.job_key for f in failed.filter(status=FlagStatus.ACKNOWLEDGED)} == set(SMALL_FAILED)
    assert failed.get(job__job_key="slurm/1").status == FlagStatus.OPEN
    walk.answered("admin: acknowledge all failed runs under 1 EUR this week")

    # which GPU was hottest: the one that drew the most on average, and its page
    walk.start()
    hottest = GpuHour.objects.values("gpu").annotate(mean=Avg("device_energy_j")).order_by("-mean").first()["gpu"]
    walk.click("#hottest-gpu a")
    gpu = Job.objects.get(job_key=HOT).gpu_hours_rows.first().gpu
    assert hottest == gpu.pk and page.locator("h1").inner_text() == f"GPU {gpu}"
    walk.answered("admin: which GPU was hottest")


def test_each_role_answers_its_questions_in_three_clicks(walk_world, live_server, browser) -> None:  # noqa: F811
    problems: list[str] = []
    for walk_role, (user, password) in {
        _lead: ("lin", "pw-lin"),
        _finance: ("fin", "pw-fin"),
        _admin: ("boss", "pw-boss"),
    }.items():
        page = _page(browser, live_server)
        walk = Walk(page, live_server.url, user, password)
        walk_role(walk, walk_world)
        problems += walk.problems
        page.close()
    assert not problems, "\n".join(problems)
