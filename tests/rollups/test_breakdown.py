"""apps.rollups.breakdown (pure): a period split by user and by job group adds up to the bill (each job's cost
rounded on its own), the costliest line first; the waste by kind lists every kind, the most money first."""

from __future__ import annotations

from decimal import Decimal

from apps.core.units.footprint import Footprint
from apps.rollups.breakdown import (
    JobPart,
    bill_of,
    by_group,
    by_user,
    lines_by,
    lines_total,
    waste_kind_lines,
)
from apps.rollups.finance import csv_quantity
from apps.waste.kinds import FlagKind


def _part(job_id: int, user: str, group: int | None, cost: str, *, on_bill: bool = True, currency: str = "EUR",
          waste: str = "0") -> JobPart:  # fmt: skip
    return JobPart(
        job_id=job_id, user=user, group_id=group, group=f"group-{group}" if group else "", state="completed",
        currency=currency, on_bill=on_bill, footprint=Footprint(gpu_hours=1.0, cost=Decimal(cost)),
        waste=Footprint(cost=Decimal(waste)),
    )  # fmt: skip


# Three jobs of a third of a cent over the cent each: rounded one by one, 3.33 each (the exact sum rounds to 10.00).
PARTS = [
    _part(1, "ada", 7, "3.333333", waste="1.5"),
    _part(2, "ada", None, "3.333333"),
    _part(3, "bob", 7, "3.333333"),
    _part(4, "bob", 7, "50.00", on_bill=False),  # off the bill: in no line
    _part(5, "", None, "0.004"),  # rounds to nothing
]


def test_each_split_adds_up_to_the_bill_of_the_jobs_rounded_one_by_one() -> None:
    bill = bill_of(PARTS)
    assert bill.cost == Decimal("9.99") and bill.jobs == 4
    for key in (by_user, by_group):
        lines = lines_by(PARTS, key)
        assert lines_total(lines).cost == bill.cost
        assert lines_total(lines).footprint.gpu_hours == bill.footprint.gpu_hours == 4.0
        assert lines_total(lines).waste.cost == Decimal("1.5")


def test_lines_come_the_costliest_first_then_by_name() -> None:
    users = lines_by(PARTS, by_user)
    assert [(line.key, line.cost, line.jobs) for line in users] == [
        ("ada", Decimal("6.66"), 2), ("bob", Decimal("3.33"), 1), ("", Decimal("0.00"), 1),
    ]  # fmt: skip
    groups = lines_by(PARTS, by_group)
    assert [(line.key, line.label) for line in groups] == [("7", "group-7"), ("", "")]


def test_a_jobs_cost_is_rounded_in_its_own_currency() -> None:
    assert _part(1, "ada", None, "1234.5", currency="JPY").cost == Decimal("1234")
    assert _part(1, "ada", None, "1.2345", currency="KWD").cost == Decimal("1.234")


def test_every_waste_kind_is_listed_the_most_money_first_at_zero_too() -> None:
    lines = waste_kind_lines(
        {"failed_run": 2, "idle_allocation": 1},
        {"failed_run": Footprint(cost=Decimal("3")), "idle_allocation": Footprint(cost=Decimal("5"))},
        "EUR",
    )
    assert [(line.kind, line.findings, line.cost) for line in lines] == [
        (FlagKind.IDLE_ALLOCATION, 1, Decimal("5.00")),
        (FlagKind.FAILED_RUN, 2, Decimal("3.00")),
        (FlagKind.MEMORY_HOG, 0, Decimal("0.00")),
    ]
    # nothing found: every kind at zero, in the kinds' own order
    assert [line.kind for line in waste_kind_lines({}, {}, "EUR")] == [
        FlagKind.MEMORY_HOG, FlagKind.IDLE_ALLOCATION, FlagKind.FAILED_RUN,
    ]  # fmt: skip


def test_the_rounded_waste_of_the_kinds_and_of_the_lines_adds_up_to_the_total_rounded_once() -> None:
    # three half cents: each alone rounds down to even (1.00), the total 3.015 up to 3.02
    once = {kind.value: Footprint(cost=Decimal("1.005")) for kind in FlagKind if kind.info.waste}
    assert sum(line.cost for line in waste_kind_lines({}, once, "EUR")) == Decimal("3.02")
    parts = [_part(k, f"user{k}", None, "1", waste="1.005") for k in range(3)]
    lines = lines_by(parts, by_user)
    assert sorted(line.waste_cost for line in lines) == [Decimal("1.00"), Decimal("1.01"), Decimal("1.01")]
    assert lines_total(lines).waste_cost == Decimal("3.02")


def test_a_csv_quantity_has_no_float_noise() -> None:
    assert str(csv_quantity(0.1 + 0.2)) == "0.3"
    assert str(csv_quantity(12.000000000000002)) == "12.0"
    assert str(csv_quantity(-1e-12)) == "0.0"
    assert csv_quantity(None) is None
