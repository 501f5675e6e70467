"""Flag kinds and review statuses (apps/waste/kinds.py, pure): each kind described once, which count as waste (each
with its line of the weekly report) and which are raised on a GPU-hour; the statuses a finding counts in."""

from __future__ import annotations

from apps.waste.kinds import (
    COUNTED_STATUSES,
    GPU_HOUR_KINDS,
    KIND_CHOICES,
    KIND_INFO,
    STATUS_CHOICES,
    WASTE_KINDS,
    FlagKind,
    FlagStatus,
)


def test_every_kind_is_described_once_with_a_meaning() -> None:
    assert set(KIND_INFO) == set(FlagKind)
    assert len({k.label for k in FlagKind}) == len(FlagKind)
    assert all(k.info.meaning.endswith(".") for k in FlagKind)
    assert [v for v, _ in KIND_CHOICES] == [k.value for k in FlagKind]


def test_the_waste_kinds_have_a_report_line_and_the_others_none() -> None:
    assert WASTE_KINDS == (FlagKind.MEMORY_HOG, FlagKind.IDLE_ALLOCATION, FlagKind.FAILED_RUN)
    assert all(k.info.report_label for k in WASTE_KINDS)
    assert not any(k.info.report_label for k in FlagKind if k not in WASTE_KINDS)


def test_a_kind_is_raised_on_a_gpu_hour_or_on_a_job_never_waste_on_a_gpu_hour() -> None:
    assert set(GPU_HOUR_KINDS) == {FlagKind.COUNTER_RESET, FlagKind.CONSERVATION, FlagKind.ESTIMATED_OCCUPANCY}
    assert not set(GPU_HOUR_KINDS) & set(WASTE_KINDS)  # waste is a job's: a GPU-hour's finding is about the meter


def test_statuses_and_the_ones_that_count_as_waste() -> None:
    assert [label for _, label in STATUS_CHOICES] == ["Open", "Acknowledged", "Disputed", "Resolved"]
    # an acknowledged finding was expected and a resolved one is over; a disputed one counts until decided
    assert set(COUNTED_STATUSES) == {FlagStatus.OPEN, FlagStatus.DISPUTED}
    assert FlagStatus("disputed").label == "Disputed"
