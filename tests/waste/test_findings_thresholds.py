"""Waste findings (apps.waste.findings) at and around every threshold, the merging of a GPU's sources,
and the evidence's fields and units. Pure: no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.core.units.footprint import Footprint
from apps.jobs.summary import JobGpuTotals
from apps.waste.findings import Thresholds, findings, per_gpu
from apps.waste.kinds import FlagKind

GIB = 1024**3
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
H = timedelta(hours=1)
DEFAULT = Thresholds()
HOG, IDLE = FlagKind.MEMORY_HOG, FlagKind.IDLE_ALLOCATION
EVIDENCE = {
    "from", "to", "gpus", "memory_bytes", "sm_percent", "gpu_hours_blocked", "energy_kwh", "facility_kwh",
    "co2e_kg", "cost",
}  # fmt: skip


def use(
    *,
    uuid: str = "GPU-a",
    sampled_s: float = 7200.0,
    sm_s: float = 0.0,
    occupancy_s: float | None = None,
    memory: int = 0,
    hours: int = 2,
    source: str = "agent",
    cost: str = "0",
) -> JobGpuTotals:
    """One job on one GPU; its footprint from the same occupancy, as the rows' sums give it."""
    occupancy = sampled_s if occupancy_s is None else occupancy_s
    return JobGpuTotals(
        gpu_id=ord(uuid[-1]),
        gpu_uuid=uuid,
        source=source,
        sampled_s=sampled_s,
        sm_s=sm_s,
        occupancy_s=occupancy,
        peak_memory_bytes=memory,
        first_hour=T0,
        last_hour=T0 + (hours - 1) * H,
        footprint=Footprint.from_sums({"occupancy_s": occupancy, "cost": Decimal(cost)}),
    )


def shared(**kwargs) -> JobGpuTotals:
    """A GPU the job shares (charged half the time it was seen): never an idle allocation."""
    sampled = kwargs.pop("sampled_s", 7200.0)
    return use(sampled_s=sampled, occupancy_s=sampled / 2, **kwargs)


def kinds(*totals: JobGpuTotals, thresholds: Thresholds = DEFAULT) -> set[str]:
    return set(findings(list(totals), thresholds))


# memory_hog: at least 1 GiB, SM under 1 %, for at least 1,800 s


@pytest.mark.parametrize(
    ("memory", "hog"), [(GIB - 1, False), (GIB, True), (GIB + 1, True)], ids=["below", "at", "above"]
)
def test_hog_memory_edge(memory: int, hog: bool) -> None:
    assert (HOG in kinds(shared(memory=memory))) is hog


@pytest.mark.parametrize(("sm_s", "hog"), [(99.0, True), (100.0, False), (101.0, False)], ids=["below", "at", "above"])
def test_hog_sm_edge_is_strictly_under_1_percent(sm_s: float, hog: bool) -> None:
    # given: 100 of 10,000 sampled seconds busy is exactly 1 %
    gpu = shared(sampled_s=10_000.0, sm_s=sm_s, memory=2 * GIB)
    # then
    assert (HOG in kinds(gpu)) is hog


@pytest.mark.parametrize(
    ("sampled_s", "hog"), [(1799.0, False), (1800.0, True), (1801.0, True)], ids=["below", "at", "above"]
)
def test_hog_duration_edge(sampled_s: float, hog: bool) -> None:
    assert (HOG in kinds(shared(sampled_s=sampled_s, memory=2 * GIB))) is hog


# idle_allocation: alone on the GPU, SM under 5 %, for at least 3,600 s


@pytest.mark.parametrize(
    ("sm_s", "idle"), [(499.0, True), (500.0, False), (501.0, False)], ids=["below", "at", "above"]
)
def test_idle_sm_edge_is_strictly_under_5_percent(sm_s: float, idle: bool) -> None:
    # given: 500 of 10,000 sampled seconds busy is exactly 5 %
    assert (IDLE in kinds(use(sampled_s=10_000.0, sm_s=sm_s))) is idle


@pytest.mark.parametrize(
    ("sampled_s", "idle"), [(3599.0, False), (3600.0, True), (3601.0, True)], ids=["below", "at", "above"]
)
def test_idle_duration_edge(sampled_s: float, idle: bool) -> None:
    assert (IDLE in kinds(use(sampled_s=sampled_s))) is idle


@pytest.mark.parametrize(
    ("occupancy_s", "idle"), [(9899.0, False), (9900.0, True), (9901.0, True)], ids=["below", "at", "above"]
)
def test_alone_edge_is_occupied_99_percent_of_the_time_seen(occupancy_s: float, idle: bool) -> None:
    # given
    gpu = use(sampled_s=10_000.0, occupancy_s=occupancy_s)
    # then
    assert gpu.alone is idle
    assert (IDLE in kinds(gpu)) is idle


def test_nothing_sampled_is_never_alone_nor_idle() -> None:
    gpu = use(sampled_s=0.0, occupancy_s=0.0)
    assert not gpu.alone and gpu.sm_fraction == 0.0
    assert kinds(gpu, thresholds=Thresholds(idle_min_seconds=0.0, hog_min_seconds=0.0)) == set()


def test_a_busy_job_has_no_findings() -> None:
    assert findings([use(sm_s=7000.0, memory=40 * GIB)], DEFAULT) == {}


def test_thresholds_are_the_callers() -> None:
    # given: 2 % SM on a whole GPU for 20 minutes, 512 MiB held
    gpu = use(sampled_s=1200.0, sm_s=24.0, memory=GIB // 2)
    strict = Thresholds(
        hog_min_memory_bytes=GIB // 4, hog_max_sm=0.03, hog_min_seconds=600, idle_max_sm=0.01, idle_min_seconds=600
    )
    # then
    assert kinds(gpu) == set()
    assert kinds(gpu, thresholds=strict) == {HOG}
    assert kinds(gpu, thresholds=replace(strict, idle_max_sm=0.05)) == {IDLE}


# An idle GPU is not also a hog


def test_an_idle_gpu_holding_memory_is_idle_not_a_hog() -> None:
    # given: alone, 0 % SM, 10 GiB, two hours: both rules hold
    gpu = use(memory=10 * GIB)
    # then
    assert kinds(gpu) == {IDLE}


def test_under_an_hour_the_same_gpu_is_a_hog() -> None:
    assert kinds(use(sampled_s=3599.0, memory=10 * GIB)) == {HOG}


def test_one_job_can_be_idle_on_one_gpu_and_a_hog_on_another() -> None:
    # when
    found = findings([use(uuid="GPU-a"), shared(uuid="GPU-b", memory=2 * GIB)], DEFAULT)
    # then
    assert found[IDLE]["gpus"] == ["GPU-a"]
    assert found[HOG]["gpus"] == ["GPU-b"]


# per_gpu: a GPU's agent and dcgm-exporter hours are one use


def test_per_gpu_merges_the_sources_of_one_gpu() -> None:
    # given
    agent = replace(
        use(uuid="GPU-a", sampled_s=3000, sm_s=30, occupancy_s=2000, memory=3 * GIB, cost="1.10"),
        first_hour=T0 + H,
        last_hour=T0 + 2 * H,
    )
    dcgm = replace(
        use(uuid="GPU-a", sampled_s=1000, sm_s=10, occupancy_s=500, memory=5 * GIB, source="dcgm", cost="0.40"),
        first_hour=T0,
        last_hour=T0 + H,
    )
    other = use(uuid="GPU-b", sampled_s=60)
    # when
    merged = per_gpu([agent, other, dcgm])
    # then
    assert [m.gpu_uuid for m in merged] == ["GPU-a", "GPU-b"]
    a = merged[0]
    assert (a.sampled_s, a.sm_s, a.occupancy_s, a.peak_memory_bytes) == (4000, 40, 2500, 5 * GIB)
    assert (a.first_hour, a.last_hour) == (T0, T0 + 2 * H)
    assert a.footprint == agent.footprint + dcgm.footprint
    assert a.footprint.cost == Decimal("1.50")
    assert merged[1] == other


def test_per_gpu_keeps_the_hour_that_is_known() -> None:
    a = replace(use(uuid="GPU-a"), first_hour=None, last_hour=None)
    b = use(uuid="GPU-a")
    assert (per_gpu([a, b])[0].first_hour, per_gpu([a, b])[0].last_hour) == (b.first_hour, b.last_hour)


def test_two_sources_together_cross_a_threshold_neither_crosses_alone() -> None:
    # given: 1,000 s from the agent and 1,000 s from dcgm-exporter, 2 GiB held, idle
    agent = shared(sampled_s=1000.0, memory=2 * GIB)
    dcgm = shared(sampled_s=1000.0, memory=2 * GIB, source="dcgm")
    # then: each is under the 1,800 s, together they are over
    assert kinds(agent) == kinds(dcgm) == set()
    assert kinds(agent, dcgm) == {HOG}


# Evidence


def test_evidence_fields_and_units() -> None:
    # given: two GPUs, idle, alone, with their footprints
    a = replace(
        use(uuid="GPU-b", sampled_s=7200, sm_s=72, memory=3 * GIB, hours=2),
        footprint=Footprint(
            energy_j=1.8e6, gpu_hours=2.0, facility_kwh=0.6, operational_kg=0.1, embodied_kg=0.05,
            cost=Decimal("3.333333"),
        ),
    )  # fmt: skip
    b = replace(
        use(uuid="GPU-a", sampled_s=3600, sm_s=0, memory=1 * GIB, hours=1),
        first_hour=T0 + 3 * H,
        last_hour=T0 + 3 * H,
        footprint=Footprint(energy_j=1.8e6, gpu_hours=1.0, facility_kwh=0.4, embodied_kg=0.05, cost=Decimal("1.1")),
    )
    # when
    evidence = findings([a, b], DEFAULT)[IDLE]
    # then
    assert set(evidence) == EVIDENCE
    assert evidence["from"] == "2026-11-02T10:00:00+00:00"
    assert evidence["to"] == "2026-11-02T13:00:00+00:00"
    assert evidence["gpus"] == ["GPU-a", "GPU-b"]
    assert evidence["memory_bytes"] == 3 * GIB
    assert evidence["sm_percent"] == pytest.approx(100 * 72 / 10_800)
    assert evidence["gpu_hours_blocked"] == pytest.approx(3.0)
    assert evidence["energy_kwh"] == pytest.approx(1.0)
    assert evidence["facility_kwh"] == pytest.approx(1.0)
    assert evidence["co2e_kg"] == pytest.approx(0.2)
    assert evidence["cost"] == "4.43"


def test_evidence_cost_is_text_to_the_cent() -> None:
    evidence = findings([use(cost="12.345678")], DEFAULT)[IDLE]
    assert evidence["cost"] == "12.35"
    assert findings([use(cost="0")], DEFAULT)[IDLE]["cost"] == "0.00"


def test_gpu_hours_blocked_come_from_the_occupancy() -> None:
    # given: a hog shares the GPU: 5,400 s seen, charged 2,700 s
    evidence = findings([shared(sampled_s=5400.0, memory=4 * GIB)], DEFAULT)[HOG]
    # then: the GPU-hours it blocked, not the hours it was seen
    assert evidence["gpu_hours_blocked"] == pytest.approx(0.75)


def test_sm_percent_of_nothing_sampled_does_not_divide_by_zero() -> None:
    evidence = findings([shared(sampled_s=0.0, memory=4 * GIB)], Thresholds(hog_min_seconds=0.0))[HOG]
    assert evidence["sm_percent"] == 0.0


# Property: a GPU is reported as an idle allocation or a memory hog, never both, and only as its rule says

uuids = st.sampled_from(["GPU-a", "GPU-b", "GPU-c"])


@st.composite
def uses(draw: st.DrawFn) -> JobGpuTotals:
    sampled = draw(st.sampled_from([0.0, 1799.0, 1800.0, 3599.0, 3600.0, 7200.0]))
    return use(
        uuid=draw(uuids),
        sampled_s=sampled,
        sm_s=sampled * draw(st.sampled_from([0.0, 0.0099, 0.01, 0.03, 0.05, 0.5])),
        occupancy_s=sampled * draw(st.sampled_from([0.5, 0.989, 0.99, 1.0])),
        memory=draw(st.sampled_from([0, GIB - 1, GIB, 40 * GIB])),
        source=draw(st.sampled_from(["agent", "dcgm"])),
    )


@settings(max_examples=150)
@given(st.lists(uses(), max_size=6))
def test_findings_never_report_a_gpu_as_both_hog_and_idle(totals: list[JobGpuTotals]) -> None:
    # when
    found = findings(totals, DEFAULT)
    # then
    hogs = set(found.get(HOG, {}).get("gpus", []))
    idle = set(found.get(IDLE, {}).get("gpus", []))
    assert not hogs & idle
    merged = {u.gpu_uuid: u for u in per_gpu(totals)}
    for uuid in idle:
        u = merged[uuid]
        assert u.alone and u.sm_fraction < 0.05 and u.sampled_s >= 3600
    for uuid in hogs:
        u = merged[uuid]
        assert u.peak_memory_bytes >= GIB and u.sm_fraction < 0.01 and u.sampled_s >= 1800
    for uuid, u in merged.items():  # and nothing that qualifies is missed
        if u.alone and u.sm_fraction < 0.05 and u.sampled_s >= 3600:
            assert uuid in idle
        elif u.peak_memory_bytes >= GIB and u.sm_fraction < 0.01 and u.sampled_s >= 1800:
            assert uuid in hogs
