"""What a job group's runs came to, split by how they ended (OUTCOMES: delivered, failed, stopped, running or
unknown), and the failed runs as the pages show them (the `failed_run` findings, per team and one by one): of the
jobs the user may see."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.aggregates import ArrayAgg
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Case, CharField, Count, QuerySet, Value, When

from apps.carbon.models import JobGroup
from apps.core.units.aggregates import footprint_sums, numeric_sums
from apps.core.units.footprint import FOOTPRINT_COLUMNS, Footprint
from apps.core.units.money import round_minor
from apps.fleet.models import Cluster, Team, team_scoped
from apps.jobs.models import Job, JobGpuHour, JobQuerySet, days_reach
from apps.jobs.states import OUTCOMES
from apps.waste.kinds import FlagKind

from .selectors import clusters_basis, period_figures

User = AbstractBaseUser | AnonymousUser


def _outcome_figures(fp: Footprint, jobs: int) -> dict[str, Any]:
    return {"jobs": jobs, **period_figures(fp), "energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg}


def _outcome_case() -> Case:
    """A job-GPU-hour's outcome key (OUTCOMES) from its job's state."""
    return Case(
        *[When(job__state__in=[s.value for s in info.states], then=Value(key)) for key, info in OUTCOMES.items()],
        default=Value("other"),
        output_field=CharField(),
    )


# Job groups' runs by outcome from each run's sums (`{per_run}`: per group, outcome and job, its rows' footprint
# columns as exact decimals and their clusters): per group and outcome the runs, their sums read as floats (the same
# to the last bit as summed from the rows at once), each run's cost (rounded in Python, in the currency of the rows'
# sites) and, on every row, the clusters of all the rows.
_OUTCOME_SUMS_SQL = """
WITH per_run AS ({per_run})
SELECT "job__job_group", outcome, count(*) AS run_count, {sums}, array_agg(cost) AS run_costs,
       (SELECT array_agg(DISTINCT c) FROM per_run, unnest(per_run.clusters) AS c) AS clusters
FROM per_run GROUP BY "job__job_group", outcome
"""


@dataclass(frozen=True)
class OutcomeSums:
    """Job groups' runs of a period by outcome (OUTCOMES), read once: per (group id, outcome) the runs' count and
    footprint sums (`sums`: a row for Footprint.from_sums, with `run_count`) and each run's cost (`run_costs`), and
    the clusters of their rows (whose sites give the intensity basis and the currency)."""

    sums: dict[tuple[int, str], dict[str, Any]]
    run_costs: dict[tuple[int, str], list[Decimal]]
    clusters: list[int]

    def costs_minor(self, currency: str) -> dict[tuple[int, str], Decimal]:
        """Per (group id, outcome): the sum of its runs' costs, each rounded half-even in `currency`."""
        return {
            key: sum((round_minor(c, currency) for c in costs), Decimal(0)) for key, costs in self.run_costs.items()
        }


def job_groups_outcome_sums(*, user: User, start: datetime, end: datetime, groups: Iterable[int]) -> OutcomeSums:
    """The groups' runs (jobs the user may see: a member, their teams' only) with job-GPU-hours in [start, end), by
    outcome, from one read of those rows (each run summed, then the runs)."""
    # Only the jobs whose days reach into the period can have rows in it: the groups' jobs of the period come by
    # index (job_group_team_last_day), not every job of the groups.
    days = days_reach(start=start, end=end, path="job__")
    rows = team_scoped(
        JobGpuHour.objects.filter(days, hour__gte=start, hour__lt=end, job__job_group__in=list(groups)), user,
        team_path="job__team",
    )  # fmt: skip
    per_run = (
        rows.annotate(outcome=_outcome_case())
        .values("job__job_group", "outcome", "job_id")
        .annotate(clusters=ArrayAgg("gpu__node__cluster", distinct=True), **numeric_sums())
        .order_by()
    )
    columns = ", ".join(
        "SUM(cost) AS cost" if name == "cost" else f"SUM({name})::float8 AS {name}" for name in FOOTPRINT_COLUMNS
    )
    try:
        inner, params = per_run.query.sql_with_params()
    except EmptyResultSet:  # no team to see
        return OutcomeSums({}, {}, [])
    with connection.cursor() as cursor:
        cursor.execute(_OUTCOME_SUMS_SQL.format(per_run=inner, sums=columns), params)
        names = [c.name for c in cursor.description]
        found = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    return OutcomeSums(
        sums={(r["job__job_group"], r["outcome"]): r for r in found},
        run_costs={(r["job__job_group"], r["outcome"]): [c or Decimal(0) for c in r["run_costs"]] for r in found},
        clusters=sorted(found[0]["clusters"]) if found else [],
    )


def job_group_outcome_costs_minor(
    *, user: User, start: datetime, end: datetime, group: JobGroup, currency: str
) -> dict[str, Decimal]:
    """job_group_outcomes' cost per outcome of one group in minor units: the sum of its runs' costs in the
    period (of the jobs the user may see), each rounded half-even, in one query."""
    costs = job_groups_outcome_costs_minor(user=user, start=start, end=end, groups=[group.pk], currency=currency)
    return {outcome: cost for (_, outcome), cost in costs.items()}


def job_groups_outcome_costs_minor(
    *, user: User, start: datetime, end: datetime, groups: list[int], currency: str
) -> dict[tuple[int, str], Decimal]:
    """job_group_outcome_costs_minor of several groups (their ids) at once, per (group id, outcome), in one query."""
    return job_groups_outcome_sums(user=user, start=start, end=end, groups=groups).costs_minor(currency)


def job_group_outcomes(
    *, user: User, start: datetime, end: datetime, groups: QuerySet[JobGroup] | None = None
) -> dict[str, Any]:
    """Each job group's runs of [start, end) split by how they ended (OUTCOMES): GPU-hours, energy, CO2e and
    cost of the completed runs, the failed ones, the cancelled or preempted ones and those still running or of
    unknown state; "what the delivered model cost, failures included". Summed from the job-GPU-hours in the
    period (as the group's rollup), of the jobs the user may see (a member: their teams' runs only), in one
    aggregate query; every group of `groups` (default: all) is listed, with zeros where it had no run."""
    return job_group_outcomes_booked(user=user, start=start, end=end, groups=groups)[0]


def job_group_outcomes_booked(
    *, user: User, start: datetime, end: datetime, groups: QuerySet[JobGroup] | None = None
) -> tuple[dict[str, Any], dict[tuple[int, str], Decimal]]:
    """job_group_outcomes, and each group's cost per outcome in minor units as job_groups_outcome_costs_minor
    books it in the document's currency, from the same read of the rows."""
    groups = (groups if groups is not None else JobGroup.objects.all()).order_by("name")
    listed = list(groups)
    found = job_groups_outcome_sums(user=user, start=start, end=end, groups=[g.pk for g in listed])
    basis, zones, currency = clusters_basis(Cluster.objects.filter(pk__in=found.clusters))
    out = []
    for group in listed:
        split, total, total_jobs = [], Footprint(), 0
        for key, info in OUTCOMES.items():
            row = found.sums.get((group.pk, key), {})
            fp, jobs = Footprint.from_sums(row), row.get("run_count", 0)
            split.append({"outcome": key, "label": info.label, **_outcome_figures(fp, jobs)})
            total, total_jobs = total + fp, total_jobs + jobs
        failed_cost = next(o["cost"] for o in split if o["outcome"] == "failed")
        out.append(
            {
                "id": group.pk,
                "name": group.name,
                "outcomes": split,
                "total": _outcome_figures(total, total_jobs),
                "failed_cost_share": float(failed_cost / total.cost) if total.cost else None,
            }
        )
    doc = {"currency": currency, "intensity_basis": basis, "intensity_zones": zones, "groups": out}
    return doc, found.costs_minor(currency)


# --- failed runs, as the pages show them ------------------------------------------------------------------


def failed_run_jobs(*, user: User, start: datetime, end: datetime, team: Team | None = None) -> JobQuerySet:
    """The failed runs the user may see among the jobs that ran in [start, end) (as the dashboards pick them:
    started before its end, seen since its start): jobs with a `failed_run` finding, whatever its review,
    costliest first. Their figures are the whole run's, as the finding's evidence."""
    jobs = Job.objects.visible_to(user).filter(start__lt=end).seen_since(start)
    if team is not None:
        jobs = jobs.filter(team=team)
    return jobs.filter(flag_rows__kind=FlagKind.FAILED_RUN).order_by("-cost", "id")


# A job's own footprint columns (its rows' sums, stored on it: GPU-hours rather than occupancy seconds).
JOB_FOOTPRINT_COLUMNS = ("energy_j", "gpu_hours", "facility_kwh", "operational_kg", "embodied_kg", "cost")


def failed_run_totals(*, user: User, start: datetime, end: datetime, team: Team | None = None) -> list[dict[str, Any]]:
    """The failed runs of `failed_run_jobs` summed per team (and currency), in one aggregate query: runs,
    GPU-hours, GPU and facility energy, CO2e; and cost, the sum of the runs' rounded costs (as /api/jobs/ shows
    each), from their costs read in a second query."""
    failed = failed_run_jobs(user=user, start=start, end=end, team=team)
    billed: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    for team_id, currency, cost in failed.values_list("team_id", "currency", "cost").order_by():
        billed[(team_id, currency)] += round_minor(cost, currency)
    rows = (
        failed.values("team_id", "team__name", "currency")
        .annotate(
            runs=Count("id"),
            **footprint_sums(columns=JOB_FOOTPRINT_COLUMNS),
        )
        .order_by("team__name", "currency")
    )
    out = []
    for r in rows:
        fp = Footprint.from_sums(r)
        out.append(
            {"team_id": r["team_id"], "team": r["team__name"], "currency": r["currency"], "runs": r["runs"]}
            | period_figures(fp)
            | {"energy_kwh": fp.gpu_kwh, "co2e_kg": fp.co2e_kg, "cost": billed[(r["team_id"], r["currency"])]}
        )
    return out
