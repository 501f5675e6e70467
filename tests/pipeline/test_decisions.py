"""apps.pipeline.decisions: an admin's decision and what follows from it, in one transaction. A finding acknowledged
stops counting as its team's waste; a rule's decisions are taken only on the findings its preview counted (else
nothing is written) and derived once; a job left out of its team's bill leaves the team's daily sums by its cost and
comes back to the cent; a job moved to another team moves its sums, the fleet's total unchanged; a decision whose
derivation fails leaves no decision behind. The decisions' own rules (reasons, admins only, the log):
tests/waste/test_audit.py; the waste per day they keep: tests/rollups/test_team_waste_days.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Sum

from apps.carbon.models import JobGroup
from apps.fleet.models import Team
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline import decisions
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups.models import TeamDay, TeamWasteDay
from apps.waste.audit import AuditError
from apps.waste.kinds import FlagKind, FlagStatus
from apps.waste.models import AuditEntry, Flag
from apps.waste.selectors import rule_matches
from apps.waste.triage import BulkRule, selection_digest
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 2, 8, tzinfo=UTC)


class World:
    def __init__(self) -> None:
        fleet = fleet_build(servers=1, gpus_per_server=3)
        intensity_set("TEST", [0.3] * 24, start=START - 8 * HOUR)
        self.cluster, self.vision = fleet.cluster, fleet.team
        self.nlp = Team.objects.create(name="nlp")
        self.jobs: dict[str, Job] = {}
        # two failed runs (each a failed_run finding, its waste), and a good one; all busy on their GPUs
        for key, gpu, hours, failed in (("slurm/1", 0, 4, True), ("slurm/2", 1, 2, True), ("slurm/3", 2, 3, False)):
            job = job_run(fleet, key=key, gpus=[fleet.gpus[gpu]], hours=hours, power_w=300.0, start=START)
            JobGpuHour.objects.filter(job=job).update(sm_s=3000.0)
            job.state, job.exit_code, job.signal = ("failed", 1, 0) if failed else ("completed", 0, 0)
            job.scheduler, job.job_id, job.last_seen = "slurm", key.split("/")[1], START + hours * HOUR
            job.scheduler_start, job.scheduler_end, job.scheduler_seen_at = START, job.last_seen, job.last_seen
            job.save()
        with transaction.atomic():
            derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
        self.jobs = {j.job_key: j for j in Job.objects.all()}
        self.admin = User.objects.create_user("root", is_staff=True)

    def finding(self, key: str) -> Flag:
        return Flag.objects.get(kind=FlagKind.FAILED_RUN, job=self.jobs[key])


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Scope, set[Fact]]]:
    """Each derivation a decision asks for (and runs)."""
    calls: list[tuple[Scope, set[Fact]]] = []
    real = decisions.derive

    def spy(scope: Scope, *, changed: Any) -> Any:
        calls.append((scope, set(changed)))
        return real(scope, changed=changed)

    monkeypatch.setattr(decisions, "derive", spy)
    return calls


def _team_cost(team: Team) -> Decimal:
    return TeamDay.objects.filter(team=team).aggregate(total=Sum("cost"))["total"] or Decimal(0)


def _waste_cost(team: Team) -> Decimal:
    return TeamWasteDay.objects.filter(team=team).aggregate(total=Sum("cost"))["total"] or Decimal(0)


def test_an_acknowledged_finding_no_longer_counts_as_its_teams_waste(world: World, derived) -> None:
    waste_before = _waste_cost(world.vision)
    flag = world.finding("slurm/1")
    assert waste_before > 0
    # when an admin acknowledges one of the two failed runs
    entry = decisions.flag_review(actor=world.admin, flag=flag, action="acknowledge", reason="known driver fault")
    # then the finding is acknowledged, logged, and its team's waste is the other run's
    flag.refresh_from_db()
    assert flag.status == FlagStatus.ACKNOWLEDGED and entry.action == "acknowledge" and entry.job_id == flag.job_id
    assert 0 < _waste_cost(world.vision) < waste_before
    assert derived == [(Scope.jobs([flag.job_id]), {Fact.FINDING_STATUS})]
    # and disputing it instead counts it again (a disputed finding still counts)
    decisions.flag_review(actor=world.admin, flag=flag, action="dispute", reason="looks wrong")
    assert _waste_cost(world.vision) == waste_before


def test_a_decision_whose_derivation_fails_leaves_no_decision(world: World, monkeypatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a step failed")

    monkeypatch.setattr(decisions, "derive", fail)
    flag = world.finding("slurm/1")
    with pytest.raises(RuntimeError):
        decisions.flag_review(actor=world.admin, flag=flag, action="acknowledge", reason="x")
    flag.refresh_from_db()
    assert flag.status == FlagStatus.OPEN and not AuditEntry.objects.exists()
    with pytest.raises(RuntimeError):
        decisions.job_exclude(actor=world.admin, job=world.jobs["slurm/3"], exclude=True, reason="test run")
    assert not Job.objects.get(job_key="slurm/3").excluded_from_bill and not AuditEntry.objects.exists()


def _rule() -> BulkRule:
    return BulkRule(kind=FlagKind.FAILED_RUN, under=Decimal("1000"), currency="EUR", start=START - timedelta(days=1),
                    end=START + timedelta(days=1))  # fmt: skip


def test_a_rule_decides_only_the_findings_its_preview_counted(world: World, derived) -> None:
    rule = _rule()
    preview = rule_matches(rule=rule)
    assert len(preview) == 2
    # when a finding is decided on its own meanwhile, the preview's digest no longer matches what the rule takes
    decisions.flag_review(actor=world.admin, flag=world.finding("slurm/2"), action="acknowledge", reason="known")
    derived.clear()
    with pytest.raises(AuditError, match=r"changed since the preview \(1 now\)"):
        decisions.flags_review_by_rule(actor=world.admin, rule=rule, action="acknowledge", reason="bulk",
                                       selection=selection_digest(preview))  # fmt: skip
    # then nothing of the rule was written
    assert world.finding("slurm/1").status == FlagStatus.OPEN and AuditEntry.objects.count() == 1 and derived == []
    # with the preview made again, the one left is decided, and its job derived once
    entries = decisions.flags_review_by_rule(actor=world.admin, rule=rule, action="acknowledge", reason="bulk",
                                             selection=selection_digest(rule_matches(rule=rule)))  # fmt: skip
    assert [e.job_id for e in entries] == [world.jobs["slurm/1"].pk]
    assert derived == [(Scope.jobs([world.jobs["slurm/1"].pk]), {Fact.FINDING_STATUS})]
    assert _waste_cost(world.vision) == 0


def test_a_rule_with_nothing_left_to_take_writes_nothing_and_is_no_error(world: World, derived) -> None:
    Flag.objects.update(status=FlagStatus.ACKNOWLEDGED)
    assert decisions.flags_review_by_rule(actor=world.admin, rule=_rule(), action="dispute", reason="bulk",
                                          selection="whatever") == []  # fmt: skip
    assert derived == [] and not AuditEntry.objects.exists()


def test_a_job_left_out_of_its_bill_leaves_its_teams_sums_by_its_cost_and_comes_back_to_the_cent(
    world: World, derived
) -> None:
    job = world.jobs["slurm/3"]
    before = _team_cost(world.vision)
    decisions.job_exclude(actor=world.admin, job=job, exclude=True, reason="a benchmark, not the team's")
    job.refresh_from_db()
    assert job.excluded_from_bill and job.cost > 0
    assert _team_cost(world.vision) == before - job.cost
    assert derived == [(Scope.jobs([job.pk]), {Fact.BILLING})]
    decisions.job_exclude(actor=world.admin, job=job, exclude=False, reason="it was the team's")
    assert _team_cost(world.vision) == before


def test_a_job_moved_to_another_team_moves_its_sums_and_the_total_stays(world: World, derived) -> None:
    job = world.jobs["slurm/1"]
    total = _team_cost(world.vision) + _team_cost(world.nlp)
    vision_waste = _waste_cost(world.vision)
    decisions.job_reassign(actor=world.admin, job=job, reason="nlp's run", team=world.nlp)
    job.refresh_from_db()
    assert job.team == world.nlp and job.team_locked
    assert _team_cost(world.nlp) == job.cost and _team_cost(world.vision) + _team_cost(world.nlp) == total
    assert _waste_cost(world.nlp) > 0 and _waste_cost(world.vision) + _waste_cost(world.nlp) == vision_waste
    assert derived == [(Scope.jobs([job.pk]), {Fact.BILLING})]


def test_a_job_moved_to_another_group_is_derived_as_a_group_change(world: World, derived) -> None:
    group = JobGroup.objects.create(name="nightly", match_kind="name", match_value="x")
    job = world.jobs["slurm/3"]
    entry = decisions.job_reassign(actor=world.admin, job=job, reason="it is the nightly run", job_group=group)
    job.refresh_from_db()
    assert job.job_group == group and job.group_locked and entry.after["job_group"] == "nightly"
    assert derived == [(Scope.jobs([job.pk]), {Fact.JOB_GROUP})]
