"""A month of the teams' daily sums as FOCUS 1.2 charges, with FOCUS 1.3's split cost allocation columns beside
them, and the clusters' cost no team's jobs carry as the unallocated part of the same charges (pure: rows from
plain inputs; docs/api.md, "FOCUS export").

One row per team x cluster x UTC day x charge: the GPU-hours charge (GPU-hours x the GPU models' rates) and
the facility energy charge (facility kWh x the site's price). A day's cost is split between the two by the
site's price: the energy charge is its facility kWh at that price (never more than the day's cost), the
GPU-hours charge the rest. Each quantity is on one charge only, so any column adds up across rows: GPU-hours
and embodied CO2e on the GPU-hours charge; GPU and facility kWh and operational CO2e on the energy charge.

Money is booked as the rollups book it (apps/core/units/money.py): a team's day in a currency costs the sum of its
jobs' rounded costs (`targets`, the rollup's day), and that amount is apportioned over the day's charges in
proportion to their exact costs by largest remainder. So the rows of a team-day add up to the rollup's day
to the cent, and a team's month to its rollup's `totals.cost`.

FOCUS 1.3's allocation columns say how each row was allocated from its origin charge, a cluster's charge of
that kind on that day: `AllocatedMethodId` (GPU-hours by the time each job held each GPU, or facility energy by
each job's measured share of each GPU's energy), `AllocatedMethodDetails` (the row's share of the origin charge,
with its quantity, and the split methods of its GPU energy), `AllocatedResourceId`/`Name` and `AllocatedTags`
(the team it went to). The origin charge's other parts are other teams' figures: a viewer who may not see every
team gets the method but no ratio (`origin_totals` None).

What no team's jobs carry is the cluster's idle line (apps.rollups.selectors, docs/arithmetic.md), exported in
two lines apart (`x_CostLine`): **idle** (GPUs the agent saw with no job: the line less the part nobody saw) and
**unobserved** (time nobody saw, so whether a job ran is not known). They are the unallocated portion of the same
origin charges, as FOCUS 1.3 has it: `AllocatedMethodId` the charge's method, no `AllocatedResource*`, no sub
account (no team's). Each line is booked as the cluster's daily rollup books it: unobserved its own cost rounded,
idle the whole line rounded less that (`unallocated_booked`), each apportioned over the two charges as a team-day
is. Cluster-level figures: only for a viewer who sees every team.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from apps.core.units.footprint import J_PER_KWH, Footprint
from apps.core.units.money import minor_exponent, round_minor
from apps.jobs.methods import Method

FOCUS_VERSION = "1.2"  # every 1.2 column; 1.3's allocation columns (ALLOCATION_COLUMNS) and x_CostLine after them
GPU_HOURS, ENERGY = "gpu-hours", "facility-energy"
# AllocatedMethodId of each charge (docs/api.md, "FOCUS export", documents both).
ALLOCATED_METHOD = {GPU_HOURS: "fleetwatt-gpu-hours-held-v1", ENERGY: "fleetwatt-gpu-energy-split-v1"}
# ServiceCategory: "Compute" is the allowed value for "virtual, containerized, serverless, or high-performance
# computing infrastructure": what a GPU-hour of a cluster is (the workloads' purpose is not ours to say).
SERVICE_CATEGORY = "Compute"
SERVICE_NAME = "GPU compute"
RESOURCE_TYPE = "GPU cluster"
QUANTITY_PLACES = Decimal("0.000001")
# x_CostLine: what a row's cost is of. A team's jobs; or, unallocated, the idle seen (GPUs seen with no job) and the
# unobserved (time nobody saw) of the cluster's idle line.
JOBS, IDLE, UNOBSERVED = "jobs", "idle", "unobserved"


@dataclass(frozen=True)
class FocusNames:
    """Who bills whom: the settings FLEETWATT_FOCUS_*."""

    billing_account_id: str
    billing_account_name: str
    invoice_issuer_name: str
    provider_name: str
    publisher_name: str


@dataclass(frozen=True)
class TeamClusterDay:
    """A team's jobs on one cluster and one UTC day, summed (a TeamDay row and its site's figures)."""

    team_id: int
    team: str
    cluster: str
    day: date
    currency: str
    gpu_hours: float
    energy_j: float
    facility_kwh: float
    operational_kg: float
    embodied_kg: float
    cost: Decimal  # exact, 6 places
    price_per_kwh: Decimal  # the site's electricity price (0 without a site)
    site: str | None = None
    intensity_basis: str | None = None  # None where the site has no grid zone (no operational CO2e)
    energy_by_method_j: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterIdleDay:
    """A cluster's idle line on one UTC day (energy outside every job over the GPU-hours no job occupied) and the
    part of it nobody saw (within it), as its daily rollup works them out (ClusterDay,
    apps.rollups.selectors.cluster_day_idle_line), with its site's figures."""

    cluster: str
    day: date
    currency: str
    idle: Footprint  # cost exact, 6 places
    unseen: Footprint
    price_per_kwh: Decimal  # the site's electricity price (0 without a site)
    site: str | None = None
    intensity_basis: str | None = None  # None where the site has no grid zone (no operational CO2e)


# (team id, day, currency) -> the rollup's cost of that team-day in the currency's minor unit.
Targets = Mapping[tuple[int, date, str], Decimal]

# The FOCUS columns, in the order of the file; the conditional ones that fleetwatt has no data for
# (commitment discounts, a published price list, availability zones) are present and null, as FOCUS asks of
# a column that does not apply.
COLUMNS: tuple[str, ...] = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription",
    "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
    "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
    "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
    "x_EnergyKWh", "x_GpuEnergyKWh", "x_OperationalKgCO2e", "x_EmbodiedKgCO2e", "x_IntensityBasis",
    "x_SplitMethod", "x_Coverage",
    # FOCUS 1.3, after them: a reader of the 1.2 columns by position reads what it read before.
    "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
    # Added with issue 34, last, for the same reason: what the row's cost is of (JOBS, IDLE, UNOBSERVED).
    "x_CostLine",
)  # fmt: skip
ALLOCATION_COLUMNS = (
    "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
)  # fmt: skip
MONEY_COLUMNS = ("BilledCost", "ContractedCost", "EffectiveCost", "ListCost")
QUANTITY_COLUMNS = ("ConsumedQuantity", "PricingQuantity")
FLOAT_COLUMNS = (
    "ContractedUnitPrice", "ListUnitPrice", "x_EnergyKWh", "x_GpuEnergyKWh", "x_OperationalKgCO2e",
    "x_EmbodiedKgCO2e", "x_Coverage",
)  # fmt: skip
DATETIME_COLUMNS = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")
# The columns FOCUS 1.2 makes mandatory (never null in fleetwatt's rows but ChargeClass, null for a charge
# that corrects nothing), checked on every export's file by the tests besides the FinOps validator.
MANDATORY_1_2 = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargePeriodEnd",
    "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity",
    "PricingUnit", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
)  # fmt: skip


def month_bounds(first: date) -> tuple[datetime, datetime]:
    """[first day of the month 00:00Z, first day of the next month 00:00Z)."""
    after = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return datetime.combine(first, time(0), tzinfo=UTC), datetime.combine(after, time(0), tzinfo=UTC)


def iso_z(moment: datetime) -> str:
    """FOCUS's date/time format: extended ISO 8601 in UTC, seconds included, ending in Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def apportion(exact: Sequence[Decimal], total: Decimal, currency: str) -> list[Decimal]:
    """`total` (whole minor units) split over parts in proportion to their exact amounts, by largest remainder:
    each quota rounded down to the minor unit, the units left over one each to the largest remainders (ties:
    the earlier part). The parts add up to `total` exactly. Parts that are all zero share it equally."""
    if not exact:
        return []
    unit = Decimal(1).scaleb(-minor_exponent(currency))
    whole = sum(exact, Decimal(0))
    weights = list(exact) if whole else [Decimal(1)] * len(exact)
    weight_sum = whole if whole else Decimal(len(exact))
    quotas = [total * w / weight_sum for w in weights]
    floors = [(q / unit).to_integral_value(rounding=ROUND_FLOOR) * unit for q in quotas]
    left = int(((total - sum(floors, Decimal(0))) / unit).to_integral_value())
    order = sorted(range(len(exact)), key=lambda i: (-(quotas[i] - floors[i]), i))
    for i in order[: max(0, left)]:
        floors[i] += unit
    return [f.quantize(unit) for f in floors]


def _quantity(value: float) -> Decimal:
    quantity = Decimal(repr(float(value))).quantize(QUANTITY_PLACES)
    return abs(quantity) if quantity.is_zero() else quantity  # (a line less its part can leave a float's -0.0)


def _methods(by_method: Mapping[str, float]) -> tuple[str | None, float | None]:
    """The split methods of the day's GPU energy, exact to rough, and its coverage: the share of the energy
    found from samples (every method but `estimated`, the scheduler's word for time nobody sampled)."""
    joules = {m: j for m, j in by_method.items() if j}
    total = sum(joules.values())
    if not total:
        return None, None
    known = [m.value for m in Method if m.value in joules] + sorted(m for m in joules if m not in set(Method))
    return ",".join(known), 1.0 - joules.get(Method.ESTIMATED.value, 0.0) / total


def _energy_exact(facility_kwh: float, price_per_kwh: Decimal, cost: Decimal) -> Decimal:
    """The facility energy charge's exact cost: the facility kWh at the site's price, never below 0 nor above the
    whole `cost` (the GPU-hours charge is the rest)."""
    energy = (Decimal(repr(float(facility_kwh))) * price_per_kwh).quantize(QUANTITY_PLACES)
    return max(Decimal(0), min(energy, cost))


@dataclass
class _Charge:
    usage: TeamClusterDay
    kind: str
    exact: Decimal


def _charges(usage: TeamClusterDay) -> list[_Charge]:
    energy = _energy_exact(usage.facility_kwh, usage.price_per_kwh, usage.cost)
    return [_Charge(usage, GPU_HOURS, usage.cost - energy), _Charge(usage, ENERGY, energy)]


# (cluster, day, charge kind) -> the origin charge's BilledCost: every row of that cluster, day and kind.
OriginTotals = Mapping[tuple[str, date, str], Decimal]


def origin_totals(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, date, str], Decimal]:
    """Each origin charge's amount, from every row of it (focus_rows' of every team and unallocated_rows')."""
    totals: dict[tuple[str, date, str], Decimal] = defaultdict(Decimal)
    for row in rows:
        if row["x_Origin"] is not None:
            totals[row["x_Origin"]] += row["BilledCost"]
    return totals


def allocation_apply(rows: Iterable[dict[str, Any]], totals: OriginTotals | None) -> Iterator[dict[str, Any]]:
    """FOCUS 1.3's allocation columns of each row (`totals`: origin_totals over every row of the origin charges,
    every team's and the unallocated ones; None where the viewer may not see every team: the method, no ratio).
    An origin charge of nothing is split equally."""
    counts: dict[tuple[str, date, str], int] = defaultdict(int)
    listed = list(rows)
    for row in listed:
        if row["x_Origin"] is not None:
            counts[row["x_Origin"]] += 1
    for row in listed:
        origin = row.pop("x_Origin")
        if origin is not None and totals is not None:
            whole = totals.get(origin, Decimal(0))
            ratio = float(row["BilledCost"] / whole) if whole else 1.0 / max(1, counts[origin])
            details = json.loads(row["AllocatedMethodDetails"])
            details["Elements"][0] = {"AllocatedRatio": ratio, **details["Elements"][0]}
            row["AllocatedMethodDetails"] = json.dumps(details, sort_keys=False)
        elif origin is not None:
            row["AllocatedMethodDetails"] = None
        yield row


def focus_rows(
    usages: Iterable[TeamClusterDay], targets: Targets, *, month: date, names: FocusNames
) -> Iterator[dict[str, Any]]:
    """The month's FOCUS rows of the teams, ordered by team, day, cluster and charge. A team-day with a booked
    amount and no daily sums (sums not rebuilt yet) still books it, on a GPU-hours charge without quantities, so
    the totals equal the rollups'. Each row carries `x_Origin` (its origin charge: cluster, day, kind; None for
    such a bare row) until allocation_apply fills the 1.3 columns from it and drops it."""
    period = month_bounds(month)
    groups: dict[tuple[int, date, str], list[_Charge]] = defaultdict(list)
    for usage in usages:
        groups[(usage.team_id, usage.day, usage.currency)].extend(_charges(usage))
    teams = {key[0]: c[0].usage.team for key, c in groups.items()}
    for key in targets:
        if key not in groups and targets[key]:
            team_id, day, currency = key
            bare = TeamClusterDay(team_id, teams.get(team_id, str(team_id)), "", day, currency, 0.0, 0.0, 0.0,
                                  0.0, 0.0, Decimal(0), Decimal(0))  # fmt: skip
            groups[key] = [_Charge(bare, GPU_HOURS, Decimal(0))]
    order = sorted(groups, key=lambda k: (groups[k][0].usage.team, k[1], k[2]))
    for key in order:
        charges = sorted(groups[key], key=lambda c: (c.usage.cluster, c.kind != GPU_HOURS))
        currency = key[2]
        booked = apportion([c.exact for c in charges], targets.get(key, Decimal(0)), currency)
        for charge, amount in zip(charges, booked, strict=True):
            yield _team_row(charge, amount, period=period, names=names)


def unallocated_booked(*, idle_cost: Decimal, unseen_cost: Decimal, currency: str) -> dict[str, Decimal]:
    """A cluster-day's idle line booked in its two parts, in the currency's minor unit, as the cluster's daily
    rollup books them: the part nobody saw (UNOBSERVED, the rollup's `unobserved.cost`) its own cost rounded
    half-even; the idle seen (IDLE) the whole line rounded (the rollup's `idle.cost`) less that. Rounding the idle
    seen on its own could miss the line by a unit; this way the two add up to it to the cent."""
    unobserved = round_minor(unseen_cost, currency)
    return {IDLE: round_minor(idle_cost, currency) - unobserved, UNOBSERVED: unobserved}


_UNALLOCATED_DESCRIPTIONS = {
    (IDLE, GPU_HOURS): "Idle GPU-hours on cluster {cluster}: GPUs seen with no job (unallocated)",
    (IDLE, ENERGY): "Facility energy of idle GPUs on cluster {cluster}: seen with no job (unallocated)",
    (UNOBSERVED, GPU_HOURS): "Unobserved GPU-hours on cluster {cluster}: nobody saw whether a job ran (unallocated)",
    (UNOBSERVED, ENERGY): (
        "Facility energy of unobserved GPU time on cluster {cluster}: nobody saw whether a job ran (unallocated)"
    ),
}


def _is_nothing(part: Footprint, amount: Decimal) -> bool:
    """Nothing to book and nothing to show to the file's places: no row (most cluster-days have no unseen part)."""
    return amount.is_zero() and all(_quantity(q).is_zero() for q in (part.gpu_hours, part.facility_kwh, part.gpu_kwh))


def unallocated_rows(days: Iterable[ClusterIdleDay], *, month: date, names: FocusNames) -> Iterator[dict[str, Any]]:
    """The clusters' cost that no team's jobs carry, as the unallocated part of their origin charges: per cluster,
    UTC day and line (IDLE: the idle line less the part nobody saw; UNOBSERVED: that part) with anything in it,
    a GPU-hours and a facility energy row, ordered by day, cluster, line and charge. A line's booked amount
    (unallocated_booked) is apportioned over its two charges by their exact costs, as a team-day's is. Each row
    carries `x_Origin` until allocation_apply."""
    period = month_bounds(month)
    for at in sorted(days, key=lambda d: (d.day, d.cluster)):
        booked = unallocated_booked(idle_cost=at.idle.cost, unseen_cost=at.unseen.cost, currency=at.currency)
        for line, part in ((IDLE, at.idle - at.unseen), (UNOBSERVED, at.unseen)):
            if _is_nothing(part, booked[line]):
                continue
            energy = _energy_exact(part.facility_kwh, at.price_per_kwh, part.cost)
            amounts = apportion([part.cost - energy, energy], booked[line], at.currency)
            for kind, amount in zip((GPU_HOURS, ENERGY), amounts, strict=True):
                description = _UNALLOCATED_DESCRIPTIONS[(line, kind)].format(cluster=at.cluster)
                row = _charge_row(at, kind, amount, part, description=description, period=period, names=names)
                tags = {"fleetwatt/charge": kind, "fleetwatt/cluster": at.cluster}
                if at.site:
                    tags["fleetwatt/site"] = at.site
                # No sub account (FOCUS: null where a charge applies to none) and no AllocatedResource*: the
                # unallocated portion of the origin charge (FOCUS 1.3), allocated by the charge's method all the same.
                row.update({"Tags": json.dumps(tags, sort_keys=True), "x_CostLine": line,
                            **_allocation(kind, part, to=None)})  # fmt: skip
                yield row


class _OnClusterDay(Protocol):
    """Where a row's charge is: a cluster (empty: none known), a UTC day, a site and its currency."""

    @property
    def cluster(self) -> str: ...
    @property
    def day(self) -> date: ...
    @property
    def currency(self) -> str: ...
    @property
    def site(self) -> str | None: ...
    @property
    def intensity_basis(self) -> str | None: ...


def _charge_row(
    at: _OnClusterDay, kind: str, amount: Decimal, figures: Footprint, *, description: str,
    period: tuple[datetime, datetime], names: FocusNames,
) -> dict[str, Any]:  # fmt: skip
    """The columns every row has: its money, who bills whom, the charge and its period, the cluster and site,
    and the figures on this charge (each quantity on one charge only)."""
    day_start = datetime.combine(at.day, time(0), tzinfo=UTC)
    gpu = kind == GPU_HOURS
    quantity, unit = (figures.gpu_hours, "GPU-Hours") if gpu else (figures.facility_kwh, "kWh")
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        {
            "BilledCost": amount,
            "ContractedCost": amount,  # no negotiated price: the contracted cost is the list cost
            "EffectiveCost": amount,  # no discount or commitment to amortise
            "ListCost": amount,  # no unit price published: a charge of its own matches BilledCost
            "BillingAccountId": names.billing_account_id,
            "BillingAccountName": names.billing_account_name,
            "BillingCurrency": at.currency,
            "BillingPeriodStart": iso_z(period[0]),
            "BillingPeriodEnd": iso_z(period[1]),
            "ChargeCategory": "Usage",
            "ChargeClass": None,
            "ChargeDescription": description,
            "ChargeFrequency": "Usage-Based",
            "ChargePeriodStart": iso_z(day_start),
            "ChargePeriodEnd": iso_z(day_start + timedelta(days=1)),
            "ConsumedQuantity": _quantity(quantity),
            "ConsumedUnit": unit,
            "InvoiceIssuerName": names.invoice_issuer_name,
            "PricingCategory": "Standard",
            "PricingQuantity": _quantity(quantity),
            "PricingUnit": unit,
            "ProviderName": names.provider_name,
            "PublisherName": names.publisher_name,
            "RegionId": at.site,
            "RegionName": at.site,
            "ResourceId": at.cluster or None,
            "ResourceName": at.cluster or None,
            "ResourceType": RESOURCE_TYPE if at.cluster else None,
            "ServiceCategory": SERVICE_CATEGORY,
            "ServiceName": SERVICE_NAME,
            "x_EmbodiedKgCO2e": figures.embodied_kg if gpu else None,
            "x_EnergyKWh": None if gpu else figures.facility_kwh,
            "x_GpuEnergyKWh": None if gpu else figures.energy_j / J_PER_KWH,
            "x_OperationalKgCO2e": None if gpu or at.intensity_basis is None else figures.operational_kg,
            "x_IntensityBasis": at.intensity_basis,
            "x_Origin": (at.cluster, at.day, kind) if at.cluster else None,
        }
    )
    return row


def _allocation(
    kind: str, figures: Footprint, *, to: tuple[str, str] | None, split_methods: str | None = None
) -> dict[str, Any]:
    """FOCUS 1.3's allocation columns of a row of an origin charge of `kind`: allocated `to` a team (its id and
    name), or the unallocated portion (None). The ratio goes first, by allocation_apply, once the origin charge's
    whole is known."""
    gpu = kind == GPU_HOURS
    quantity, unit = (figures.gpu_hours, "GPU-Hours") if gpu else (figures.facility_kwh, "kWh")
    details: dict[str, Any] = {"Elements": [{"UsageUnit": unit, "UsageQuantity": float(_quantity(quantity))}]}
    if split_methods and not gpu:
        details["x_SplitMethods"] = split_methods
    return {
        "AllocatedMethodId": ALLOCATED_METHOD[kind],
        "AllocatedMethodDetails": json.dumps(details),
        "AllocatedResourceId": to[0] if to else None,
        "AllocatedResourceName": to[1] if to else None,
        "AllocatedTags": json.dumps({"fleetwatt/team": to[1]}, sort_keys=True) if to else None,
    }


def _team_row(
    charge: _Charge, amount: Decimal, *, period: tuple[datetime, datetime], names: FocusNames
) -> dict[str, Any]:
    u = charge.usage
    gpu = charge.kind == GPU_HOURS
    figures = Footprint(energy_j=u.energy_j, gpu_hours=u.gpu_hours, facility_kwh=u.facility_kwh,
                        operational_kg=u.operational_kg, embodied_kg=u.embodied_kg, cost=u.cost)  # fmt: skip
    methods, coverage = _methods(u.energy_by_method_j)
    where = f" on cluster {u.cluster}" if u.cluster else ""
    description = f"{'GPU-hours' if gpu else 'Facility energy'} of team {u.team}{where}"
    row = _charge_row(u, charge.kind, amount, figures, description=description, period=period, names=names)
    tags = {"fleetwatt/team": u.team, "fleetwatt/charge": charge.kind}
    if u.cluster:
        tags["fleetwatt/cluster"] = u.cluster
    if u.site:
        tags["fleetwatt/site"] = u.site
    row.update(
        {
            "SubAccountId": f"team-{u.team_id}",  # text, never read back as a number
            "SubAccountName": u.team,
            "Tags": json.dumps(tags, sort_keys=True),
            "x_SplitMethod": methods,
            "x_Coverage": coverage,
            "x_CostLine": JOBS,
        }
    )
    if u.cluster:
        row.update(_allocation(charge.kind, figures, to=(f"team-{u.team_id}", u.team), split_methods=methods))
    return row


# --- the two encodings ----------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def csv_chunks(rows: Iterable[Mapping[str, Any]], *, every: int = 500) -> Iterator[str]:
    """The rows as CSV (RFC 4180, CRLF), the header first, a chunk every `every` rows: a file with only the
    header when there are none. Null is an empty cell; money is its exact decimal text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for n, row in enumerate(rows, 1):
        writer.writerow([_text(row[c]) for c in COLUMNS])
        if n % every == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


def parquet_schema() -> pa.Schema:
    """Money as decimals (exact; 3 places hold every ISO 4217 minor unit), quantities as decimals to the
    millionth, date/times as UTC timestamps, the rest as strings and doubles."""
    fields = []
    for name in COLUMNS:
        if name in MONEY_COLUMNS:
            kind: pa.DataType = pa.decimal128(18, 3)
        elif name in QUANTITY_COLUMNS:
            kind = pa.decimal128(24, 6)
        elif name in DATETIME_COLUMNS:
            kind = pa.timestamp("s", tz="UTC")
        elif name in FLOAT_COLUMNS:
            kind = pa.float64()
        else:
            kind = pa.string()
        fields.append(pa.field(name, kind, nullable=True))
    return pa.schema(fields)


def _parquet_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in DATETIME_COLUMNS:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return value


def parquet_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """The rows as one Parquet file (the columns and types of parquet_schema, whatever the row count)."""
    schema = parquet_schema()
    listed = list(rows)
    columns = {name: [_parquet_value(name, r[name]) for r in listed] for name in COLUMNS}
    table = pa.table(columns, schema=schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()
