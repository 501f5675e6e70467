"""apps.telemetry.guard (pure): never delete what the source forgot. The fresh answer is counted as the stored hour is
counted (its GPUs, job rows, GPU energy and work rows); the same answer again, or one with more, is never a loss,
whatever the hour; nothing stored is never a loss; otherwise the first reason found is said, in a fixed order
(retention, every GPU gone, a GPU gone, energy, served work). The table of losses and the retention's forms, with a
real Prometheus that forgot an hour: tests/faults/test_source_loss.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.telemetry.guard import HourTotals, beyond_retention, fresh_hour_totals, retention_parse, source_loss
from apps.telemetry.hour import GpuHourRow, HourResult, JobGpuHourRow
from apps.telemetry.work import WorkRow


def _result(energies: dict[str, float], job_rows: int) -> HourResult:
    return HourResult(
        gpus={},
        gpu_hours=[
            GpuHourRow(uuid=u, source="agent", device_energy_j=j, agent_energy_j=j, dcgm_energy_j=None)
            for u, j in energies.items()
        ],
        job_hours=[JobGpuHourRow(job_key=f"slurm/{n}", uuid="GPU-a", source="agent") for n in range(job_rows)],
        jobs={},
    )


def test_the_fresh_answer_is_counted_as_the_stored_hour_is() -> None:
    totals = fresh_hour_totals(_result({"GPU-a": 1e6, "GPU-b": 2.5e6}, job_rows=3), [WorkRow("slurm/1", "vllm")] * 2)
    assert totals == HourTotals(gpus=frozenset({"GPU-a", "GPU-b"}), job_rows=3, device_energy_j=3.5e6, work_rows=2)
    assert totals.gpu_hours == 2 and not totals.empty
    assert fresh_hour_totals(_result({}, 0)).empty and fresh_hour_totals(_result({}, 0)).work_rows == 0


def test_an_hour_is_empty_only_without_gpus_and_job_rows() -> None:
    assert HourTotals().empty
    assert not HourTotals(job_rows=1).empty and not HourTotals(gpus=frozenset({"GPU-a"})).empty
    assert HourTotals(work_rows=5).empty  # work is tied to jobs' rows: none without them


totals = st.builds(
    HourTotals,
    gpus=st.frozensets(st.sampled_from([f"GPU-{i}" for i in range(6)]), max_size=6),
    job_rows=st.integers(min_value=0, max_value=50),
    device_energy_j=st.floats(min_value=0, max_value=1e10),
    work_rows=st.integers(min_value=0, max_value=50),
)


@given(stored=totals, more_gpus=st.frozensets(st.sampled_from(["GPU-x", "GPU-y"])), more_j=st.floats(0, 1e9),
       more_work=st.integers(0, 10), min_ratio=st.floats(0.5, 1.0))  # fmt: skip
def test_the_same_answer_or_more_is_never_a_loss_within_retention(
    stored: HourTotals, more_gpus: frozenset[str], more_j: float, more_work: int, min_ratio: float
) -> None:
    fresh = HourTotals(
        gpus=stored.gpus | more_gpus,
        job_rows=stored.job_rows,
        device_energy_j=stored.device_energy_j + more_j,
        work_rows=stored.work_rows + more_work,
    )
    assert source_loss(stored=stored, fresh=stored, beyond=False, min_ratio=min_ratio) is None
    assert source_loss(stored=stored, fresh=fresh, beyond=False, min_ratio=min_ratio) is None


@given(fresh=totals, beyond=st.booleans())
def test_nothing_stored_is_never_a_loss(fresh: HourTotals, beyond: bool) -> None:
    assert source_loss(stored=HourTotals(), fresh=fresh, beyond=beyond, min_ratio=0.99) is None


@given(stored=totals, fresh=totals)
def test_past_the_sources_retention_any_stored_hour_is_kept(stored: HourTotals, fresh: HourTotals) -> None:
    reason = source_loss(stored=stored, fresh=fresh, beyond=True, min_ratio=0.99)
    assert (reason is None) == stored.empty
    if reason:
        assert reason.startswith("the hour is older than the source's retention")


STORED = HourTotals(gpus=frozenset({"GPU-a", "GPU-b"}), job_rows=10, device_energy_j=2e6, work_rows=4)


@pytest.mark.parametrize(
    ("fresh", "reason"),
    [
        (HourTotals(), "the source now gives 0 GPU-hours where 2 are stored"),
        (HourTotals(gpus=frozenset({"GPU-b", "GPU-c"}), device_energy_j=1e3),  # a GPU gone outweighs the energy
         "the source no longer gives 1 of the 2 GPU-hours stored (e.g. GPU-a): a node or exporter it lost"),
        (HourTotals(gpus=STORED.gpus, job_rows=10, device_energy_j=1e6, work_rows=0),  # energy before work
         "the source now gives 0.28 kWh of GPU energy where 0.56 kWh are stored"),
        (HourTotals(gpus=STORED.gpus, job_rows=10, device_energy_j=2e6, work_rows=3),
         "the source now gives 3 rows of served work where 4 are stored"),
    ],
)  # fmt: skip
def test_the_first_loss_found_is_said(fresh: HourTotals, reason: str) -> None:
    assert source_loss(stored=STORED, fresh=fresh, beyond=False, min_ratio=0.99) == reason


def test_energy_at_exactly_the_ratio_is_not_a_loss() -> None:
    fresh = HourTotals(gpus=STORED.gpus, job_rows=10, device_energy_j=0.99 * 2e6, work_rows=4)
    assert source_loss(stored=STORED, fresh=fresh, beyond=False, min_ratio=0.99) is None
    # job rows are not compared: the GPUs and their energy are
    fewer_rows = HourTotals(gpus=STORED.gpus, job_rows=1, device_energy_j=2e6, work_rows=4)
    assert source_loss(stored=STORED, fresh=fewer_rows, beyond=False, min_ratio=0.99) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1d12h", timedelta(days=1, hours=12)),
        ("90m", timedelta(minutes=90)),
        ("1500ms", timedelta(seconds=1.5)),
        ("1w 2d", timedelta(days=9)),  # spaces as some runtime infos write them
        ("10GB or 15d", None),  # the size first: no time part before " or "
        ("15", None),
        ("d", None),
        ("15x", None),
    ],
)
def test_more_retention_forms(text: str, expected: timedelta | None) -> None:
    assert retention_parse(text) == expected


def test_an_hour_exactly_at_the_retention_horizon_is_still_held() -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    retention = timedelta(days=15)
    assert not beyond_retention(hour=now - retention, now=now, retention=retention)
    assert beyond_retention(hour=now - retention - timedelta(hours=1), now=now, retention=retention)
