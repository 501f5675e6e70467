"""The derivation pipeline: every figure that follows from the stored rows, in one readable order.

Whoever changes an input (the ingest, `apply_config`, `import_intensity`, an admin's edit or an audit
decision) writes it, then calls `derive` with the scope it touched and what changed. `STEPS` below is
the order, each step with the inputs it reads and the facts it produces: a step runs when something it
reads changed in this run, and what it produces counts as changed for the steps after it. No step calls
another; the services they call do one thing each and trigger nothing.

Every step is a function of the stored rows and settings, so a run can be repeated (a retry, a
re-ingest) and gives the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum

from apps.carbon import services as carbon
from apps.carbon.services import FactorBook, FootprintRefresh
from apps.core.kept import data_changed
from apps.fleet.models import Cluster
from apps.jobs import selectors as job_reads
from apps.jobs import services as jobs
from apps.jobs.models import Job, JobGpuHour
from apps.jobs.summary import JobGpuTotals, agent_spans
from apps.rollups import selectors as rollup_reads
from apps.rollups import services as rollups
from apps.telemetry import estimates
from apps.telemetry import selectors as telemetry_reads
from apps.telemetry.models import GpuHour
from apps.waste import selectors as waste_reads
from apps.waste import services as flags

HOUR = timedelta(hours=1)


class Fact(StrEnum):
    """What a run knows has changed: inputs the caller wrote, and what the steps produce from them."""

    # Written by the callers of `derive`:
    JOB_ROWS = "job_rows"  # the ingest replaced hours of job-GPU rows and GPU-hours
    GROUP_RULES = "group_rules"  # job groups' match rules or flexibility (config, admin)
    FACTORS = "factors"  # PUE, node overhead, intensity, prices, embodied carbon, nodes' server types
    BILLING = "billing"  # a job's team or its exclusion from the bill (an admin's decision)
    JOB_GROUP = "job_group"  # a job's group set by an admin
    SCHEDULER = "scheduler"  # jobs' scheduler records (state, exit code, allocation) written by a sync
    FINDING_STATUS = "finding_status"  # findings acknowledged or disputed (an admin's decision)
    # Produced by the steps:
    GROUPS = "groups"
    ESTIMATES = "estimates"  # occupancy and energy of time nobody saw, charged by the scheduler's allocation
    ROW_FOOTPRINTS = "row_footprints"
    SUMMARIES = "summaries"
    JOB_FOOTPRINTS = "job_footprints"
    FLAGS = "flags"
    DAY_SUMS = "day_sums"
    WASTE_DAYS = "waste_days"


@dataclass(frozen=True)
class Scope:
    """What a change touched. `cluster_ids` None: every cluster; `start`/`end` None: all hours;
    `job_ids`: the jobs whose own rows changed (the ingest knows them; others find them from the rows)."""

    cluster_ids: frozenset[int] | None = None
    start: datetime | None = None
    end: datetime | None = None
    job_ids: frozenset[int] = frozenset()
    ingested_through: datetime | None = None  # for job summaries: how far the cluster's ingest has gone

    @classmethod
    def hour(cls, *, cluster_id: int, hour: datetime, job_ids: Iterable[int], ingested_through: datetime) -> Scope:
        return cls(
            cluster_ids=frozenset([cluster_id]),
            start=hour,
            end=hour + HOUR,
            job_ids=frozenset(job_ids),
            ingested_through=ingested_through,
        )

    @classmethod
    def jobs(cls, job_ids: Iterable[int]) -> Scope:
        ids = frozenset(job_ids)
        clusters = frozenset(Job.objects.filter(pk__in=ids).values_list("cluster_id", flat=True))
        return cls(cluster_ids=clusters, job_ids=ids)


@dataclass
class DeriveRun:
    """One run of the pipeline: its scope, what has changed so far, and what steps hand on."""

    scope: Scope
    changed: set[Fact]
    job_ids: set[int] = field(default_factory=set)  # grows as steps find more jobs to derive
    cluster_ids: set[int] | None = None  # None: all clusters
    refreshed: FootprintRefresh | None = None
    factor_book: FactorBook | None = None
    regrouped_job_ids: set[int] = field(default_factory=set)  # jobs whose group changed
    # Hours whose estimates changed beyond the scope's: a scheduler sync's jobs, or the gap an hour's sightings closed.
    window: tuple[datetime, datetime] | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    job_fields: set[str] = field(default_factory=set)  # fields of `jobs()` the steps changed, not yet stored
    days_moved: set[tuple[int, date]] = field(default_factory=set)  # (cluster, day): a job came into or left it
    # What of each job's counted findings its teams' waste days depend on, before this run's findings steps wrote
    # them (None: no such step ran): a job whose findings changed has its waste changed on every day it ran.
    waste_findings_before: dict[int, frozenset[tuple[object, ...]]] | None = None
    _totals: dict[int, list[JobGpuTotals]] | None = None
    _jobs: list[Job] | None = None
    _cluster_days: set[tuple[int, date]] | None = None

    def jobs(self) -> list[Job]:
        """The run's jobs, loaded once (after the groups and footprints that find them): the steps update
        these objects as they store their figures, so each step reads what the one before wrote. A job whose
        hour rows partly expired is left as it was: summed again, it would lose the hours that are gone."""
        if self._jobs is None:
            # prefetch, not select_related: a cluster, site or group object shared by its jobs, not one per job.
            self._jobs = list(
                Job.objects.filter(pk__any=sorted(self.job_ids), rows_expired=False).prefetch_related(
                    "cluster__site", "job_group"
                )
            )
        return self._jobs

    def totals(self) -> dict[int, list[JobGpuTotals]]:
        """The one per-job aggregate of this run, built once (after the row footprints it sums)."""
        if self._totals is None:
            self._totals = job_reads.job_gpu_totals(job_ids=self.job_ids)
        return self._totals

    def cluster_days(self) -> set[tuple[int, date]]:
        """The (cluster, UTC day) pairs whose daily sums this run may have changed: those of the rows it priced
        again, the days jobs came into or left, and every day of the jobs an admin's decision or a new group
        moved to another team's or group's sums. Read once (by the day sums and the teams' waste days, which run
        after everything that moves them)."""
        if self._cluster_days is not None:
            return self._cluster_days
        pairs = set(self.refreshed.cluster_days) if self.refreshed else set()
        pairs |= self.days_moved
        moved = set(self.regrouped_job_ids)
        if self.changed & {Fact.BILLING, Fact.JOB_GROUP}:
            moved |= self.scope.job_ids
        if moved:
            rows = JobGpuHour.objects.filter(job_id__any=sorted(moved))
            pairs |= {
                (c, h.astimezone(UTC).date())
                for c, h in rows.values_list("gpu__node__cluster_id", "hour").distinct().order_by()
            }
        self._cluster_days = pairs
        return pairs


# --- The steps ------------------------------------------------------------------------------------


def _job_groups(run: DeriveRun) -> None:
    regroup_all = Fact.GROUP_RULES in run.changed
    moved = carbon.job_groups_assign(cluster_ids=None) if regroup_all else carbon.job_groups_assign(job_ids=run.job_ids)
    run.regrouped_job_ids |= moved.keys()
    if moved:
        run.changed.add(Fact.GROUPS)
        run.job_ids |= moved.keys()
        if run.cluster_ids is not None:
            run.cluster_ids |= set(moved.values())


def _gpu_hour_flags(run: DeriveRun) -> None:
    start, end = run.scope.start, run.scope.end
    if start is None or end is None:  # new rows come an hour at a time
        raise ValueError("GPU-hour flags are derived for a window of hours.")
    clusters = Cluster.objects.all() if run.cluster_ids is None else Cluster.objects.filter(pk__in=run.cluster_ids)
    for cluster in clusters:
        rows = list(
            GpuHour.objects.filter(gpu__node__cluster=cluster, hour__gte=start, hour__lt=end).values_list(
                *flags.GPU_HOUR_FLAG_FIELDS, named=True
            )
        )
        hour = start
        while hour < end:
            flags.gpu_hour_flags_replace(cluster=cluster, hour=hour, rows=[r for r in rows if r.hour == hour])
            hour += HOUR


def _unobserved_estimates(run: DeriveRun) -> None:
    """The hours to re-derive: the scope's (an ingested hour), else those a scheduler sync's jobs held or
    held before (their spans now, and their estimated rows so far)."""
    start, end = run.scope.start, run.scope.end
    # An ingest's hour (Scope.hour): its rows are written, its record not yet (a batch's hours have theirs).
    writing = start is not None and end is not None and end - start == HOUR and Fact.JOB_ROWS in run.changed
    if start is None or end is None:
        span = job_reads.scheduler_hours(job_ids=run.scope.job_ids)
        if span is None:
            return
        start, end = span
        run.window = span
    clusters = Cluster.objects.all() if run.cluster_ids is None else Cluster.objects.filter(pk__in=run.cluster_ids)
    for cluster in clusters.order_by("pk"):
        refreshed = estimates.unobserved_estimates_refresh(cluster=cluster, start=start, end=end, writing=writing)
        run.job_ids |= refreshed.job_ids
        if refreshed.start < start:  # the hour's sightings closed a gap before it: its hours are priced again too
            earliest = refreshed.start if run.window is None else min(run.window[0], refreshed.start)
            run.window = (earliest, end)


def _row_footprints(run: DeriveRun) -> None:
    if run.cluster_ids is not None and not run.cluster_ids:
        return
    start, end = run.scope.start, run.scope.end
    if run.window is not None and Fact.FACTORS not in run.changed:
        if start is None and end is None:
            start, end = run.window  # a scheduler sync: the hours its jobs' estimates moved in
        elif start is not None and end is not None:
            start, end = min(start, run.window[0]), max(end, run.window[1])  # an hour that closed an earlier gap
    window = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    run.refreshed = carbon.footprints_refresh(
        cluster_ids=None if run.cluster_ids is None else sorted(run.cluster_ids), **window
    )
    run.factor_book = run.refreshed.book
    run.job_ids |= run.refreshed.job_ids


def _job_summaries(run: DeriveRun) -> None:
    totals = run.totals()
    within_day_before = {job.pk: _within_day(job) for job in run.jobs()}
    jobs.jobs_summary_refresh(
        jobs=run.jobs(),
        totals=totals,
        energy_by_method=job_reads.job_energy_by_method(job_ids=run.job_ids),
        gpu_sampled=telemetry_reads.gpu_sampled_seconds(spans=agent_spans(totals.get(j, []) for j in run.job_ids)),
        ingested_through=run.scope.ingested_through,
        cluster_ingested_through=telemetry_reads.clusters_ingested_through(
            cluster_ids={job.cluster_id for job in run.jobs()}
        ),
        band_rows=telemetry_reads.job_band_rows(job_ids=run.job_ids),
    )
    run.job_fields |= set(jobs.SUMMARY_FIELDS) | set(jobs.BAND_FIELDS)
    # A job within one day has its rounded cost in its team's sums of that day (TeamDay.cost_units), one across
    # days not: where a job came into one day or left it (a job running past midnight), that day is summed again.
    for job in run.jobs():
        before, now = within_day_before[job.pk], _within_day(job)
        if before != now:
            run.days_moved |= {(job.cluster_id, day) for day in (before, now) if day is not None}


def _within_day(job: Job) -> date | None:
    """The one UTC day all the job's hour rows are on, if they are on one."""
    return job.first_day if job.first_day is not None and job.first_day == job.last_day else None


def _job_footprints(run: DeriveRun) -> None:
    carbon.jobs_footprint_sum(jobs=run.jobs(), totals=run.totals(), book=run.factor_book)
    run.job_fields |= set(carbon.JOB_FOOTPRINT_FIELDS)


def _job_figures(run: DeriveRun) -> None:
    jobs.jobs_fields_write(jobs=run.jobs(), fields=run.job_fields)
    run.job_fields.clear()


def _low_coverage_flags(run: DeriveRun) -> None:
    flags.low_coverage_flags_sync(jobs=run.jobs())


def _estimated_intensity_flags(run: DeriveRun) -> None:
    flags.estimated_intensity_flags_sync(jobs=run.jobs())


def _waste_findings_before(run: DeriveRun) -> None:
    if run.waste_findings_before is None:
        run.waste_findings_before = waste_reads.counted_findings_by_job(job_ids=run.job_ids)


def _waste_findings(run: DeriveRun) -> None:
    _waste_findings_before(run)
    flags.job_findings_sync(totals=run.totals(), jobs=run.jobs())


def _unobserved_flags(run: DeriveRun) -> None:
    flags.unobserved_flags_sync(jobs=run.jobs(), totals=run.totals())


def _failed_run_findings(run: DeriveRun) -> None:
    _waste_findings_before(run)
    flags.failed_run_flags_sync(jobs=run.jobs())


def _job_flag_lists(run: DeriveRun) -> None:
    flags.job_flag_lists_sync(job_ids=run.job_ids)


def _day_sums(run: DeriveRun) -> None:
    pairs = run.cluster_days()
    for cluster_id in sorted({c for c, _ in pairs}):  # the order day_sums_refresh locks them in
        rollups.day_sums_refresh(cluster_ids=[cluster_id], days={d for c, d in pairs if c == cluster_id})


def _team_waste_days(run: DeriveRun) -> None:
    # The days a team's waste may have changed on: those whose rows this run priced again or moved (of its jobs with
    # counted findings), and every day of a job whose counted findings changed (raised, withdrawn, decided on, their
    # GPUs) or that moved to another bill. The teams: those jobs', and, where a job moved, every team with waste on
    # its days (the one it left).
    now = waste_reads.counted_findings_by_job(job_ids=run.job_ids)
    before = run.waste_findings_before if run.waste_findings_before is not None else now
    changed = {job_id for job_id in run.job_ids if before.get(job_id) != now.get(job_id)}
    moved = run.changed & {Fact.BILLING, Fact.FINDING_STATUS}
    if moved:
        changed |= run.scope.job_ids
    spans = job_reads.job_days(job_ids=set(now) | changed)
    days = {d for _, d in run.cluster_days()} if now else set()
    teams = {team_id for team_id, _, _ in spans.values()}
    for job_id in changed:
        if job_id in spans:
            _, first, last = spans[job_id]
            days |= {first + timedelta(days=i) for i in range((last - first).days + 1)}
    if Fact.BILLING in run.changed:
        teams |= rollup_reads.teams_with_waste_on(days=days)
    rollups.team_waste_days_refresh(team_ids=teams, days=days)


def _caches_expire(run: DeriveRun) -> None:
    # Every cached rollup and page of the API: one data generation. An ingest's (of the metrics or the scheduler's
    # records) rollups kept before it may be answered until they are prepared again (apps.rollups.documents); any
    # other change is seen at once.
    data_changed(by_ingest=bool(run.changed & {Fact.JOB_ROWS, Fact.SCHEDULER}))


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[DeriveRun], None]
    reads: frozenset[Fact]
    makes: Fact | None
    why: str  # why it stands where it does


def _step(name: str, fn: Callable[[DeriveRun], None], reads: set[Fact], makes: Fact | None, why: str) -> Step:
    return Step(name=name, run=fn, reads=frozenset(reads), makes=makes, why=why)


F = Fact
STEPS: tuple[Step, ...] = (
    _step("job_groups", _job_groups, {F.JOB_ROWS, F.GROUP_RULES, F.SCHEDULER}, None,
          "first: a job's group decides its carbon-shift hint (job footprints) and its group rollup"),
    _step("gpu_hour_flags", _gpu_hour_flags, {F.JOB_ROWS}, F.FLAGS,
          "counter resets and conservation residuals are facts of the GPU-hour rows alone"),
    _step("unobserved_estimates", _unobserved_estimates, {F.JOB_ROWS, F.SCHEDULER}, F.ESTIMATES,
          "time nobody saw, charged to the jobs the scheduler says held the GPU: rows the footprints price"),
    _step("row_footprints", _row_footprints, {F.JOB_ROWS, F.FACTORS, F.ESTIMATES}, F.ROW_FOOTPRINTS,
          "kWh, kg and money of each job-GPU-hour and each GPU-hour's idle line: all sums below add these"),
    _step("job_summaries", _job_summaries, {F.JOB_ROWS, F.ESTIMATES, F.SCHEDULER}, F.SUMMARIES,
          "energy, split, coverage and span from the rows and the scheduler's span; after the footprints"),
    _step("job_footprints", _job_footprints, {F.ROW_FOOTPRINTS, F.GROUPS, F.JOB_GROUP}, F.JOB_FOOTPRINTS,
          "a job's footprint is the sum of its rows' footprints, with the hint its group allows"),
    _step("job_figures", _job_figures, {F.SUMMARIES, F.JOB_FOOTPRINTS}, None,
          "one UPDATE of the jobs' summaries and footprints, both computed in place above"),
    _step("low_coverage_flags", _low_coverage_flags, {F.SUMMARIES}, F.FLAGS,
          "coverage comes from the summaries"),
    _step("estimated_intensity_flags", _estimated_intensity_flags, {F.JOB_FOOTPRINTS}, F.FLAGS,
          "whether an hour's intensity was filled in comes from the footprints"),
    _step("waste_findings", _waste_findings, {F.ROW_FOOTPRINTS, F.SUMMARIES}, F.FLAGS,
          "memory hogs and idle allocations: their evidence carries the footprints' kWh, kg and money"),
    _step("unobserved_flags", _unobserved_flags, {F.SUMMARIES}, F.FLAGS,
          "a job charged for time nobody saw says so; its estimated share comes from the summaries' rows"),
    _step("failed_run_findings", _failed_run_findings, {F.SCHEDULER, F.JOB_FOOTPRINTS}, F.FLAGS,
          "a failed run's evidence is its whole footprint, so after the job footprints"),
    _step("job_flag_lists", _job_flag_lists, {F.FLAGS}, None,
          "each job's list of flag kinds, once, after every flag of the run is settled"),
    _step("day_sums", _day_sums, {F.ROW_FOOTPRINTS, F.BILLING, F.SUMMARIES, F.GROUPS, F.JOB_GROUP}, F.DAY_SUMS,
          "daily sums of the footprints per team (without the jobs excluded from a bill), cluster and job group, "
          "and of each GPU's GPU-hours; "
          "after the summaries, whose days of each job decide which jobs' rounded costs a day holds"),
    _step("team_waste_days", _team_waste_days,
          {F.ROW_FOOTPRINTS, F.SUMMARIES, F.FLAGS, F.BILLING, F.FINDING_STATUS}, F.WASTE_DAYS,
          "each team's waste per day, counted once, from its counted findings' rows: after the findings and their "
          "rows' footprints, and after the day sums (their locks first, in every derivation)"),
    _step("caches_expire", _caches_expire,
          {F.DAY_SUMS, F.ROW_FOOTPRINTS, F.SUMMARIES, F.JOB_FOOTPRINTS, F.GROUPS, F.FLAGS, F.WASTE_DAYS}, None,
          "last: no cached rollup or list page outlives any figure above"),
)  # fmt: skip


@dataclass
class DeriveReport:
    steps: list[str]
    timings_s: dict[str, float]
    jobs: int
    gpu_hours: int  # GPU-hours whose footprint was recomputed
    regrouped: int  # jobs whose group changed
    cluster_ids: set[int]  # the clusters derived (the scope's, and those of jobs that changed group)

    @property
    def duration_s(self) -> float:
        return sum(self.timings_s.values())


def derive(scope: Scope, *, changed: Iterable[Fact]) -> DeriveReport:
    """Run every step that reads something changed, in the order of STEPS. Call it inside the
    transaction that wrote the change, so that a failure anywhere leaves nothing half-derived."""
    run = DeriveRun(
        scope=scope,
        changed=set(changed),
        job_ids=set(scope.job_ids),
        cluster_ids=None if scope.cluster_ids is None else set(scope.cluster_ids),
    )
    ran = []
    for step in STEPS:
        if not step.reads & run.changed:
            continue
        started = time.perf_counter()
        step.run(run)
        run.timings_s[step.name] = time.perf_counter() - started
        ran.append(step.name)
        if step.makes is not None:
            run.changed.add(step.makes)
    if run.job_fields:  # a step computed job figures in place that no job_figures step stored
        raise RuntimeError(f"derive: job fields computed but not stored: {sorted(run.job_fields)}")
    return DeriveReport(
        steps=ran,
        timings_s=run.timings_s,
        jobs=len(run.job_ids),
        gpu_hours=run.refreshed.gpu_hours if run.refreshed else 0,
        regrouped=len(run.regrouped_job_ids),
        cluster_ids=set(run.cluster_ids or ()),
    )
