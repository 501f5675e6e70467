"""The GPU-hour `conservation` flag: the agent saw the whole hour and its energy still differs from
DCGM's by more than FLEETWATT_CONSERVATION_THRESHOLD. Not under the threshold, not for an hour the
agent partly missed, and not when a counter reset explains the residual (then `counter_reset`)."""

from __future__ import annotations

import pytest

from apps.waste.models import Flag
from apps.waste.services import gpu_hour_flag_kinds, gpu_hour_flags_replace
from tests.factories import T0, ClusterFactory, FlagFactory, GpuFactory, GpuHourFactory

SCRAPE_S = 15
DCGM_J = 1.8e6
CONSERVATION, COUNTER_RESET = Flag.Kind.CONSERVATION, Flag.Kind.COUNTER_RESET


@pytest.fixture
def threshold(settings) -> float:
    value = settings.FLEETWATT_CONSERVATION_THRESHOLD
    assert 0 < value < 0.5
    return value


def hour_row(ratio: float, **kwargs):
    """An unsaved GPU-hour whose agent energy is off DCGM's by `ratio`."""
    values = {"dcgm_energy_j": DCGM_J, "agent_energy_j": DCGM_J * (1 + ratio), "residual_ratio": ratio}
    return GpuHourFactory.build(**{**values, **kwargs})


# gpu_hour_flag_kinds


@pytest.mark.parametrize("sign", [1, -1], ids=["agent-above", "agent-below"])
def test_conservation_fires_over_the_threshold_either_way(threshold: float, sign: int) -> None:
    # given: the agent saw the whole hour and differs from DCGM by twice the threshold
    row = hour_row(sign * 2 * threshold)
    # when
    kinds = gpu_hour_flag_kinds(row, scrape_interval_s=SCRAPE_S)
    # then
    assert kinds == [CONSERVATION]


@pytest.mark.parametrize(
    ("factor", "fires"), [(0.5, False), (1.0, False), (1.001, True)], ids=["under", "at", "just-over"]
)
def test_conservation_needs_strictly_more_than_the_threshold(threshold: float, factor: float, fires: bool) -> None:
    row = hour_row(factor * threshold)
    assert (CONSERVATION in gpu_hour_flag_kinds(row, scrape_interval_s=SCRAPE_S)) is fires


@pytest.mark.parametrize(
    ("sampled_s", "fires"),
    [(3600.0, True), (3600.0 - 2 * SCRAPE_S, True), (3600.0 - 2 * SCRAPE_S - 1, False), (1800.0, False)],
    ids=["whole-hour", "two-scrapes-missed", "more-missed", "half-hour"],
)
def test_conservation_needs_the_agent_to_have_seen_the_whole_hour(
    threshold: float, sampled_s: float, fires: bool
) -> None:
    # given: a large residual, but the agent may have missed part of the hour
    row = hour_row(5 * threshold, sampled_s=sampled_s)
    # then
    assert (gpu_hour_flag_kinds(row, scrape_interval_s=SCRAPE_S) == [CONSERVATION]) is fires


def test_the_whole_hour_allowance_follows_the_scrape_interval(threshold: float) -> None:
    # given: the agent missed 100 s
    row = hour_row(5 * threshold, sampled_s=3500.0)
    # then: two missed 15 s scrapes are not 100 s; two missed 60 s scrapes are more
    assert gpu_hour_flag_kinds(row, scrape_interval_s=15) == []
    assert gpu_hour_flag_kinds(row, scrape_interval_s=60) == [CONSERVATION]


def test_a_counter_reset_explains_the_residual(threshold: float) -> None:
    # given: the driver's counter went backwards in an hour with a large residual
    row = hour_row(10 * threshold, counter_resets=1)
    # then
    assert gpu_hour_flag_kinds(row, scrape_interval_s=SCRAPE_S) == [COUNTER_RESET]


def test_no_conservation_without_dcgm_or_without_the_agent(threshold: float) -> None:
    no_dcgm = GpuHourFactory.build(dcgm_energy_j=None)
    dcgm_only = hour_row(10 * threshold, source="dcgm", agent_energy_j=None, sampled_s=0.0)
    dcgm_only_but_counted = hour_row(10 * threshold, source="dcgm")
    assert no_dcgm.residual_ratio is None
    assert gpu_hour_flag_kinds(no_dcgm, scrape_interval_s=SCRAPE_S) == []
    assert gpu_hour_flag_kinds(dcgm_only, scrape_interval_s=SCRAPE_S) == []
    assert gpu_hour_flag_kinds(dcgm_only_but_counted, scrape_interval_s=SCRAPE_S) == []


def test_agreeing_meters_raise_nothing() -> None:
    row = GpuHourFactory.build()  # agent and DCGM equal
    assert row.residual_ratio == 0.0
    assert gpu_hour_flag_kinds(row, scrape_interval_s=SCRAPE_S) == []


# gpu_hour_flags_replace


@pytest.mark.django_db
def test_replace_raises_one_conservation_flag_on_the_gpu_hour(threshold: float) -> None:
    # given: one GPU off by 3 x the threshold, one in agreement, in the same cluster-hour
    cluster = ClusterFactory(scrape_interval_s=SCRAPE_S)
    off, fine = GpuFactory.create_batch(2, node__cluster=cluster)
    rows = [
        GpuHourFactory(gpu=off, hour=T0, dcgm_energy_j=DCGM_J, agent_energy_j=DCGM_J * (1 + 3 * threshold)),
        GpuHourFactory(gpu=fine, hour=T0),
    ]
    # when
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=rows)
    # then
    flag = Flag.objects.get()
    assert (flag.kind, flag.gpu_id, flag.hour) == (CONSERVATION, off.pk, T0)
    assert (flag.job_id, flag.cluster_id) == (None, cluster.pk)
    assert flag.evidence["residual_ratio"] == pytest.approx(3 * threshold)
    assert flag.evidence["residual_j"] == pytest.approx(3 * threshold * DCGM_J)
    assert flag.evidence["dcgm_energy_j"] == DCGM_J
    assert flag.evidence["counter_resets"] == 0


@pytest.mark.django_db
def test_replace_twice_keeps_one_flag(threshold: float) -> None:
    # given
    cluster = ClusterFactory(scrape_interval_s=SCRAPE_S)
    row = GpuHourFactory(gpu__node__cluster=cluster, agent_energy_j=DCGM_J * (1 + 3 * threshold), dcgm_energy_j=DCGM_J)
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[row])
    first = Flag.objects.get()
    # when: the hour is ingested again
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[row])
    # then
    assert list(Flag.objects.values_list("pk", flat=True)) == [first.pk]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("times_threshold", "change"),
    [(0.5, {}), (5, {"sampled_s": 1800.0}), (5, {"source": "dcgm"})],
    ids=["under-the-threshold", "agent-missed-half-the-hour", "no-agent"],
)
def test_no_conservation_flag(threshold: float, times_threshold: float, change: dict) -> None:
    # given
    cluster = ClusterFactory(scrape_interval_s=SCRAPE_S)
    agent_j = DCGM_J * (1 + times_threshold * threshold)
    row = GpuHourFactory(gpu__node__cluster=cluster, agent_energy_j=agent_j, dcgm_energy_j=DCGM_J, **change)
    # when
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[row])
    # then
    assert not Flag.objects.exists()


@pytest.mark.django_db
def test_a_counter_reset_hour_is_flagged_counter_reset_not_conservation(threshold: float) -> None:
    # given
    cluster = ClusterFactory(scrape_interval_s=SCRAPE_S)
    row = GpuHourFactory(
        gpu__node__cluster=cluster, agent_energy_j=DCGM_J * (1 + 10 * threshold), dcgm_energy_j=DCGM_J,
        counter_resets=2,
    )  # fmt: skip
    # when
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=[row])
    # then
    flag = Flag.objects.get()
    assert (flag.kind, flag.gpu_id) == (COUNTER_RESET, row.gpu_id)
    assert flag.evidence["counter_resets"] == 2


@pytest.mark.django_db
def test_a_fixed_hour_withdraws_the_open_flag_but_keeps_a_reviewed_one(threshold: float) -> None:
    # given: two GPUs flagged in the hour; an admin acknowledged one
    cluster = ClusterFactory(scrape_interval_s=SCRAPE_S)
    reviewed_gpu, open_gpu = GpuFactory.create_batch(2, node__cluster=cluster)
    reviewed = FlagFactory(kind=CONSERVATION, cluster=cluster, job=None, gpu=reviewed_gpu, hour=T0,
                           status=Flag.Status.ACKNOWLEDGED)  # fmt: skip
    FlagFactory(kind=CONSERVATION, cluster=cluster, job=None, gpu=open_gpu, hour=T0)
    # when: re-ingested, both meters now agree
    rows = [GpuHourFactory(gpu=reviewed_gpu), GpuHourFactory(gpu=open_gpu)]
    gpu_hour_flags_replace(cluster=cluster, hour=T0, rows=rows)
    # then
    assert list(Flag.objects.values_list("pk", flat=True)) == [reviewed.pk]
