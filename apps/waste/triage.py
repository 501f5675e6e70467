"""The audit queue's triage (pure): findings in order of the money at stake, and the rule by which an admin decides
many at once ("acknowledge every failed run under 1 EUR from 2 to 9 November").

A finding's money at stake is its cost inside the queue's period, as apps.waste.selectors.period_waste counts it for
the team page and the weekly report (open and disputed findings of jobs on their team's bill): the money is never
computed a second way here, only ordered and compared."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from apps.core.units.money import round_minor

from .kinds import WASTE_KINDS, FlagKind

PAGE_SIZE = 50  # findings on a page of the queue, each with its decision form
RULE_SAMPLE = 10  # findings a rule's preview names


class QueueOrder(StrEnum):
    MONEY = "money"  # the money at stake, largest first (the default)
    OLDEST = "oldest"  # found longest ago first

    @property
    def label(self) -> str:
        return {QueueOrder.MONEY: "money at stake, largest first", QueueOrder.OLDEST: "oldest first"}[self]


QUEUE_ORDER_CHOICES = [(o.value, o.label) for o in QueueOrder]


class Review(StrEnum):
    """The decisions a rule takes: those on a finding alone (moving or excluding a job is decided job by job)."""

    ACKNOWLEDGE = "acknowledge"
    DISPUTE = "dispute"

    @property
    def label(self) -> str:
        return {Review.ACKNOWLEDGE: "acknowledge (expected)", Review.DISPUTE: "dispute (the figures look wrong)"}[self]

    @property
    def done(self) -> str:
        return {Review.ACKNOWLEDGE: "acknowledged", Review.DISPUTE: "disputed"}[self]


REVIEW_CHOICES = [(r.value, r.label) for r in Review]
# A rule picks findings by their money: the kinds that count as waste, the only ones with money at stake.
RULE_KINDS = tuple(FlagKind(k) for k in WASTE_KINDS)
RULE_KIND_CHOICES = [(k.value, k.label) for k in RULE_KINDS]


@dataclass(frozen=True)
class BulkRule:
    """Open findings of `kind` whose money at stake in [start, end) is under `under` `currency` (as shown: rounded to
    the currency's minor unit). A finding with nothing in the period is not taken: its money there is unknown, not
    small."""

    kind: FlagKind
    under: Decimal
    currency: str
    start: datetime
    end: datetime

    @property
    def words(self) -> str:
        """The rule as the pages say it: "Failed Run findings under 1.00 EUR each, 2026-11-02 to 2026-11-09 (UTC)"."""
        return (
            f"{self.kind.label} findings under {round_minor(self.under, self.currency)} {self.currency} each, "
            f"money at stake from {self.start:%Y-%m-%d} to {self.end:%Y-%m-%d} (UTC days, end exclusive)"
        )

    def takes(self, cost: Decimal) -> bool:
        return round_minor(cost, self.currency) < self.under


def money_first(found: Sequence[tuple[int, datetime | int]], stake: Mapping[int, Decimal]) -> list[int]:
    """The findings' ids (`found`: id and when it was found, or its rank among them oldest first) by money at stake,
    largest first; ties, and findings with nothing at stake, oldest first."""
    return [pk for pk, created in sorted(found, key=lambda f: (-stake.get(f[0], Decimal(-1)), f[1], f[0]))]


def oldest_first(found: Sequence[tuple[int, datetime]]) -> list[int]:
    return [pk for pk, _ in sorted(found, key=lambda f: (f[1], f[0]))]


def selection_digest(ids: Iterable[int]) -> str:
    """A short fingerprint of a set of findings: a rule's preview carries it to the confirmation, which decides only
    if the rule still takes the very findings the admin saw counted."""
    text = ",".join(str(pk) for pk in sorted(set(ids)))
    return hashlib.sha256(text.encode()).hexdigest()[:24]
