"""Energy, carbon and money per token served (pure): the per-token figures of a set of serving jobs over a period,
per model, team or cluster (docs/arithmetic.md, "Per token served").

A job's figures in the period are those of all its hours there (its GPU energy, CO2e and billed cost), the hours
it waited for requests included: that is what serving costs. A job that served several models shares them by
its output tokens (prompt tokens where it generated none, requests where it counted neither, else equally). Its
cost is its bill: rounded to the currency's minor unit first, then shared so that its parts add up to it
(apps.core.units.money.split_rounded). A group's figure per token is its sums over its tokens:

    J per 1,000 output tokens    = GPU energy (J) / output tokens x 1,000      (Wh: / 3,600)
    g CO2e per 1,000 tokens      = (operational + embodied) kg x 1,000 / output tokens x 1,000
    cost per million tokens      = billed cost / output tokens x 10^6

None where the group generated no output token, or where the figure is unknown (CO2e where no hour had a grid
intensity; money where the group spans currencies). A job with no measured hour in the period (its GPUs seen by
nobody) has no figures to share: its tokens are counted apart (`unmetered`), never as work done for 0 J.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from apps.core.units.footprint import Footprint
from apps.core.units.money import round_minor, split_rounded

GROUPS = ("model", "team", "cluster")
PER_THOUSAND = 1_000.0
J_PER_WH = 3_600.0
COST_PLACES = Decimal("0.0001")  # cost per million tokens: to a hundredth of a cent


@dataclass(frozen=True)
class Served:
    """What one job served of one model in the period."""

    output_tokens: float = 0.0
    prompt_tokens: float = 0.0
    requests: float = 0.0

    def __add__(self, other: Served) -> Served:
        return Served(
            self.output_tokens + other.output_tokens,
            self.prompt_tokens + other.prompt_tokens,
            self.requests + other.requests,
        )


@dataclass(frozen=True)
class ServingJob:
    """One job's served work in the period, per model, and its footprint there."""

    job_id: int
    team: str
    cluster: str
    currency: str
    footprint: Footprint | None  # None: no hour of it measured in the period
    by_model: Mapping[str, Served]


@dataclass
class PerToken:
    """A group's sums over the period, and its figures per token."""

    group: str  # the model, team or cluster
    served: Served = field(default_factory=Served)
    unmetered: Served = field(default_factory=Served)  # served by jobs with no measured hour in the period
    energy_j: float = 0.0
    operational_kg: float | None = None
    embodied_kg: float = 0.0
    cost: Decimal = Decimal(0)  # billed: the sum of its jobs' rounded costs (their shares)
    currencies: set[str] = field(default_factory=set)
    job_ids: set[int] = field(default_factory=set)

    @property
    def currency(self) -> str:
        return ",".join(sorted(c for c in self.currencies if c))

    @property
    def jobs(self) -> int:
        return len(self.job_ids)

    @property
    def billed_cost(self) -> Decimal | None:
        """The group's cost; None where it spans currencies (amounts of two currencies are never added)."""
        return None if len(self.currencies - {""}) > 1 else self.cost

    def _per_thousand(self, amount: float | None) -> float | None:
        tokens = self.served.output_tokens
        return None if amount is None or tokens <= 0 else amount / tokens * PER_THOUSAND

    @property
    def energy_j_per_1k_tokens(self) -> float | None:
        return self._per_thousand(self.energy_j)

    @property
    def energy_wh_per_1k_tokens(self) -> float | None:
        per = self.energy_j_per_1k_tokens
        return None if per is None else per / J_PER_WH

    @property
    def co2e_kg(self) -> float | None:
        """Operational + embodied; None where no hour had a grid intensity (the operational part unknown)."""
        return None if self.operational_kg is None else self.operational_kg + self.embodied_kg

    @property
    def co2e_g_per_1k_tokens(self) -> float | None:
        kg = self.co2e_kg
        return self._per_thousand(None if kg is None else kg * 1_000.0)

    @property
    def cost_per_million_tokens(self) -> Decimal | None:
        cost = self.billed_cost
        if cost is None or self.served.output_tokens <= 0:
            return None
        return (cost / Decimal(repr(self.served.output_tokens)) * Decimal(1_000_000)).quantize(COST_PLACES)


def model_shares(by_model: Mapping[str, Served]) -> dict[str, float]:
    """How a job's figures are shared between the models it served: by output tokens, else prompt tokens, else
    requests, else equally. The shares add up to 1."""
    for amount in ("output_tokens", "prompt_tokens", "requests"):
        total = sum(getattr(s, amount) for s in by_model.values())
        if total > 0:
            return {m: getattr(s, amount) / total for m, s in by_model.items()}
    return {m: 1.0 / len(by_model) for m in by_model} if by_model else {}


def per_token(jobs: Iterable[ServingJob], *, group_by: str) -> list[PerToken]:
    """Each group's sums and per-token figures, largest output first (ties by name)."""
    if group_by not in GROUPS:
        raise ValueError(f"group_by: one of {', '.join(GROUPS)}")
    groups: dict[str, PerToken] = {}
    for job in jobs:
        shares = model_shares(job.by_model)
        if not shares:
            continue
        if job.footprint is None:
            for model, amounts in job.by_model.items():
                name = {"model": model, "team": job.team, "cluster": job.cluster}[group_by]
                group = groups.setdefault(name, PerToken(group=name))
                group.unmetered += amounts
                group.job_ids.add(job.job_id)
            continue
        billed = round_minor(job.footprint.cost, job.currency)
        costs = split_rounded({m: billed * Decimal(repr(share)) for m, share in shares.items()}, job.currency)
        for model, share in shares.items():
            name = {"model": model, "team": job.team, "cluster": job.cluster}[group_by]
            group = groups.setdefault(name, PerToken(group=name))
            part = job.footprint.scaled(share)
            group.served += job.by_model[model]
            group.energy_j += part.energy_j
            if part.operational_kg is not None:
                group.operational_kg = (group.operational_kg or 0.0) + part.operational_kg
            group.embodied_kg += part.embodied_kg
            group.cost += costs[model]
            group.currencies.add(job.currency)
            group.job_ids.add(job.job_id)
    return sorted(groups.values(), key=lambda g: (-g.served.output_tokens, g.group))
