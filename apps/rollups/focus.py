"""A month of the teams' daily sums as FOCUS 1.2 charges, with FOCUS 1.3's split cost allocation columns beside
them (pure: rows from plain inputs; docs/api.md, "FOCUS export").

One row per team x cluster x UTC day x charge: the GPU-hours charge (GPU-hours x the GPU models' rates) and
the facility energy charge (facility kWh x the site's price). A day's cost is split between the two by the
site's price: the energy charge is its facility kWh at that price (never more than the day's cost), the
GPU-hours charge the rest. Each quantity is on one charge only, so any column adds up across rows: GPU-hours
and embodied CO2e on the GPU-hours charge; GPU and facility kWh and operational CO2e on the energy charge.

Money is booked as the rollups book it (apps/core/money.py): a team's day in a currency costs the sum of its
jobs' rounded costs (`targets`, the rollup's day), and that amount is apportioned over the day's charges in
proportion to their exact costs by largest remainder. So the rows of a team-day add up to the rollup's day
to the cent, and a team's month to its rollup's `totals.cost`.

FOCUS 1.3's allocation columns say how each row was allocated from its origin charge, a cluster's charge of
that kind on that day to every team: `AllocatedMethodId` (GPU-hours by the time each job held each GPU, or
facility energy by each job's measured share of each GPU's energy), `AllocatedMethodDetails` (the row's share of
the origin charge, with its quantity, and the split methods of its GPU energy), `AllocatedResourceId`/`Name`
and `AllocatedTags` (the team it went to). The origin charge's other parts are other teams' figures: a
viewer who may not see every team gets the method but no ratio (`origin_totals` None).
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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from apps.core.footprint import J_PER_KWH
from apps.core.money import minor_exponent
from apps.jobs.methods import Method

FOCUS_VERSION = "1.2"  # every 1.2 column, and 1.3's allocation columns (ALLOCATION_COLUMNS) after the others
GPU_HOURS, ENERGY = "gpu-hours", "facility-energy"
# AllocatedMethodId of each charge (docs/api.md, "FOCUS export", documents both).
ALLOCATED_METHOD = {GPU_HOURS: "fleetwatt-gpu-hours-held-v1", ENERGY: "fleetwatt-gpu-energy-split-v1"}
# ServiceCategory: "Compute" is the allowed value for "virtual, containerized, serverless, or high-performance
# computing infrastructure": what a GPU-hour of a cluster is (the workloads' purpose is not ours to say).
SERVICE_CATEGORY = "Compute"
SERVICE_NAME = "GPU compute"
RESOURCE_TYPE = "GPU cluster"
QUANTITY_PLACES = Decimal("0.000001")


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
    # FOCUS 1.3, last: a reader of the 1.2 columns by position reads what it read before.
    "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
)  # fmt: skip
ALLOCATION_COLUMNS = COLUMNS[-5:]
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
    return Decimal(repr(float(value))).quantize(QUANTITY_PLACES)


def _methods(by_method: Mapping[str, float]) -> tuple[str | None, float | None]:
    """The split methods of the day's GPU energy, exact to rough, and its coverage: the share of the energy
    found from samples (every method but `estimated`, the scheduler's word for time nobody sampled)."""
    joules = {m: j for m, j in by_method.items() if j}
    total = sum(joules.values())
    if not total:
        return None, None
    known = [m.value for m in Method if m.value in joules] + sorted(m for m in joules if m not in set(Method))
    return ",".join(known), 1.0 - joules.get(Method.ESTIMATED.value, 0.0) / total


@dataclass
class _Charge:
    usage: TeamClusterDay
    kind: str
    exact: Decimal


def _charges(usage: TeamClusterDay) -> list[_Charge]:
    energy = (Decimal(repr(float(usage.facility_kwh))) * usage.price_per_kwh).quantize(QUANTITY_PLACES)
    energy = max(Decimal(0), min(energy, usage.cost))
    return [_Charge(usage, GPU_HOURS, usage.cost - energy), _Charge(usage, ENERGY, energy)]


# (cluster, day, charge kind) -> the origin charge's BilledCost: every team's rows of that cluster, day and kind.
OriginTotals = Mapping[tuple[str, date, str], Decimal]


def origin_totals(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, date, str], Decimal]:
    """Each origin charge's amount, from the rows of every team (focus_rows' rows)."""
    totals: dict[tuple[str, date, str], Decimal] = defaultdict(Decimal)
    for row in rows:
        if row["x_Origin"] is not None:
            totals[row["x_Origin"]] += row["BilledCost"]
    return totals


def allocation_apply(rows: Iterable[dict[str, Any]], totals: OriginTotals | None) -> Iterator[dict[str, Any]]:
    """FOCUS 1.3's allocation columns of each row (`totals`: origin_totals over every team; None where the viewer
    may not see every team: the method, no ratio). An origin charge of nothing is split equally."""
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
    """The month's FOCUS rows, ordered by team, day, cluster and charge. A team-day with a booked amount and
    no daily sums (sums not rebuilt yet) still books it, on a GPU-hours charge without quantities, so the
    totals equal the rollups'. Each row carries `x_Origin` (its origin charge: cluster, day, kind; None for such
    a bare row) until allocation_apply fills the 1.3 columns from it and drops it."""
    period_start, period_end = month_bounds(month)
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
            row = _row(charge, amount, names=names)
            row["BillingPeriodStart"], row["BillingPeriodEnd"] = iso_z(period_start), iso_z(period_end)
            yield row


def _row(charge: _Charge, amount: Decimal, *, names: FocusNames) -> dict[str, Any]:
    u = charge.usage
    day_start = datetime.combine(u.day, time(0), tzinfo=UTC)
    gpu = charge.kind == GPU_HOURS
    quantity, unit = (u.gpu_hours, "GPU-Hours") if gpu else (u.facility_kwh, "kWh")
    methods, coverage = _methods(u.energy_by_method_j)
    where = f" on cluster {u.cluster}" if u.cluster else ""
    tags = {"fleetwatt/team": u.team, "fleetwatt/charge": charge.kind}
    if u.cluster:
        tags["fleetwatt/cluster"] = u.cluster
    if u.site:
        tags["fleetwatt/site"] = u.site
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        {
            "BilledCost": amount,
            "ContractedCost": amount,  # no negotiated price: the contracted cost is the list cost
            "EffectiveCost": amount,  # no discount or commitment to amortise
            "ListCost": amount,  # no unit price published: a charge of its own matches BilledCost
            "BillingAccountId": names.billing_account_id,
            "BillingAccountName": names.billing_account_name,
            "BillingCurrency": u.currency,
            "ChargeCategory": "Usage",
            "ChargeClass": None,
            "ChargeDescription": f"{'GPU-hours' if gpu else 'Facility energy'} of team {u.team}{where}",
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
            "RegionId": u.site,
            "RegionName": u.site,
            "ResourceId": u.cluster or None,
            "ResourceName": u.cluster or None,
            "ResourceType": RESOURCE_TYPE if u.cluster else None,
            "ServiceCategory": SERVICE_CATEGORY,
            "ServiceName": SERVICE_NAME,
            "SubAccountId": f"team-{u.team_id}",  # text, never read back as a number
            "SubAccountName": u.team,
            "Tags": json.dumps(tags, sort_keys=True),
            "x_EmbodiedKgCO2e": u.embodied_kg if gpu else None,
            "x_EnergyKWh": None if gpu else u.facility_kwh,
            "x_GpuEnergyKWh": None if gpu else u.energy_j / J_PER_KWH,
            "x_OperationalKgCO2e": None if gpu or u.intensity_basis is None else u.operational_kg,
            "x_IntensityBasis": u.intensity_basis,
            "x_SplitMethod": methods,
            "x_Coverage": coverage,
            "x_Origin": (u.cluster, u.day, charge.kind) if u.cluster else None,
        }
    )
    if u.cluster:
        row.update(
            {
                "AllocatedMethodId": ALLOCATED_METHOD[charge.kind],
                # The ratio goes first, by allocation_apply, once the origin charge's whole is known.
                "AllocatedMethodDetails": json.dumps(
                    {
                        "Elements": [{"UsageUnit": unit, "UsageQuantity": float(_quantity(quantity))}],
                        **({"x_SplitMethods": methods} if methods and not gpu else {}),
                    }
                ),
                "AllocatedResourceId": f"team-{u.team_id}",
                "AllocatedResourceName": u.team,
                "AllocatedTags": json.dumps({"fleetwatt/team": u.team}, sort_keys=True),
            }
        )
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
