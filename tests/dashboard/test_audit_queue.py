"""The audit queue as an admin reads it: GPU-level findings with their evidence, readable evidence for every
kind, the time the waste happened, an "any" status, readable decisions, and one rule with the weekly report
for what a decision changes."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.fleet.models import TeamMembership
from apps.pipeline.inputs import footprints_recompute
from apps.reports.selectors import report_build
from apps.waste.kinds import FlagKind
from apps.waste.models import AuditEntry, Flag
from tests.carbon.fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


def _rows(html: str) -> dict[str, str]:
    """{kind: the text of the queue's first row of that kind} (the oldest first)."""
    table = html[html.index('id="audit-queue"') :]
    out: dict[str, str] = {}
    for kind, row in re.findall(r'<tr data-flag="\d+" data-kind="(\w+)"[^>]*>(.*?)</tr>', table, re.S):
        out.setdefault(kind, _text(row))
    return out


def _text(html: str) -> str:
    return unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


@pytest.fixture
def world():
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    hog = job_run(fleet, key="slurm/hog", gpus=fleet.gpus[:1], hours=3, power_w=80)
    hog2 = job_run(fleet, key="slurm/hog2", gpus=fleet.gpus[1:2], hours=3, power_w=80)
    other = job_run(fleet, key="slurm/run", gpus=fleet.gpus[2:4], hours=4, power_w=500)
    footprints_recompute()
    Flag.objects.all().delete()  # the pipeline's own findings on these synthetic jobs: the test writes its own
    window = {"from": (T0 + HOUR).isoformat(), "to": (T0 + 2 * HOUR).isoformat()}
    flags = {
        "memory_hog": Flag.objects.create(
            kind=FlagKind.MEMORY_HOG, cluster=fleet.cluster, job=hog,
            evidence={**window, "gpus": [fleet.gpus[0].uuid], "memory_bytes": 4 * 1024**3, "sm_percent": 0.4,
                      "gpu_hours_blocked": 2.0, "energy_kwh": 0.16, "facility_kwh": 0.25, "co2e_kg": 0.1,
                      "cost": "5.05"},
        ),
        "memory_hog_2": Flag.objects.create(
            kind=FlagKind.MEMORY_HOG, cluster=fleet.cluster, job=hog2,
            evidence={**window, "gpus": [fleet.gpus[1].uuid], "memory_bytes": 2 * 1024**3, "sm_percent": 0.2,
                      "gpu_hours_blocked": 2.0, "facility_kwh": 0.25, "co2e_kg": 0.1, "cost": "5.05"},
        ),
        "counter_reset": Flag.objects.create(
            kind=FlagKind.COUNTER_RESET, cluster=fleet.cluster, job=None, gpu=fleet.gpus[2], hour=T0 + HOUR,
            evidence={"device_energy_j": 1_800_000.0, "dcgm_energy_j": 1_750_000.0, "residual_j": 50_000.0,
                      "residual_ratio": 0.0286, "counter_resets": 1, "agent_version": "1.4.0", "contract_gaps": []},
        ),
        "failed_run": Flag.objects.create(
            kind=FlagKind.FAILED_RUN, cluster=fleet.cluster, job=other, status=Flag.Status.ACKNOWLEDGED,
            evidence={"state": "timeout", "exit_code": 0, "signal": None, "job_group": "", "gpu_hours_blocked": 8.0,
                      "energy_kwh": 4.0, "facility_kwh": 6.24, "co2e_kg": 1.9, "cost": "21.25"},
        ),
        "unobserved": Flag.objects.create(
            kind=FlagKind.UNOBSERVED, cluster=fleet.cluster, job=other,
            evidence={"estimated_gpu_hours": 0.5, "gpu_hours": 8.0, "estimated_energy_kwh": 0.25,
                      "energy_kwh": 4.0, "estimated_cost": "1.30", "gpus": [fleet.gpus[2].uuid]},
        ),
        "low_coverage": Flag.objects.create(
            kind=FlagKind.LOW_COVERAGE, cluster=fleet.cluster, job=other,
            evidence={"coverage": 0.92, "sampled_s": 26496.0, "expected_s": 28800.0, "energy_j": 14_400_000.0,
                      "threshold": 0.95},
        ),
        "idle_allocation": Flag.objects.create(
            kind=FlagKind.IDLE_ALLOCATION, cluster=fleet.cluster, job=other,
            evidence={**window, "gpus": [], "memory_bytes": 0, "sm_percent": 60.0, "gpu_hours_blocked": 8.0,
                      "unused_gpus": 2, "unused_gpu_hours": 8.0, "energy_kwh": 0.0, "facility_kwh": 0.0,
                      "co2e_kg": 0.4, "cost": "20.00"},
        ),
    }  # fmt: skip
    admin = User.objects.create_user("boss", password="pw", is_staff=True)
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return fleet, flags, admin, member


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_gpu_level_findings_reach_the_queue_with_their_evidence(world) -> None:
    fleet, flags, admin, member = world
    # when an admin filters the queue on counter resets
    html = _client(admin).get("/audit/", {"kind": "counter_reset"}).content.decode()
    rows = _rows(html)
    # then the GPU-hour's finding is there: its GPU, its hour, the reset, the energy by which meter, and the jobs
    assert list(rows) == ["counter_reset"]
    row = rows["counter_reset"]
    assert "Counter Reset — exact" in row and "Open" in row
    assert "GPU c1-n0/2" in row and "hour 2026-11-02 01:00 UTC" in row and "1 counter reset" in row
    assert "0.500 kWh (GPU) metered by the agent" in row and "0.486 kWh (GPU) by DCGM" in row
    assert "residual 0.014 kWh (GPU) (+2.9 %)" in row
    assert "slurm/run" in row  # the job that ran on that GPU in that hour, to decide on
    assert "When the waste happened" in html and "2026-11-02 01:00 UTC" in row


def test_every_kind_s_evidence_is_readable(world) -> None:
    fleet, flags, admin, member = world
    rows = _rows(_client(admin).get("/audit/", {"status": ""}).content.decode())
    assert set(rows) == {"memory_hog", "counter_reset", "failed_run", "unobserved", "low_coverage", "idle_allocation"}
    assert "4.0 GB held" in rows["memory_hog"] and "SM 0.4 %" in rows["memory_hog"]
    assert "0.25 kWh (facility)" in rows["memory_hog"] and "5.05 EUR" in rows["memory_hog"]
    assert "ended timed out" in rows["failed_run"] and "6.24 kWh (facility)" in rows["failed_run"]
    assert "0.5 of 8.0 GPU-h estimated" in rows["unobserved"]
    assert "0.25 of 4.00 kWh (GPU) estimated" in rows["unobserved"]
    assert "coverage 92 % · seen 7.4 of 8.0 GPU-h · threshold 95 %" in rows["low_coverage"]
    assert "4.00 kWh (GPU)" in rows["low_coverage"]
    assert "2 allocated GPUs never used (8.0 GPU-h)" in rows["idle_allocation"]
    for row in rows.values():
        assert not row.rstrip().endswith("·") and "{" not in row


def test_the_time_shown_is_when_the_waste_happened(world) -> None:
    fleet, flags, admin, member = world
    row = _rows(_client(admin).get("/audit/", {"kind": "memory_hog"}).content.decode())["memory_hog"]
    # the evidence's hours first; when it was found (the ingest) after it
    assert "2026-11-02 01:00 UTC → 2026-11-02 03:00 UTC" in row  # the hours 01:00 and 02:00
    assert row.index("2026-11-02 01:00 UTC →") < row.index("found")


def test_the_status_filter_has_any(world) -> None:
    fleet, flags, admin, member = world
    client = _client(admin)
    assert "failed_run" not in _rows(client.get("/audit/").content.decode())  # open ones by default
    html = client.get("/audit/", {"status": ""}).content.decode()
    assert '<option value="" selected>any</option>' in html
    assert "Acknowledged" in _rows(html)["failed_run"]
    assert "failed_run" in _rows(client.get("/audit/", {"status": "acknowledged"}).content.decode())
    # and the page says what a decision changes, as the team page and the report apply it
    rule = _text(html[html.index('id="decision-rule"') :])
    assert "no longer counted as waste, on the team's page and in its weekly report alike" in rule


def test_a_decision_reads_as_before_and_after(world) -> None:
    fleet, flags, admin, member = world
    client = _client(admin)
    hog = flags["memory_hog"]
    client.post(f"/audit/{hog.pk}/act/", {"action": "acknowledge", "reason": "a debugging session"})
    client.post(f"/audit/{hog.pk}/act/", {"action": "exclude", "reason": "a benchmark"})
    assert AuditEntry.objects.count() == 2
    trail = client.get(f"/jobs/{hog.job_id}/").content.decode()
    table = _text(trail[trail.index('id="audit-trail"') : trail.index("</table>", trail.index('id="audit-trail"'))])
    assert "acknowledged (Memory Hog)" in table and "status: Open → Acknowledged" in table
    assert "excluded from the team's bill (Memory Hog)" in table and "team's bill: on it → excluded" in table
    assert "{'" not in table and "{&#x27;" not in trail


def test_the_team_page_and_the_weekly_report_count_the_same_findings(world) -> None:
    fleet, flags, admin, member = world
    # given an admin acknowledged one of two memory hogs (a debugging session)
    _client(admin).post(f"/audit/{flags['memory_hog'].pk}/act/", {"action": "acknowledge", "reason": "debugging"})
    # when the team's member opens the team's page, and the week's report is built
    html = _client(member).get(f"/teams/{fleet.team.pk}/", {"start": "2026-11-02", "end": "2026-11-09"}).content
    html = html.decode()
    report = report_build(team=fleet.team, week_start=T0.date())
    # then the page lists both hogs with their status, and counts as waste the one the report counts
    waste = html[html.index('id="waste"') : html.index("</table>", html.index('id="waste"'))]
    rows = dict(
        re.findall(r'data-job-key="([^"]+)" data-kind="memory_hog" data-status="\w+" data-counted="(\d)"', waste)
    )
    assert rows == {"slurm/hog": "0", "slurm/hog2": "1"}
    assert "Acknowledged" in _text(waste) and "not counted" in _text(waste)
    [line] = [line for line in report.waste if line.kind == "memory_hog"]
    assert line.jobs == 1
    assert "as the weekly report counts them" in _text(html[html.index('id="waste-rule"') :])


def test_a_gpu_level_finding_is_acknowledged_from_the_queue_and_logged_on_its_gpu_hour(world) -> None:
    fleet, flags, admin, member = world
    reset = flags["counter_reset"]
    client = _client(admin)
    # given the queue offers the finding's own decisions only (no job to exclude or move), each with a label
    html = client.get("/audit/", {"kind": "counter_reset"}).content.decode()
    row = html[html.index(f'data-flag="{reset.pk}"') :]
    form = row[: row.index("</form>")]
    assert 'value="acknowledge"' in form and 'value="dispute"' in form
    assert 'value="exclude"' not in form and 'name="team"' not in form
    assert f'aria-label="Decision on finding #{reset.pk}"' in form
    # when the admin acknowledges it (a known driver reset), once without a reason, once with one
    client.post(f"/audit/{reset.pk}/act/", {"action": "acknowledge", "reason": " "})
    assert AuditEntry.objects.count() == 0
    client.post(f"/audit/{reset.pk}/act/", {"action": "exclude", "reason": "no job here"})
    assert AuditEntry.objects.count() == 0
    answer = client.post(f"/audit/{reset.pk}/act/", {"action": "acknowledge", "reason": "driver update"}, follow=True)
    # then the finding is acknowledged and the log names its GPU and hour, with no job
    reset.refresh_from_db()
    assert reset.status == Flag.Status.ACKNOWLEDGED
    [entry] = AuditEntry.objects.all()
    assert (entry.job_id, entry.gpu_id, entry.hour) == (None, fleet.gpus[2].pk, T0 + HOUR)
    assert entry.flag_id == reset.pk
    assert (entry.before, entry.after) == ({"status": "open"}, {"status": "acknowledged"})
    assert "GPU c1-n0/2 at 2026-11-02 01:00: acknowledge recorded." in answer.content.decode()
    # and the audit log's API and CSV show it on its GPU-hour
    [logged] = client.get("/api/audit-log/").json()["results"]
    assert logged["job"] is None and logged["job_key"] is None
    assert logged["gpu_uuid"] == fleet.gpus[2].uuid and logged["hour"].startswith("2026-11-02T01:00")
    csv = client.get("/api/audit-log/", {"format": "csv"}).content.decode()
    assert fleet.gpus[2].uuid in csv
    # and a member may not decide on it
    assert _client(member).post(f"/audit/{reset.pk}/act/", {"action": "dispute", "reason": "x"}).status_code == 403
    assert AuditEntry.objects.count() == 1
