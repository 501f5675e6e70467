"""Job groups' runs by outcome read once (apps.rollups.outcome_selectors.job_groups_outcome_sums: each run summed, then
the runs, from the jobs whose days reach into the period): on a random fleet and any period, the same figures to the
last bit as one sum of the rows per group and outcome, each run's cost rounded as in Python, for whoever asks."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Case, CharField, Count, Value, When

from apps.core.units.aggregates import footprint_sums
from apps.core.units.money import round_minor
from apps.fleet.models import TeamMembership, team_scoped
from apps.jobs.models import JobGpuHour
from apps.jobs.states import OUTCOMES, JobState
from apps.rollups.outcome_selectors import job_group_outcomes, job_group_outcomes_booked, job_groups_outcome_sums
from tests.factories import (
    ClusterFactory,
    GpuFactory,
    JobFactory,
    JobGpuHourFactory,
    JobGroupFactory,
    SiteFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db

DAY0 = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _world(rng: random.Random) -> dict[str, Any]:
    """Runs of three groups (and some in none) over six days, of two teams on two clusters of one site, in every
    state, with random figures and costs (exact halves of a cent among them); most with their days recorded as their
    summary records them, a few without."""
    site = SiteFactory()
    clusters = [ClusterFactory(site=site), ClusterFactory(site=site)]
    gpus = [GpuFactory(node__cluster=clusters[k % 2]) for k in range(6)]
    teams = [TeamFactory(), TeamFactory()]
    groups = [JobGroupFactory() for _ in range(3)]
    for k in range(40):
        first = rng.randrange(6 * 24 - 1)
        hours = sorted({first + rng.randrange(40) for _ in range(rng.randint(1, 4))})
        job = JobFactory(
            cluster=clusters[k % 2], team=rng.choice(teams), job_group=rng.choice([*groups, None]),
            state=rng.choice(list(JobState)).value, start=DAY0 + first * HOUR,
        )  # fmt: skip
        for hour in hours:
            JobGpuHourFactory(
                job=job, gpu=rng.choice(gpus[k % 2 :: 2]), hour=DAY0 + hour * HOUR, energy_j=rng.uniform(0, 2.6e6),
                occupancy_s=rng.uniform(0, 3600), facility_kwh=rng.uniform(0, 1), operational_kg=rng.uniform(0, 0.4),
                embodied_kg=rng.uniform(0, 0.05), server_kwh=rng.uniform(0, 0.2),
                cost=rng.choice([Decimal(rng.randrange(10**7)) / 10**6, Decimal("0.005"), Decimal("1.125")]),
            )  # fmt: skip
        if rng.random() < 0.85:  # as the job's summary records its days
            job.first_day, job.last_day = (DAY0 + hours[0] * HOUR).date(), (DAY0 + hours[-1] * HOUR).date()
            job.save(update_fields=["first_day", "last_day"])
    admin = User.objects.create_user("root", is_staff=True)
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=teams[0])
    return {"groups": groups, "users": [admin, member]}


def _from_rows(user: Any, start: datetime, end: datetime, groups: list[int]) -> tuple[dict, dict, set[int]]:
    """The oracle: one sum of the rows per group and outcome (as the API summed them before), each run's cost
    rounded in Python, and the rows' clusters."""
    rows = team_scoped(
        JobGpuHour.objects.filter(hour__gte=start, hour__lt=end, job__job_group__in=groups), user,
        team_path="job__team",
    )  # fmt: skip
    outcome = Case(
        *[When(job__state__in=[s.value for s in info.states], then=Value(key)) for key, info in OUTCOMES.items()],
        default=Value("other"), output_field=CharField(),
    )  # fmt: skip
    sums = {
        (r.pop("job__job_group"), r.pop("outcome")): r
        for r in rows.annotate(outcome=outcome)
        .values("job__job_group", "outcome")
        .annotate(run_count=Count("job", distinct=True), **footprint_sums())
        .order_by()
    }
    per_run: dict[tuple[int, str, int], Decimal] = defaultdict(Decimal)
    for group, key, job, cost in rows.annotate(outcome=outcome).values_list("job__job_group", "outcome", "job", "cost"):
        per_run[(group, key, job)] += cost
    costs: dict[tuple[int, str], list[Decimal]] = defaultdict(list)
    for (group, key, _), cost in per_run.items():
        costs[(group, key)].append(cost)
    return sums, costs, set(rows.values_list("gpu__node__cluster", flat=True))


def _periods(rng: random.Random) -> list[tuple[datetime, datetime]]:
    periods = [(DAY0, DAY0 + 8 * 24 * HOUR), (DAY0 + 24 * HOUR, DAY0 + 48 * HOUR), (DAY0 + 5 * HOUR, DAY0 + 7 * HOUR)]
    for _ in range(8):
        a, b = sorted(DAY0 + timedelta(minutes=rng.randrange(-600, 8 * 24 * 60)) for _ in range(2))
        periods.append((a, b + HOUR))
    return periods


@pytest.mark.parametrize("seed", range(3))
def test_outcome_sums_are_the_rows_sums_and_each_run_rounded_on_a_random_fleet(seed: int) -> None:
    # given a random fleet of runs in groups
    rng = random.Random(seed)
    world = _world(rng)
    groups = [g.pk for g in world["groups"]]
    for user in world["users"]:
        for start, end in _periods(rng):
            # when their runs are read by outcome
            found = job_groups_outcome_sums(user=user, start=start, end=end, groups=groups)
            # then each group's outcome is its rows' sums to the last bit, with each of its runs' costs
            sums, costs, clusters = _from_rows(user, start, end, groups)
            assert {k: {n: r[n] for n in sums[k]} for k, r in found.sums.items()} == sums, (user, start, end)
            assert {k: sorted(v) for k, v in found.run_costs.items()} == {k: sorted(v) for k, v in costs.items()}
            assert set(found.clusters) == clusters
            for currency in ("EUR", "JPY", "KWD"):
                expected = {k: sum((round_minor(c, currency) for c in v), Decimal(0)) for k, v in costs.items()}
                assert found.costs_minor(currency) == expected


def test_the_booked_document_is_job_group_outcomes_with_its_costs_in_minor_units() -> None:
    # given a random fleet of runs in groups
    world = _world(random.Random(11))
    admin = world["users"][0]
    start, end = DAY0 + 5 * HOUR, DAY0 + 100 * HOUR
    # when the document and its booked costs are read at once
    doc, booked = job_group_outcomes_booked(user=admin, start=start, end=end)
    # then the document is job_group_outcomes', and each cost its runs' rounded in the document's currency
    assert doc == job_group_outcomes(user=admin, start=start, end=end)
    assert doc["currency"] == "EUR" and any(g["total"]["jobs"] for g in doc["groups"])
    _, costs, _ = _from_rows(admin, start, end, [g.pk for g in world["groups"]])
    assert booked == {k: sum((round_minor(c, "EUR") for c in v), Decimal(0)) for k, v in costs.items()}
