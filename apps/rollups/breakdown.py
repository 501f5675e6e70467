"""A team's period split by user and by job group, and its waste by finding kind (pure: no Django).

Each job's part inside the period has its cost rounded on its own, in its currency, as the bill rounds it
(docs/api.md, "Money"); a line's cost is the sum of its jobs' rounded costs, so the lines add up to the team's
bill for the period to the cent, whatever way the jobs are split."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from apps.core.units.footprint import Footprint
from apps.core.units.money import round_minor, split_rounded
from apps.waste.kinds import WASTE_KINDS, FlagKind

NO_GROUP = "none"  # the job list's group filter's value for the jobs in no group


@dataclass(frozen=True)
class JobPart:
    """A job's part inside a period: what the lists, the breakdowns and the export show of it."""

    job_id: int
    user: str  # the scheduler's user name ("" where unknown)
    group_id: int | None  # its job group (None: in none)
    group: str  # the group's name ("" for none)
    state: str
    currency: str
    on_bill: bool  # False: an admin excluded it from its team's bill
    footprint: Footprint  # inside the period
    waste: Footprint = field(default_factory=Footprint)  # its counted waste inside the period

    @cached_property  # (read by every sort and sum of the parts)
    def cost(self) -> Decimal:
        """Its cost in the period as the bill books it: rounded half-even in its currency."""
        return round_minor(self.footprint.cost, self.currency)


@dataclass
class BreakdownLine:
    """Jobs added up: their count, footprint, booked cost (the sum of their rounded costs) and counted waste."""

    key: str
    label: str
    jobs: int = 0
    footprint: Footprint = field(default_factory=Footprint)
    cost: Decimal = Decimal(0)
    waste: Footprint = field(default_factory=Footprint)
    # The waste's cost rounded so that the lines' add up to the total's rounded once (waste is no bill: it is
    # rounded once, as the team page shows its total; the remainders go by largest remainder).
    waste_cost: Decimal = Decimal(0)

    def add(self, part: JobPart) -> None:
        self.jobs += 1
        self.footprint += part.footprint
        self.cost += part.cost
        self.waste += part.waste


@dataclass(frozen=True)
class Breakdowns:
    """A team's period split by user and by job group; `total`: every job on the bill (both splits add up to it)."""

    by_user: list[BreakdownLine]
    by_group: list[BreakdownLine]
    total: BreakdownLine


@dataclass(frozen=True)
class JobFilter:
    """The job list's filters ("" or None: any): the scheduler's user name, the state, the job group (an id as
    text, or NO_GROUP)."""

    user: str = ""
    state: str = ""
    group: str = ""

    def keeps(self, part: JobPart) -> bool:
        if self.user and part.user != self.user:
            return False
        if self.state and part.state != self.state:
            return False
        if self.group:
            group = NO_GROUP if part.group_id is None else str(part.group_id)
            if group != self.group:
                return False
        return True


def lines_by(parts: Iterable[JobPart], key: Callable[[JobPart], tuple[str, str]]) -> list[BreakdownLine]:
    """The jobs on the bill added up per `key` (a job's key and label), the costliest line first (then by label)."""
    members: dict[str, tuple[str, list[JobPart]]] = {}
    currencies: set[str] = set()
    for part in parts:
        if part.on_bill:
            k, label = key(part)
            members.setdefault(k, (label, []))[1].append(part)
            currencies.add(part.currency)
    # (Each line's figures added up in its jobs' order, as one `add` after the other would.)
    lines = {
        k: BreakdownLine(
            key=k, label=label, jobs=len(line_parts), footprint=Footprint.total(p.footprint for p in line_parts),
            cost=sum((p.cost for p in line_parts), Decimal(0)), waste=Footprint.total(p.waste for p in line_parts),
        )
        for k, (label, line_parts) in members.items()
    }  # fmt: skip
    shares = split_rounded({k: line.waste.cost for k, line in lines.items()}, ",".join(sorted(currencies)))
    for k, line in lines.items():
        line.waste_cost = shares[k]
    return sorted(lines.values(), key=lambda line: (-line.cost, line.label, line.key))


def lines_total(lines: Iterable[BreakdownLine]) -> BreakdownLine:
    """Lines added up (their costs: the sum of theirs)."""
    total = BreakdownLine(key="", label="total")
    for line in lines:
        total.jobs += line.jobs
        total.footprint += line.footprint
        total.cost += line.cost
        total.waste += line.waste
        total.waste_cost += line.waste_cost
    return total


def bill_of(parts: Iterable[JobPart]) -> BreakdownLine:
    """The jobs on the bill added up: with every job of a team's period, its bill for the period."""
    return lines_total(lines_by(parts, lambda part: ("", "")))


def by_user(part: JobPart) -> tuple[str, str]:
    return part.user, part.user


def by_group(part: JobPart) -> tuple[str, str]:
    return ("" if part.group_id is None else str(part.group_id)), part.group


@dataclass(frozen=True)
class KindLine:
    """One waste kind in a period: its findings counted, and the GPU-hours counted under it (a GPU-hour that
    several kinds share under the first: the kinds add up to the waste total); `cost`: its cost rounded so that
    the kinds' add up to the total's rounded once."""

    kind: FlagKind
    findings: int
    footprint: Footprint
    cost: Decimal


def waste_kind_lines(findings: Mapping[str, int], once: Mapping[str, Footprint], currency: str) -> list[KindLine]:
    """Every waste kind, at zero where none was found, the most money at stake first (then in WASTE_KINDS' order):
    `findings` counted per kind, `once` the waste total split by kind (apps.waste.selectors, per_kind_once)."""
    parts = {kind.value: once.get(kind, Footprint()) for kind in WASTE_KINDS}
    costs = split_rounded({kind: fp.cost for kind, fp in parts.items()}, currency)
    lines = [KindLine(kind, findings.get(kind, 0), parts[kind.value], costs[kind.value]) for kind in WASTE_KINDS]
    return sorted(lines, key=lambda line: (-line.footprint.cost, -line.footprint.gpu_hours))
