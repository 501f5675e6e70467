"""A team's period job by job, summed in the database: what its page (the splits by user and by job group, its
costliest jobs, the intensity sources) and its job list (a page of jobs, the costliest in the period first, and the
bill of those its filters keep) show, in one query each, whatever the number of jobs.

The jobs are those apps.rollups.team_selectors names: the team's jobs that ran in the period (as the API's
`?start=&end=` picks them: started before its end, seen since its start), and any other with something inside it.
Each job's part inside the period is its rows there summed, with the cost of its days past retention wholly inside,
as apps.jobs.selectors.jobs_in_period_footprints reads it: the period's whole UTC days from each job's stored days
(JobDay, exact sums), the hours of a day the period cuts from the rows themselves, added up exactly (numeric), so a
job's part is the same to the last bit either way. Its cost is rounded half-even in its currency as the bill rounds
it (apps.core.units.money.round_minor). A split's line adds up its jobs' parts exactly, each figure rounded to a float
once (the daily sums' rule: the same figures whatever order the jobs come in), and its cost is the sum of its jobs'
rounded costs, so the lines add up to the team's bill for the period to the cent.

The jobs that ran, with what the pages read of each, come from the index job_team_last_seen alone: a team's month is
thousands of jobs on as many of the table's pages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection, transaction

from apps.carbon.models import JobGroup
from apps.core.units.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS
from apps.core.units.footprint import S_PER_HOUR, Footprint
from apps.core.units.money import DEFAULT_EXPONENT, MINOR_EXPONENTS, split_rounded
from apps.fleet.models import Team

from .breakdown import NO_GROUP, BreakdownLine, Breakdowns, JobFilter, JobPart, lines_total

User = AbstractBaseUser | AnonymousUser

_CODES = sorted(MINOR_EXPONENTS)

# The columns of a job's part, summed exactly (numeric), as JobDay keeps them.
_SUMS = ("energy_j", "occupancy_s", "server_kwh", "facility_kwh", "operational_kg", "embodied_kg", "cost")
# The team's jobs and their parts. `rows`: the period's parts of the team's jobs, a row per job and whole day (JobDay),
# per row of the hours of a day the period cuts, and per day past retention (its cost); `costs`: each job's cost in
# the period, in millionths (an exact whole number: costs have 6 places), the one figure summed per job here (a sum of
# every figure per job costs more than the rest of the query; the splits add the rows up per line); `ran`: the jobs
# that ran in the period, from the index alone (two ranges, so that no filter reads the team's whole index); `jobs`:
# both, with their attributes; `booked`: each job's cost rounded half-even in its currency (m: millionths, d:
# millionths to the minor unit, q and r from them) as an amount with the currency's places (whole units times the unit).
_PARTS = f"""
WITH rows AS (
    SELECT job_id, energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg, cost
    FROM rollups_jobday WHERE team_id = %(team)s AND day >= %(first)s AND day < %(after)s
    -- cut hours:
    UNION ALL
    SELECT jh.job_id, jh.energy_j::numeric, jh.occupancy_s::numeric, jh.server_kwh::numeric,
           jh.facility_kwh::numeric, jh.operational_kg::numeric, jh.embodied_kg::numeric, jh.cost
    FROM jobs_jobgpuhour jh JOIN jobs_job j ON j.id = jh.job_id
    WHERE j.team_id = %(team)s AND ((jh.hour >= %(cut1_lo)s AND jh.hour < %(cut1_hi)s)
                                    OR (jh.hour >= %(cut2_lo)s AND jh.hour < %(cut2_hi)s))
    -- :cut hours
    UNION ALL
    SELECT e.job_id, 0, 0, 0, 0, NULL, 0, e.cost
    FROM jobs_expiredjobday e JOIN jobs_job j ON j.id = e.job_id
    WHERE j.team_id = %(team)s AND e.day >= %(expired_first)s AND e.day < %(expired_after)s
), costs AS (
    SELECT job_id, SUM((cost * 1000000)::bigint)::bigint AS m FROM rows GROUP BY job_id
), ran AS (
    SELECT id, start, "user", job_group_id, state, currency, excluded_from_bill, cost, intensity_source
    FROM jobs_job WHERE team_id = %(team)s AND last_seen >= %(start)s AND start < %(end)s
    UNION ALL
    SELECT id, start, "user", job_group_id, state, currency, excluded_from_bill, cost, intensity_source
    FROM jobs_job WHERE team_id = %(team)s AND last_seen IS NULL AND start < %(end)s
), jobs AS (
    SELECT r.id, r.start, r."user", r.job_group_id, r.state, r.currency, NOT r.excluded_from_bill AS on_bill,
           COALESCE(c.m, 0) AS m
    FROM ran r LEFT JOIN costs c ON c.job_id = r.id
    UNION ALL
    SELECT j.id, j.start, j."user", j.job_group_id, j.state, j.currency, NOT j.excluded_from_bill, c.m
    FROM costs c JOIN jobs_job j ON j.id = c.job_id
    WHERE NOT EXISTS (SELECT 1 FROM ran WHERE ran.id = c.job_id)
), booked AS (
    SELECT p.*, ({HALF_EVEN_UNITS}) * unit AS booked FROM (
        SELECT jobs.*, {HALF_EVEN_QR} FROM (
            SELECT jobs.*, COALESCE(x.d, %(default_d)s) AS d, COALESCE(x.unit, %(default_unit)s) AS unit
            FROM jobs LEFT JOIN unnest(%(codes)s::text[], %(ds)s::bigint[], %(units)s::numeric[]) AS x(code, d, unit)
                ON x.code = upper(trim(jobs.currency))
        ) AS jobs
    ) AS p
)"""

# A line's (or a job's) rows added up: each figure exact, then a float; and the cost, exact.
_ROW_SUMS = ", ".join(f"SUM(r.{c})::float8" for c in _SUMS if c != "cost") + ", SUM(r.cost)"
_NO_SUMS = ", ".join(["NULL"] * len(_SUMS))

# The rows of the jobs' parts inside the period, for some jobs only (`{jobs}`: a subquery of their ids): their whole
# days (JobDay), their rows of the hours of a day the period cuts, their days past retention (the cost).
_PART_ROWS = """
    SELECT job_id, energy_j, occupancy_s, server_kwh, facility_kwh, operational_kg, embodied_kg, cost
    FROM rollups_jobday
    WHERE team_id = %(team)s AND day >= %(first)s AND day < %(after)s AND job_id IN ({jobs})
    -- cut hours:
    UNION ALL
    SELECT jh.job_id, jh.energy_j::numeric, jh.occupancy_s::numeric, jh.server_kwh::numeric,
           jh.facility_kwh::numeric, jh.operational_kg::numeric, jh.embodied_kg::numeric, jh.cost
    FROM jobs_jobgpuhour jh
    WHERE jh.job_id IN ({jobs}) AND ((jh.hour >= %(cut1_lo)s AND jh.hour < %(cut1_hi)s)
                                     OR (jh.hour >= %(cut2_lo)s AND jh.hour < %(cut2_hi)s))
    -- :cut hours
    UNION ALL
    SELECT e.job_id, 0, 0, 0, 0, NULL, 0, e.cost FROM jobs_expiredjobday e
    WHERE e.job_id IN ({jobs}) AND e.day >= %(expired_first)s AND e.day < %(expired_after)s
"""

# The costliest jobs' rows inside the period (a few jobs: their rows by their ids, the same sums as their days'), and
# their days past retention (the cost).
_TOP_ROWS = """
    SELECT jh.job_id, jh.energy_j::numeric, jh.occupancy_s::numeric, jh.server_kwh::numeric,
           jh.facility_kwh::numeric, jh.operational_kg::numeric, jh.embodied_kg::numeric, jh.cost
    FROM jobs_jobgpuhour jh WHERE jh.job_id IN (SELECT id FROM top) AND jh.hour >= %(start)s AND jh.hour < %(end)s
    UNION ALL
    SELECT e.job_id, 0, 0, 0, 0, NULL, 0, e.cost FROM jobs_expiredjobday e
    WHERE e.job_id IN (SELECT id FROM top) AND e.day >= %(expired_first)s AND e.day < %(expired_after)s
"""

# The page's figures. The jobs within one UTC day that is a whole day of the period (their only JobDay row) are added
# up as their lines' stored sums of that day (TeamLineDay); every other job of the period is summed first: those that
# ran around such a day (before it, after it, across days, never with a row), those with rows across days or in the
# hours of a day the period cuts, those with days past retention (a few per period: the jobs across its midnights).
# Then, one kind of row each: the lines by user and by job group (the jobs on the bill: their count, their rows' sums,
# their booked costs), the currencies of the jobs on the bill, the intensity sources of the jobs that ran, and the
# costliest jobs that ran (by their whole run's cost), each with its part. A line's key: its user, or its group's id
# ("" for none).
_PAGE_SQL = f"""
WITH ran AS (
    SELECT id, "user", job_group_id, currency, excluded_from_bill, cost, intensity_source, first_day, last_day,
           rows_expired
    FROM jobs_job WHERE team_id = %(team)s AND last_seen >= %(start)s AND start < %(end)s
    UNION ALL
    SELECT id, "user", job_group_id, currency, excluded_from_bill, cost, intensity_source, first_day, last_day,
           rows_expired
    FROM jobs_job WHERE team_id = %(team)s AND last_seen IS NULL AND start < %(end)s
), others AS (
    SELECT id AS job_id FROM ran
    WHERE rows_expired OR NOT COALESCE(first_day = last_day AND first_day >= %(first)s AND first_day < %(after)s, FALSE)
    UNION
    SELECT job_id FROM rollups_jobday
    WHERE team_id = %(team)s AND day >= %(first)s AND day < %(after)s AND NOT within_day
    -- cut hours:
    UNION
    SELECT jh.job_id FROM jobs_jobgpuhour jh JOIN jobs_job j ON j.id = jh.job_id
    WHERE j.team_id = %(team)s AND ((jh.hour >= %(cut1_lo)s AND jh.hour < %(cut1_hi)s)
                                    OR (jh.hour >= %(cut2_lo)s AND jh.hour < %(cut2_hi)s))
    -- :cut hours
    UNION
    SELECT e.job_id FROM jobs_expiredjobday e JOIN jobs_job j ON j.id = e.job_id
    WHERE j.team_id = %(team)s AND e.day >= %(expired_first)s AND e.day < %(expired_after)s
), other_parts AS (
    SELECT job_id, {", ".join(f"SUM({c}) AS {c}" for c in _SUMS)}
    FROM ({_PART_ROWS.format(jobs="SELECT job_id FROM others")}) AS part_rows GROUP BY job_id
), other_jobs AS (
    SELECT o.job_id, COALESCE(r."user", j."user") AS "user",
           COALESCE(r.job_group_id, j.job_group_id) AS job_group_id, COALESCE(r.currency, j.currency) AS currency,
           NOT COALESCE(r.excluded_from_bill, j.excluded_from_bill) AS billed,
           {", ".join(f"p.{c}" for c in _SUMS if c != "cost")}, COALESCE(p.cost, 0) AS cost
    FROM others o LEFT JOIN ran r ON r.id = o.job_id LEFT JOIN jobs_job j ON j.id = o.job_id AND r.id IS NULL
    LEFT JOIN other_parts p ON p.job_id = o.job_id
), lined AS (
    SELECT "user", COALESCE(job_group_id::text, '') AS group_key, currency, jobs, {", ".join(_SUMS)},
           cost_booked AS booked
    FROM rollups_teamlineday WHERE team_id = %(team)s AND day >= %(first)s AND day < %(after)s
    UNION ALL
    SELECT p."user", COALESCE(p.job_group_id::text, ''), p.currency, 1, {", ".join(f"p.{c}" for c in _SUMS)},
           ({HALF_EVEN_UNITS}) * unit
    FROM (
        SELECT o.*, {HALF_EVEN_QR} FROM (
            SELECT o.*, (o.cost * 1000000)::bigint AS m, COALESCE(x.d, %(default_d)s) AS d,
                   COALESCE(x.unit, %(default_unit)s) AS unit
            FROM other_jobs o
            LEFT JOIN unnest(%(codes)s::text[], %(ds)s::bigint[], %(units)s::numeric[]) AS x(code, d, unit)
                ON x.code = upper(trim(o.currency))
            WHERE o.billed
        ) AS o
    ) AS p
), top AS (
    SELECT id, cost FROM ran ORDER BY cost DESC, id LIMIT %(top)s
)
SELECT CASE WHEN GROUPING("user") = 0 THEN 'user' ELSE 'group' END, COALESCE("user", group_key), NULL,
       SUM(jobs), SUM(booked), {", ".join(f"SUM({c})::float8" for c in _SUMS if c != "cost")}, SUM(cost)
FROM lined GROUP BY GROUPING SETS (("user"), (group_key))
UNION ALL
SELECT 'currency', currency, NULL, 0, NULL, {_NO_SUMS} FROM lined GROUP BY currency
UNION ALL
SELECT 'source', intensity_source, NULL, 0, NULL, {_NO_SUMS} FROM ran WHERE intensity_source <> '' GROUP BY 2
UNION ALL
SELECT 'top', t.id::text, t.cost::text, 1, NULL, {_ROW_SUMS}
FROM top t LEFT JOIN ({_TOP_ROWS}) AS r ON r.job_id = t.id
GROUP BY t.id, t.cost
"""


@dataclass(frozen=True)
class PeriodBounds:
    """How [start, end) is read: its whole UTC days [first, after) from the jobs' days (JobDay), the hours of the days
    it cuts (`cuts`, at most two ranges) from the rows, and its days past retention wholly inside [expired_first,
    expired_after) (as apps.jobs.selectors reads them)."""

    first: date
    after: date
    cuts: tuple[tuple[datetime, datetime], ...]
    expired_first: date
    expired_after: date


def team_period_bounds(*, start: datetime, end: datetime) -> PeriodBounds:
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    first = start.date() if start.time() == time(0) else start.date() + timedelta(days=1)
    after = end.date()
    cuts: tuple[tuple[datetime, datetime], ...]
    if first < after:  # whole days inside; the hours before the first and after the last are rows
        cuts = ((start, _midnight(first)), (_midnight(after), end))
    else:  # within one day, or across one midnight without a whole day: rows only
        first = after = start.date()
        cuts = ((start, end),)
    return PeriodBounds(
        first=first, after=after, cuts=tuple((lo, hi) for lo, hi in cuts if lo < hi),
        expired_first=start.date() if start.time() == time(0) else start.date() + timedelta(days=1),
        expired_after=end.date(),
    )  # fmt: skip


def _fetched(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of a page's query, not compiled: Postgres's JIT compiles a plan whose estimates pass its threshold
    (the join of a few thousand jobs to their days, estimated at millions), which takes a second for a query of tens
    of milliseconds."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        return cursor.fetchall()


def _query(sql: str, team: Team, start: datetime, end: datetime, **extra: Any) -> tuple[str, dict[str, Any]]:
    """`sql` as it reads [start, end), with its parameters: the team, the period and how it is read
    (team_period_bounds), the currencies, and `extra`."""
    bounds = team_period_bounds(start=start, end=end)
    return (sql if bounds.cuts else _cut(sql)), {**_period_params(team, start, end, bounds), **extra}


def _period_params(team: Team, start: datetime, end: datetime, bounds: PeriodBounds) -> dict[str, Any]:
    (cut1_lo, cut1_hi), (cut2_lo, cut2_hi) = (*bounds.cuts, (end, end), (end, end))[:2]
    return {
        "team": team.pk, "start": start.astimezone(UTC), "end": end.astimezone(UTC), "first": bounds.first,
        "after": bounds.after, "cut1_lo": cut1_lo, "cut1_hi": cut1_hi, "cut2_lo": cut2_lo, "cut2_hi": cut2_hi,
        "expired_first": bounds.expired_first, "expired_after": bounds.expired_after,
        "codes": _CODES, "ds": [10 ** (6 - MINOR_EXPONENTS[c]) for c in _CODES],
        "units": [Decimal(1).scaleb(-MINOR_EXPONENTS[c]) for c in _CODES],
        "default_d": 10 ** (6 - DEFAULT_EXPONENT), "default_unit": Decimal(1).scaleb(-DEFAULT_EXPONENT),
    }  # fmt: skip


_CUT_HOURS = re.compile(r"\n *-- cut hours:.*?-- :cut hours", re.S)


def _cut(sql: str) -> str:
    """`sql` without its reads of the rows of the hours of a day a period cuts: a period of whole days has none,
    and Postgres cannot tell an empty range of hours from a partition's worth."""
    return _CUT_HOURS.sub("", sql)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _visible(user: User, team: Team) -> bool:
    return Team.objects.visible_to(user).filter(pk=team.pk).exists()


def _footprint(sums: tuple[Any, ...]) -> Footprint:
    """A part's or a line's footprint from its sums (_SUMS' order: FOOTPRINT_COLUMNS')."""
    return Footprint.from_sum_columns(*sums)


@dataclass(frozen=True)
class TeamPeriodSums:
    """What the team page shows of its period's jobs: the splits (each line's waste added by `with_waste`), the
    costliest jobs that ran (their ids, each with its part inside the period), the intensity sources of the jobs that
    ran."""

    breakdowns: Breakdowns
    top: list[tuple[int, Footprint]]
    sources: list[str]


def team_period_sums(
    *,
    user: User,
    team: Team,
    start: datetime,
    end: datetime,
    top: int,
    waste: Mapping[int, tuple[str, str, Footprint]] | None = None,
) -> TeamPeriodSums:
    """The team's jobs of [start, end) that the user may see, split by user and by job group (the jobs on the bill,
    the costliest line first), its `top` costliest jobs that ran, their intensity sources; in one query. `waste`:
    each job's counted waste in the period, with the keys of its lines (its user, its group's id or ""), added to
    them."""
    if not _visible(user, team):
        return TeamPeriodSums(Breakdowns(by_user=[], by_group=[], total=BreakdownLine(key="", label="total")), [], [])
    rows = _fetched(*_query(_PAGE_SQL, team, start, end, top=top))
    lines: dict[str, dict[str, BreakdownLine]] = {"user": {}, "group": {}}
    currencies, sources, tops = [], [], []
    for kind, key, run_cost, jobs, booked, *figures in rows:
        if kind in lines:
            lines[kind][key] = BreakdownLine(key=key, label=key, jobs=jobs, footprint=_footprint(tuple(figures)),
                                             cost=booked)  # fmt: skip
        elif kind == "currency":
            currencies.append(key)
        elif kind == "source":
            sources.append(key)
        else:
            tops.append((-Decimal(run_cost), int(key), _footprint(tuple(figures))))
    names = dict(JobGroup.objects.filter(pk__in=[int(k) for k in lines["group"] if k]).values_list("pk", "name"))
    for key, line in lines["group"].items():
        line.label = names.get(int(key), "") if key else ""
    currency = ",".join(sorted(currencies))
    by_user = _lines_sorted(_waste_added(list(lines["user"].values()), waste, 0), currency)
    by_group = _lines_sorted(_waste_added(list(lines["group"].values()), waste, 1), currency)
    return TeamPeriodSums(
        breakdowns=Breakdowns(by_user=by_user, by_group=by_group, total=lines_total(by_user)),
        top=[(job_id, fp) for _, job_id, fp in sorted(tops)],
        sources=sorted(sources),
    )


def _waste_added(
    lines: list[BreakdownLine], waste: Mapping[int, tuple[str, str, Footprint]] | None, at: int
) -> list[BreakdownLine]:
    """Each job's waste added to its line (`at`: its user's, 0, or its group's key, 1), the jobs in the order of
    their ids."""
    by_key = {line.key: line for line in lines}
    for _job_id, (user, group_key, footprint) in sorted((waste or {}).items(), key=lambda item: item[0]):
        line = by_key.get(user if at == 0 else group_key)
        if line is not None:
            line.waste += footprint
    return lines


def _lines_sorted(lines: list[BreakdownLine], currency: str) -> list[BreakdownLine]:
    """The lines with their waste's costs rounded so that they add up to the total's (largest remainder), the
    costliest line first (then by label and key), as apps.rollups.breakdown.lines_by gives them."""
    shares = split_rounded({line.key: line.waste.cost for line in lines}, currency)
    for line in lines:
        line.waste_cost = shares[line.key]
    return sorted(lines, key=lambda line: (-line.cost, line.label, line.key))


# The job list's page: the jobs the filters keep, the costliest in the period first (then the newest), each with its
# rows' sums, beside their count and the bill of those on it, and what the filters can choose from (every job's user,
# state and group) and the currencies; one row with no job where the page has none.
_LIST_SQL = f"""{_PARTS},
shown AS (
    SELECT * FROM booked
    WHERE (%(user)s = '' OR "user" = %(user)s) AND (%(state)s = '' OR state = %(state)s)
      AND (%(group)s = '' OR (%(group)s = '{NO_GROUP}' AND job_group_id IS NULL) OR job_group_id::text = %(group)s)
), page AS (
    SELECT * FROM shown ORDER BY booked DESC, start DESC NULLS FIRST, id DESC LIMIT %(limit)s OFFSET %(offset)s
), summary AS (
    SELECT count(*) AS jobs, count(*) FILTER (WHERE on_bill) AS billed,
           COALESCE(SUM(booked) FILTER (WHERE on_bill), 0) AS billed_cost,
           (SELECT SUM(r.occupancy_s)::float8 FROM rows r JOIN shown s ON s.id = r.job_id WHERE s.on_bill) AS billed_s,
           (SELECT array_agg(DISTINCT "user") FROM booked) AS users,
           (SELECT array_agg(DISTINCT state) FROM booked) AS states,
           (SELECT json_agg(json_build_array(g.id::text, g.name)) FROM carbon_jobgroup g
            WHERE g.id IN (SELECT job_group_id FROM booked)) AS groups,
           (SELECT array_agg(DISTINCT currency) FROM booked WHERE currency <> '') AS currencies
    FROM shown
)
SELECT summary.*, listed.* FROM summary LEFT JOIN (
    SELECT p.id, p."user", p.job_group_id, COALESCE(g.name, '') AS job_group, p.state, p.currency, p.on_bill,
           {_ROW_SUMS.replace("SUM(r.", "SUM(r.")}, p.booked, p.start
    FROM page p LEFT JOIN carbon_jobgroup g ON g.id = p.job_group_id LEFT JOIN rows r ON r.job_id = p.id
    GROUP BY p.id, p."user", p.job_group_id, g.name, p.state, p.currency, p.on_bill, p.booked, p.start
) AS listed ON TRUE
ORDER BY listed.booked DESC, listed.start DESC NULLS FIRST, listed.id DESC
"""
_SUMMARY = 8  # the summary's columns, before each listed job's


@dataclass
class TeamJobsListed:
    """A page of the team's job list: its jobs' parts (in the list's order), how many jobs the filters keep, the bill
    of those on it (`shown_bill`: their count, GPU-hours and booked cost), and the filters' choices."""

    parts: list[JobPart]
    count: int
    shown_bill: BreakdownLine
    users: list[str] = field(default_factory=list)
    states: set[str] = field(default_factory=set)
    groups: list[tuple[str, str]] = field(default_factory=list)  # (id, name), by name
    currency: str = ""


def team_jobs_listed(
    *, user: User, team: Team, start: datetime, end: datetime, chosen: JobFilter, page: int, per_page: int
) -> TeamJobsListed:
    """Page `page` (from 1) of the team's jobs of [start, end) that the filters keep, `per_page` a page, the costliest
    in the period first (then the newest), as apps.rollups.team_selectors.team_job_parts orders them; a page past the
    last has no parts (its count says how many pages there are). One query."""
    if not _visible(user, team):
        return TeamJobsListed(parts=[], count=0, shown_bill=BreakdownLine(key="", label="total"))
    filters = {"user": chosen.user, "state": chosen.state, "group": chosen.group}
    rows = _fetched(*_query(_LIST_SQL, team, start, end, **filters, limit=per_page, offset=(page - 1) * per_page))
    count, billed, billed_cost, billed_s, users, states, groups, currencies = rows[0][:_SUMMARY]
    bill = BreakdownLine(key="", label="total", jobs=billed, cost=billed_cost,
                         footprint=Footprint(gpu_hours=(billed_s or 0.0) / S_PER_HOUR))  # fmt: skip
    return TeamJobsListed(
        parts=[_part(r[_SUMMARY:]) for r in rows if r[_SUMMARY] is not None],
        count=count,
        shown_bill=bill,
        users=sorted(users or []),
        states=set(states or []),
        groups=sorted(((g_id, name) for g_id, name in groups or []), key=lambda g: g[1]),
        currency=",".join(sorted(currencies or [])),
    )


def _part(r: tuple[Any, ...]) -> JobPart:
    job_id, user, group_id, group, state, currency, on_bill = r[:7]
    return JobPart(
        job_id=job_id, user=user, group_id=group_id, group=group, state=state, currency=currency, on_bill=on_bill,
        footprint=_footprint(tuple(r[7:14])),
    )  # fmt: skip


def team_parts_all(*, user: User, team: Team, start: datetime, end: datetime) -> list[JobPart]:
    """Every job of the team's list for [start, end) (no filter), in the list's order: what the export writes."""
    if not _visible(user, team):
        return []
    rows = _fetched(*_query(_LIST_SQL, team, start, end, user="", state="", group="", limit=None, offset=0))
    return [_part(r[_SUMMARY:]) for r in rows if r[_SUMMARY] is not None]
