"""apps.waste.triage (pure): the queue's order by money at stake, a rule's amount as the page shows it, and the
fingerprint a rule's preview carries to its confirmation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.waste.kinds import FlagKind
from apps.waste.triage import BulkRule, money_first, oldest_first, selection_digest

T0 = datetime(2026, 11, 2, tzinfo=UTC)


def test_money_first_then_oldest_and_none_at_stake_last() -> None:
    found = [(1, T0 + timedelta(hours=3)), (2, T0), (3, T0 + timedelta(hours=1)), (4, T0 + timedelta(hours=2)),
             (5, T0 - timedelta(hours=1))]  # fmt: skip
    stake = {1: Decimal("2.00"), 2: Decimal("0.50"), 3: Decimal("2.00"), 4: Decimal(0)}
    # 3 and 1 tie on money: the older first; 4 has nothing at stake but is counted; 5 is not counted at all
    assert money_first(found, stake) == [3, 1, 2, 4, 5]
    assert oldest_first(found) == [5, 2, 3, 4, 1]


def _rule(under: str, currency: str = "EUR") -> BulkRule:
    return BulkRule(kind=FlagKind.FAILED_RUN, under=Decimal(under), currency=currency, start=T0,
                    end=T0 + timedelta(days=7))  # fmt: skip


def test_a_rule_compares_the_amount_the_page_shows() -> None:
    rule = _rule("1")
    assert rule.takes(Decimal("0.994")) and not rule.takes(Decimal("0.995")) and not rule.takes(Decimal("1"))
    assert _rule("1", "JPY").takes(Decimal("0.49")) and not _rule("1", "JPY").takes(Decimal("0.5001"))
    assert not _rule("0").takes(Decimal(0))  # under nothing takes nothing


def test_a_rule_says_itself_in_plain_words() -> None:
    words = _rule("0.5").words
    assert words == (
        "Failed Run findings under 0.50 EUR each, money at stake from 2026-11-02 to 2026-11-09 (UTC days, "
        "end exclusive)"
    )
    assert "_" not in words


def test_the_selection_is_the_set_of_findings_whatever_their_order() -> None:
    assert selection_digest([3, 1, 2]) == selection_digest([1, 2, 3, 3])
    assert selection_digest([1, 2]) != selection_digest([1, 2, 3]) != selection_digest([])
