"""What waste findings are worth inside a period, counted once (docs/arithmetic.md, "Waste in a period").

A finding names a job and, in its evidence's `gpus`, the GPUs it is about (all the job's GPUs where it names
none: a failed run, or an allocation whose only idle GPUs are ones it never ran on). Its worth in [start, end)
is the job's rows in that range on those GPUs: clipped to the period, never the whole run's evidence. Waste
totals add up the union of those rows: a GPU-hour that two findings of one job share (a failed run that was
also an idle allocation) is counted once; each kind's line counts its own findings' rows. A finding with no
row in the period is worth nothing there and is not listed. Split by kind so that the kinds add up to the total
(`per_kind_once`), a GPU-hour two kinds share is counted under the first of WASTE_KINDS (memory hog, idle
allocation, failed run): the most specific reason it was wasted.

The team page, the weekly report, the audit queue and the team's rollups all read their waste here, and count the
same findings (`counted_flags`). The audit queue's triage (its summary per kind, its order by money at stake, the
findings a bulk rule takes) reads the same figures (`queue_triage`, `rule_matches`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from operator import itemgetter
from typing import Any, overload
from zoneinfo import ZoneInfo

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import BooleanField, Case, Count, ExpressionWrapper, F, JSONField, Q, QuerySet, When
from django.db.models.functions import TruncDay

from apps.core.units.aggregates import footprint_sums
from apps.core.units.footprint import FOOTPRINT_COLUMNS, Footprint, FootprintSum
from apps.fleet.models import Team
from apps.jobs.models import Job, JobGpuHour, days_reach

from .kinds import COUNTED_STATUSES, WASTE_KINDS, FlagKind, FlagStatus
from .models import AuditEntry, Flag
from .triage import BulkRule, QueueOrder, money_first

UTC_ZONE = ZoneInfo("UTC")


def _kind_rank(kind: str) -> int:
    """Where a kind comes in counting a GPU-hour that several kinds share (per_kind_once): in WASTE_KINDS' order,
    the most specific reason first; any other kind counted after them."""
    return WASTE_KINDS.index(kind) if kind in WASTE_KINDS else len(WASTE_KINDS)


@dataclass
class PeriodWaste:
    """Findings' worth inside one period: each finding's, each kind's, and their union (`total`, counted once);
    the union split by kind (`per_kind_once`: each GPU-hour under its first kind, so the kinds add up to `total`);
    per job (the union of its findings) and per local day (`per_day`: the union's part on that day, which the
    team's rollups add up per period; `per_day_gpu_hours`: its GPU-hours, for the weekly report's bars)."""

    per_flag: dict[int, Footprint] = field(default_factory=dict)
    per_kind: dict[str, Footprint] = field(default_factory=lambda: defaultdict(Footprint))
    per_kind_once: dict[str, Footprint] = field(default_factory=lambda: defaultdict(Footprint))
    jobs_of_kind: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    total: Footprint = field(default_factory=Footprint)
    per_job: dict[int, Footprint] = field(default_factory=dict)
    kinds_of_job: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    per_day: dict[date, Footprint] = field(default_factory=dict)
    per_day_gpu_hours: dict[date, float] = field(default_factory=dict)


def counted_flags(flags: QuerySet[Flag]) -> QuerySet[Flag]:
    """The findings of `flags` that count as waste: open and disputed ones (COUNTED_STATUSES) of the waste kinds,
    on jobs on their team's bill (an admin's excluded job is off the team's bill, and its findings out of its
    waste). The jobs excluded are few (index job_excluded_team): the findings are not joined to every job."""
    excluded = Job.objects.filter(excluded_from_bill=True).values("pk")
    return flags.filter(kind__in=WASTE_KINDS, status__in=COUNTED_STATUSES, job__isnull=False).exclude(
        job_id__in=excluded
    )


def team_counted_flags(*, team: Team, start: datetime, end: datetime) -> QuerySet[Flag]:
    """The team's findings that count as waste, of its jobs that ran in [start, end) (as its page picks them:
    started before the end, seen since the start), so that a year's rollup reads no finding of another year."""
    flags = Flag.objects.filter(job__team=team, job__start__lt=end)
    return counted_flags(flags.filter(Q(job__last_seen__gte=start) | Q(job__last_seen__isnull=True)))


def counted_findings_by_job(*, job_ids: Collection[int]) -> dict[int, frozenset[tuple[object, ...]]]:
    """For each of these jobs with findings that count as waste (`counted_flags`), what its waste depends on: each
    such finding's id, kind and the GPUs it names. Two readings that differ for a job: its waste changed on every
    day it ran."""
    if not job_ids:
        return {}
    found: dict[int, set[tuple[object, ...]]] = defaultdict(set)
    rows = counted_flags(Flag.objects.filter(job_id__any=sorted(job_ids))).values_list(
        "job_id", "id", "kind", "evidence"
    )
    for job_id, flag_id, kind, evidence in rows.order_by():
        gpus = flag_gpus(evidence)
        found[job_id].add((flag_id, kind, None if gpus is None else tuple(sorted(gpus))))
    return {job_id: frozenset(state) for job_id, state in found.items()}


def flag_gpus(evidence: dict | None) -> set[str] | None:
    """The GPUs a finding is about (its evidence's `gpus`); None: all the job's GPUs."""
    named = (evidence or {}).get("gpus")
    return set(named) if named else None


def period_waste(
    *,
    flags: QuerySet[Flag],
    start: datetime,
    end: datetime,
    tz: ZoneInfo = UTC_ZONE,
    counted: frozenset[str] | None = None,
) -> PeriodWaste:
    """The findings' (`flags`: on jobs) worth in [start, end), from their jobs' rows in one aggregate query;
    `counted`: the kinds whose rows make the total (default: the waste kinds; others get their own figures and
    lines only, such as low coverage in the weekly report). Days are local days in `tz`."""
    # Only the findings of jobs whose days reach into the period can be worth something there: the audit queue's
    # 10,000 open findings over a year are a month's few hundred, their rows read by a few hundred ids.
    found = list(flags.filter(days_reach(start=start, end=end, path="job__"), job__isnull=False)
                 .order_by("job_id", "kind", "id").values_list("id", "job_id", "kind", "evidence"))  # fmt: skip
    rows = _waste_rows(job_ids={job_id for _, job_id, _, _ in found}, start=start, end=end, tz=tz)
    return _waste_of(found, rows, frozenset(WASTE_KINDS) if counted is None else counted)


def period_waste_counted(
    *,
    flags: QuerySet[Flag],
    start: datetime,
    end: datetime,
    counted: Callable[[Flag], bool],
    job_fields: Collection[str] = (),
) -> tuple[PeriodWaste, PeriodWaste, list[Flag]]:
    """period_waste of `flags` (on jobs, of the waste kinds), and of those of them `counted` keeps, from one read of
    their jobs' rows: the same figures as two calls. With the findings worth something in the period, each with its
    job (`job_fields`: the job's fields read, all where none is named), by kind and newest first."""
    read = flags.filter(days_reach(start=start, end=end, path="job__"), job__isnull=False).select_related("job")
    if job_fields:
        read = read.only(*[f.name for f in Flag._meta.concrete_fields], *(f"job__{name}" for name in job_fields))
    found = list(read.order_by("job_id", "kind", "id"))
    rows = _waste_rows(job_ids={f.job_id for f in found if f.job_id is not None}, start=start, end=end, tz=UTC_ZONE)
    kinds = frozenset(WASTE_KINDS)
    every = _waste_of([(f.pk, f.job_id or 0, f.kind, f.evidence) for f in found], rows, kinds)
    kept = _waste_of([(f.pk, f.job_id or 0, f.kind, f.evidence) for f in found if counted(f)], rows, kinds)
    worth = sorted(
        (f for f in found if f.pk in every.per_flag), key=lambda f: (f.kind, -f.created_at.timestamp(), -f.pk)
    )
    return every, kept, worth


def _waste_rows(
    *, job_ids: Collection[int], start: datetime, end: datetime, tz: ZoneInfo
) -> dict[int, list[tuple[str, date, Footprint]]]:
    """The jobs' rows in [start, end) summed per GPU and local day, per job (in the order of the GPUs and days): each
    GPU's uuid, the day and the footprint (Footprint.from_sums' figures), from the cursor's tuples (a month's
    hundreds of findings' rows as dicts through the ORM's converters cost more than the query)."""
    if not job_ids:
        return {}
    rows = (
        JobGpuHour.objects.filter(job_id__any=sorted(job_ids), hour__gte=start, hour__lt=end)
        .annotate(day=TruncDay("hour", tzinfo=tz))
        .values("job_id", "gpu__uuid", "day")
        .annotate(**footprint_sums())
        .order_by("job_id", "gpu__uuid", "day")
    )
    by_job: dict[int, list[tuple[str, date, Footprint]]] = defaultdict(list)
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [c.name for c in cursor.description or ()]
        columns = itemgetter(*[names.index(name) for name in ("job_id", "gpu__uuid", "day", *FOOTPRINT_COLUMNS)])
        for row in cursor:
            job_id, uuid, day, energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg, cost = (
                columns(row)
            )
            footprint = Footprint.from_sum_columns(
                energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg, cost
            )
            by_job[job_id].append((uuid, day.date(), footprint))
    return by_job


def _waste_of(
    found: list[tuple[int, int, str, Any]],
    by_job: Mapping[int, list[tuple[str, date, Footprint]]],
    counted_kinds: frozenset[str],
) -> PeriodWaste:
    """period_waste's figures of the findings `found` (id, job, kind, evidence; by job, kind and id) from their jobs'
    rows (_waste_rows), added up in place (FootprintSum: the same figures as footprints added one by one)."""
    out = PeriodWaste()
    wasted: dict[tuple[int, str, date], Footprint] = {}  # the union over findings: a GPU-hour is wasted once
    wasted_as: dict[tuple[int, str, date], str] = {}  # and the kind it is counted under (_kind_rank's first)
    per_kind: dict[str, FootprintSum] = defaultdict(FootprintSum)
    for flag_id, job_id, kind, evidence in found:
        gpus = flag_gpus(evidence)
        worth = FootprintSum()
        for gpu, day, part in by_job.get(job_id, []):
            if gpus is not None and gpu not in gpus:
                continue
            worth.add(part)
            if kind in counted_kinds:
                cell = (job_id, gpu, day)
                wasted[cell] = part
                if cell not in wasted_as or _kind_rank(kind) < _kind_rank(wasted_as[cell]):
                    wasted_as[cell] = kind
        if not worth.gpu_hours and not worth.energy_j and not worth.cost:
            continue  # nothing of it in the period: not waste here
        out.per_flag[flag_id] = worth.footprint()
        per_kind[kind].add(out.per_flag[flag_id])
        out.jobs_of_kind[kind].add(job_id)
        if kind in counted_kinds:
            out.kinds_of_job[job_id].add(kind)
    total, once = FootprintSum(), defaultdict[str, FootprintSum](FootprintSum)
    per_day: dict[date, FootprintSum] = defaultdict(FootprintSum)
    per_job: dict[int, FootprintSum] = defaultdict(FootprintSum)
    for cell, part in wasted.items():
        job_id, _gpu, day = cell
        total.add(part)
        once[wasted_as[cell]].add(part)
        per_day[day].add(part)
        per_job[job_id].add(part)
    out.total = total.footprint()
    out.per_kind.update((kind, acc.footprint()) for kind, acc in per_kind.items())
    out.per_kind_once.update((kind, acc.footprint()) for kind, acc in once.items())
    out.per_day = {day: acc.footprint() for day, acc in per_day.items()}
    out.per_job = {job_id: acc.footprint() for job_id, acc in per_job.items()}
    out.per_day_gpu_hours = {day: part.gpu_hours for day, part in out.per_day.items()}
    return out


@dataclass(frozen=True)
class KindStake:
    """One line of the audit queue's summary: a kind's open and disputed findings, and the money at stake in the
    period (`cost`: its findings' worth there, as that kind's line of the weekly report counts it; None for a kind
    that is not waste, whose findings are about the measurement)."""

    kind: FlagKind
    open: int
    disputed: int
    cost: Decimal | None
    currency: str


@dataclass(frozen=True)
class QueueTriage:
    kinds: list[KindStake]
    waste: PeriodWaste  # the counted findings' worth: each finding's (`per_flag`), each kind's, the total counted once
    currency: str  # of every counted finding ("EUR", or "EUR,USD" on a fleet of several)

    def stake(self) -> dict[int, Decimal]:
        """{finding id: its money at stake in the period}."""
        return {pk: worth.cost for pk, worth in self.waste.per_flag.items()}


def queue_triage(*, flags: QuerySet[Flag], start: datetime, end: datetime) -> QueueTriage:
    """The audit queue's summary, per kind: its open and disputed findings among `flags` (the queue's, filtered by
    all but their status) and the money at stake in [start, end), from one period_waste over the findings that
    count (`counted_flags`). Four queries, whatever the number of findings: the findings that count are read once
    with their jobs' currencies and, where their jobs' days reach into the period, their evidence (a probe of its
    job per finding: 10,000 open findings' took as long as the rest of the page)."""
    counted = counted_flags(flags)
    reaches = days_reach(start=start, end=end, path="job__")
    read = counted.annotate(
        reaches=ExpressionWrapper(reaches, output_field=BooleanField()),
        reaching_evidence=Case(When(reaches, then=F("evidence")), default=None, output_field=JSONField()),
    ).values_list("id", "job_id", "kind", "job__currency", "reaches", "reaching_evidence")
    currencies: dict[str, set[str]] = defaultdict(set)
    found = []
    for pk, job_id, kind, currency, evidence in _counted_read(read):
        if pk is None:  # a kind's currency
            currencies[kind].add(currency)
        else:
            found.append((pk, job_id, kind, evidence))
    found.sort(key=lambda f: (f[1], f[2], f[0]))  # (as period_waste reads them)
    rows = _waste_rows(job_ids={job_id for _, job_id, _, _ in found}, start=start, end=end, tz=UTC_ZONE)
    waste = _waste_of(found, rows, frozenset(WASTE_KINDS))
    statuses: dict[str, dict[str, int]] = defaultdict(dict)
    by_status = flags.filter(status__in=COUNTED_STATUSES).values_list("kind", "status").annotate(n=Count("id"))
    for kind, status, n in by_status.order_by():
        statuses[kind][status] = n
    kinds = [
        KindStake(
            kind=FlagKind(kind),
            open=n.get(FlagStatus.OPEN, 0),
            disputed=n.get(FlagStatus.DISPUTED, 0),
            cost=waste.per_kind[kind].cost if kind in waste.per_kind else (Decimal(0) if kind in WASTE_KINDS else None),
            currency=",".join(sorted(currencies[kind])),
        )
        for kind, n in statuses.items()
    ]
    kinds.sort(key=lambda k: (k.cost is None, -(k.cost or 0), -k.open, k.kind.label))
    every = sorted(set().union(*currencies.values())) if currencies else []
    return QueueTriage(kinds=kinds, waste=waste, currency=",".join(every))


class QueueIds(Sequence[int]):
    """The ids of the queue's findings in its order, read a page at a time (what a Paginator takes: a length and
    slices): by money at stake, the findings with something at stake first (few: a period's), the most first, then
    every other oldest first; or all oldest first. A page is one query of its ids, not 10,000 ids and their times
    read to sort in Python on every ask."""

    def __init__(self, *, flags: QuerySet[Flag], stake: Mapping[int, Decimal], order: QueueOrder) -> None:
        self._oldest = flags.order_by("created_at", "id").values_list("id", flat=True)
        self._count: int | None = None
        self._staked: list[int] = []
        if order == QueueOrder.MONEY and stake:
            staked = flags.filter(pk__any=sorted(stake)).values_list("id", "created_at").order_by()
            self._staked = money_first(list(staked), stake)
            self._oldest = self._oldest.exclude(pk__any=self._staked)

    def __len__(self) -> int:
        if self._count is None:
            self._count = len(self._staked) + self._oldest.count()
        return self._count

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, int):
            found = self[index : index + 1] if index >= 0 else list(self)[index : index + 1 or None]
            if not found:
                raise IndexError(index)
            return found[0]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return list(self)[index]
        head = self._staked[start:stop]
        rest = list(self._oldest[max(0, start - len(self._staked)) : max(0, stop - len(self._staked))])
        return head + rest

    def __iter__(self) -> Iterator[int]:
        return iter(self[0 : len(self)])


# The findings that count, read once (the probe of each one's job is most of the read): each kind's currencies
# (id NULL), and the findings whose jobs' days reach into the period with their evidence, as period_waste reads them.
_COUNTED_READ = """
WITH found AS MATERIALIZED (
    SELECT * FROM ({read}) AS f(id, job_id, kind, currency, reaches, evidence)
)
SELECT NULL::bigint, NULL::bigint, kind, currency, NULL::jsonb FROM found WHERE currency <> '' GROUP BY kind, currency
UNION ALL
(SELECT id, job_id, kind, NULL, evidence FROM found WHERE reaches ORDER BY job_id, kind, id)
"""


def _counted_read(read: QuerySet[Any]) -> list[tuple[Any, ...]]:
    """queue_triage's read of the findings that count (_COUNTED_READ), as rows of id, job, kind, currency and
    evidence."""
    try:
        sql, params = read.order_by().query.sql_with_params()
    except EmptyResultSet:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_COUNTED_READ.format(read=sql), params)
        return [(pk, job_id, kind, currency, _json(evidence)) for pk, job_id, kind, currency, evidence in cursor]


def _json(value: Any) -> Any:
    """A jsonb value as the ORM gives it (the connection reads jsonb as text)."""
    return json.loads(value) if isinstance(value, str) else value


def queue_order(*, flags: QuerySet[Flag], stake: Mapping[int, Decimal], order: QueueOrder) -> Sequence[int]:
    """The ids of the queue's findings (`flags`, filtered) in the order asked: by money at stake (`stake`, from
    queue_triage), or oldest first (as oldest_first orders them: by when found, then id), read a page at a time
    (QueueIds): a page's rows are read by queue_rows."""
    if order == QueueOrder.MONEY and any(amount <= -1 for amount in stake.values()):
        # (money_first puts a finding worth -1 or less after those with nothing at stake: no cost is, but the order
        # is money_first's whatever the figures)
        oldest = list(flags.order_by("created_at", "id").values_list("id", flat=True))
        return money_first([(pk, rank) for rank, pk in enumerate(oldest)], stake)
    return QueueIds(flags=flags, stake=stake, order=order)


def queue_rows(*, ids: list[int]) -> list[Flag]:
    """A page of the queue: its findings, in the order of `ids`, with what their rows show (the job and its team, the
    cluster, the GPU and its node) in the same query."""
    rows = Flag.objects.filter(pk__in=ids).select_related("job__team", "cluster", "gpu__node").in_bulk()
    return [rows[pk] for pk in ids if pk in rows]


def latest_decisions(*, flag_ids: Collection[int]) -> dict[int, AuditEntry]:
    """{finding id: the last decision that cited it, with who took it}, for a page of the queue; one query (by the
    audit_flag_at index)."""
    entries = (
        AuditEntry.objects.filter(flag_id__in=list(flag_ids))
        .select_related("actor")
        .order_by("flag_id", "-at", "-id")
        .distinct("flag_id")
    )
    return {e.flag_id: e for e in entries if e.flag_id is not None}


def recent_decisions(*, limit: int) -> list[AuditEntry]:
    """The last `limit` decisions on findings, newest first, with who took them and on what (a job, or a GPU-hour)."""
    entries = AuditEntry.objects.filter(flag_id__isnull=False).select_related("actor", "job", "gpu__node")
    return list(entries.order_by("-at", "-id")[:limit])


def rule_matches(*, rule: BulkRule) -> dict[int, Decimal]:
    """{finding id: its money at stake} of the open findings `rule` takes: of its kind, counted as waste (of jobs on
    their team's bill, in the rule's currency), with something in the period, under the rule's amount. The money is
    period_waste's, as the queue shows it."""
    flags = counted_flags(Flag.objects.filter(kind=rule.kind, status=FlagStatus.OPEN, job__currency=rule.currency))
    worth = period_waste(flags=flags, start=rule.start, end=rule.end).per_flag
    return {pk: w.cost for pk, w in worth.items() if rule.takes(w.cost)}
