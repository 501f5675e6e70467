"""A team's stored waste per UTC day (apps.rollups.models.TeamWasteDay, apps.rollups.services.team_waste_days_refresh):
what the team's rollups of whole days read, kept by the derivation and by an admin's decisions to what period_waste
gives from the findings at every moment."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.pipeline import decisions
from apps.pipeline.derive import Fact, Scope, derive
from apps.rollups.models import TeamWasteDay
from apps.rollups.selectors import team_rollup
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste
from tests.carbon.fleet_builder import HOUR, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 29, 20, tzinfo=UTC)  # the runs cross two midnights
DAYS = (date(2026, 11, 29), date(2026, 12, 3))


def _world() -> tuple[Team, Team, User]:
    """Two teams' failed runs that sat idle on whole GPUs (an idle allocation and a failed run each, on the same
    GPU-hours), derived from their rows as an ingest derives them."""
    fleet = fleet_build(servers=1, gpus_per_server=4)
    intensity_set("TEST", [0.3] * 24 * 10, start=START - timedelta(days=1))
    nlp = Team.objects.create(name="nlp")
    for key, team, first, hours in (("slurm/1", nlp, 0, 40), ("slurm/2", nlp, 2, 7), ("slurm/3", fleet.team, 3, 30)):
        job = job_run(fleet, key=key, gpus=fleet.gpus[first : first + 2 if key == "slurm/1" else first + 1],
                      hours=hours, power_w=121.7, start=START)  # fmt: skip
        job.team, job.state, job.exit_code, job.signal = team, "failed", 1, 0
        job.scheduler, job.job_id, job.last_seen = "slurm", key.split("/")[1], START + hours * HOUR
        job.scheduler_start, job.scheduler_end, job.scheduler_seen_at = START, job.last_seen, job.last_seen
        job.save()
    with transaction.atomic():
        derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
    return nlp, fleet.team, User.objects.create_user("root", is_staff=True)


def _stored(team: Team) -> dict[date, tuple[float, float, Decimal]]:
    return {d.day: (d.energy_j, d.gpu_hours, d.cost) for d in TeamWasteDay.objects.filter(team=team).order_by("day")}


def _from_findings(team: Team) -> dict[date, tuple[float, float, Decimal]]:
    """What period_waste gives per UTC day from the team's counted findings, read now."""
    start = datetime.combine(DAYS[0], datetime.min.time(), tzinfo=UTC)
    end = datetime.combine(DAYS[1], datetime.min.time(), tzinfo=UTC)
    found = period_waste(flags=counted_flags(Flag.objects.filter(job__team=team)), start=start, end=end)
    return {day: (part.energy_j, part.gpu_hours, part.cost) for day, part in sorted(found.per_day.items())}


def _rollup_waste(team: Team) -> Decimal:
    start = datetime.combine(DAYS[0], datetime.min.time(), tzinfo=UTC)
    end = datetime.combine(DAYS[1], datetime.min.time(), tzinfo=UTC)
    doc = team_rollup(team=team, start=start, end=end, granularity="day")
    return sum((p["waste"]["cost"] for p in doc["periods"]), Decimal(0))


def test_the_derivation_stores_each_days_waste_as_period_waste_counts_it() -> None:
    nlp, vision, _ = _world()
    for team in (nlp, vision):
        stored = _stored(team)
        # then every day the team's findings reach is stored, to the last bit of each float
        assert stored == _from_findings(team)
        assert len(stored) >= 2  # (the runs cross midnight)


def test_an_acknowledged_finding_leaves_the_teams_waste_at_once_and_a_disputed_one_stays() -> None:
    nlp, _, admin = _world()
    before = _rollup_waste(nlp)
    job = Job.objects.get(job_key="slurm/2")
    # when the admin acknowledges both findings of one job (a run they expected to fail), and disputes another's
    for flag in Flag.objects.filter(job=job, kind__in=["idle_allocation", "failed_run"]):
        decisions.flag_review(actor=admin, flag=flag, action="acknowledge", reason="expected: a driver test")
    first = Flag.objects.filter(job__job_key="slurm/1", kind="failed_run").get()
    decisions.flag_review(actor=admin, flag=first, action="dispute", reason="the exit code is the wrapper's")
    # then the stored days are what the findings now give, and the rollup lost that job's waste only
    assert _stored(nlp) == _from_findings(nlp)
    assert Decimal(0) < _rollup_waste(nlp) < before


def test_a_job_moved_to_another_team_takes_its_waste_days_with_it() -> None:
    nlp, vision, admin = _world()
    nlp_before, vision_before = _rollup_waste(nlp), _rollup_waste(vision)
    # when an admin charges nlp's long run to vision
    decisions.job_reassign(actor=admin, job=Job.objects.get(job_key="slurm/1"), team=vision, reason="their model")
    # then both teams' stored days follow: vision's waste grew, nlp's shrank
    assert _stored(nlp) == _from_findings(nlp)
    assert _stored(vision) == _from_findings(vision)
    assert _rollup_waste(vision) > vision_before
    assert Decimal(0) < _rollup_waste(nlp) < nlp_before


def test_a_finding_raised_by_a_later_hour_counts_on_every_day_the_job_ran() -> None:
    # given a team whose long run had no finding yet (its findings withdrawn, as before its last hours)
    nlp, _, _ = _world()
    job = Job.objects.get(job_key="slurm/1")
    Flag.objects.filter(job=job).delete()
    with transaction.atomic():
        derive(Scope.jobs([job.pk]), changed={Fact.FINDING_STATUS})
    assert _stored(nlp) == _from_findings(nlp)
    without = _rollup_waste(nlp)
    # when an hour of the run is ingested again, and its findings are raised once more from the run's rows
    hour = START + 39 * HOUR
    with transaction.atomic():
        derive(
            Scope.hour(cluster_id=job.cluster_id, hour=hour, job_ids=[job.pk], ingested_through=hour + HOUR),
            changed={Fact.JOB_ROWS},
        )
    # then the days before that hour carry the finding's waste too, not its last day alone
    stored = _stored(nlp)
    assert stored == _from_findings(nlp)
    assert _rollup_waste(nlp) > without
