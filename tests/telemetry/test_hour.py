"""apps.telemetry.hour (pure): one cluster-hour's answers to rows. Energy is conserved per GPU-hour: on an agent's GPU
its jobs, its idle energy and what is left unattributed add up to the agent's meter, and the device's energy is the
agent's plus what nobody saw (DCGM's meter less the agent's, when the agent missed part of the hour); on a GPU only
dcgm-exporter reports, the jobs' shares and the idle energy add up to the meter, and a GPU whose series name no job
is unobserved whole. Copies of a series count once; an older agent's missing series are estimated and named; what
this release cannot read (a newer agent's method, dcgm-exporter 1.x, a series without its host) refuses the hour.
dcgm-exporter's label drift and pod claims: tests/telemetry/test_hour_dcgm.py; the agent's words made storable:
test_agent_answers.py; the hour through a real Prometheus: test_ingest_end_to_end.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.telemetry import promql
from apps.telemetry.counters import CounterWindow
from apps.telemetry.hour import (
    TIME_MIN_S,
    UNSEEN_MIN_S,
    HostLabelMissingError,
    HourInput,
    HourResult,
    SeriesWindow,
    UnknownMethodError,
    UnknownSeriesError,
    dcgm_host,
    dcgm_job_key,
    hour_compute,
    unobserved_part,
)

T0 = 1_793_577_600.0  # 2026-11-02T00:00:00Z
END = T0 + 3600.0


def _rise(labels: dict[str, str], joules: float, anchor: float = 0.0) -> SeriesWindow:
    """A counter that rose by `joules` over the hour, from `anchor` (its value at the hour's start; the agent's
    counters from 0, so that the rise is `joules` to the last bit)."""
    return SeriesWindow(labels=dict(labels), window=CounterWindow(last=anchor + joules, anchor=anchor, minimum=anchor))


def _gpu(uuid: str = "GPU-1", host: str = "gpu-a", index: str = "0") -> dict[str, str]:
    return {"uuid": uuid, "hostname": host, "gpu": index}


def _agent_hour(
    jobs: dict[str, dict[str, float]],
    *,
    idle_j: float,
    extra_j: float = 0.0,
    sampled_s: float = 3600.0,
    gpu: dict[str, str] | None = None,
    data: HourInput | None = None,
) -> HourInput:
    """An agent's GPU-hour: each job's energy per method (sampled and occupying the whole hour), the idle energy,
    and `extra_j` the agent's meter counted past the split (a rounding, a lost tick)."""
    gpu = gpu or _gpu()
    data = data or HourInput(hour_start=T0, scrape_interval_s=15)
    c = data.counters
    total = sum(sum(by_method.values()) for by_method in jobs.values()) + idle_j + extra_j
    c.setdefault(promql.GPU_ENERGY, []).append(_rise(gpu, total))
    c.setdefault(promql.GPU_IDLE_ENERGY, []).append(_rise(gpu, idle_j))
    c.setdefault(promql.GPU_SAMPLED, []).append(_rise(gpu, sampled_s))
    for job_key, by_method in jobs.items():
        job = {**gpu, "job_key": job_key}
        for method, joules in by_method.items():
            c.setdefault(promql.JOB_ENERGY, []).append(_rise({**job, "method": method}, joules))
        c.setdefault(promql.JOB_SAMPLED, []).append(_rise(job, sampled_s))
        c.setdefault(promql.JOB_OCCUPANCY, []).append(_rise(job, sampled_s / len(jobs)))
        data.job_gauges.append(("last_seen", job, END - 1.0))
    return data


def _dcgm_meter(data: HourInput, uuid: str, joules: float, host: str = "gpu-a") -> None:
    """dcgm-exporter's energy counter of the GPU (millijoules), without a job label."""
    labels = {"UUID": uuid, "Hostname": host, "gpu": "0", "modelName": "NVIDIA H200"}
    data.dcgm_energy.append(_rise(labels, joules * 1000.0, anchor=9e9))


def _conserved(result: HourResult) -> None:
    """Every GPU-hour adds up, and its job rows add up to its jobs' energy."""
    by_gpu: dict[str, float] = {}
    for row in result.job_hours:
        by_gpu[row.uuid] = by_gpu.get(row.uuid, 0.0) + row.energy_j
    for g in result.gpu_hours:
        assert g.jobs_energy_j == pytest.approx(by_gpu.get(g.uuid, 0.0), rel=1e-12, abs=1e-6)
        if g.source == "agent":
            assert g.agent_energy_j is not None
            assert g.jobs_energy_j + g.idle_energy_j + g.unattributed_j == pytest.approx(g.agent_energy_j, rel=1e-12)
            assert g.device_energy_j == pytest.approx(g.agent_energy_j + g.unobserved_j, rel=1e-12)
        else:
            assert g.jobs_energy_j + g.idle_energy_j + g.unobserved_j == pytest.approx(g.device_energy_j, rel=1e-9)


def test_an_agents_gpu_hour_is_the_exact_rises_of_its_counters() -> None:
    # given a GPU the agent watched the whole hour: two jobs, one split two ways, and idle time
    data = _agent_hour({"slurm/1": {"whole_gpu": 1.2e6}, "slurm/2": {"sm_time": 3e5, "memory": 1e5}}, idle_j=2e5)
    data.agent_info = [{"hostname": "gpu-a", "version": "1.4.0"}]
    _dcgm_meter(data, "GPU-1", 1.8e6)
    # when
    result = hour_compute(data)
    # then
    (gpu,) = result.gpu_hours
    assert gpu.source == "agent" and gpu.agent_version == "1.4.0" and gpu.contract_gaps == []
    assert (gpu.device_energy_j, gpu.jobs_energy_j, gpu.idle_energy_j) == (1.8e6, 1.6e6, 2e5)
    assert gpu.unattributed_j == 0.0 and gpu.unobserved_j == 0.0 and gpu.residual_j == 0.0
    rows = {r.job_key: r for r in result.job_hours}
    assert rows["slurm/2"].energy_by_method == {"sm_time": 3e5, "memory": 1e5} and rows["slurm/2"].energy_j == 4e5
    assert rows["slurm/1"].last_seen == END - 1.0 and rows["slurm/1"].source == "agent"
    assert result.gpus["GPU-1"].model_name == "NVIDIA H200" and result.gpus["GPU-1"].hostname == "gpu-a"
    assert result.jobs["slurm/1"].scheduler == "slurm" and result.jobs["slurm/1"].job_id == "1"
    _conserved(result)


@given(
    jobs=st.dictionaries(
        st.sampled_from(["slurm/1", "slurm/2", "k8s/ml/a", "proc/7-1"]),
        st.dictionaries(
            st.sampled_from(sorted(promql.AGENT_METHODS)), st.floats(min_value=0.0, max_value=3e6), min_size=1
        ),
        max_size=4,
    ),
    idle_j=st.floats(min_value=0.0, max_value=3e6),
    extra_j=st.floats(min_value=0.0, max_value=1e4),
    sampled_s=st.floats(min_value=0.0, max_value=3600.0),
    dcgm_ratio=st.none() | st.floats(min_value=0.5, max_value=1.5),
)
def test_energy_is_conserved_on_every_agent_gpu_hour(
    jobs: dict[str, dict[str, float]], idle_j: float, extra_j: float, sampled_s: float, dcgm_ratio: float | None
) -> None:
    data = _agent_hour(jobs, idle_j=idle_j, extra_j=extra_j, sampled_s=sampled_s)
    agent_j = sum(sum(m.values()) for m in jobs.values()) + idle_j + extra_j
    if dcgm_ratio is not None:
        _dcgm_meter(data, "GPU-1", agent_j * dcgm_ratio)
    result = hour_compute(data)
    if agent_j == 0.0 and sampled_s == 0.0:
        assert result.gpu_hours == [] or result.gpu_hours[0].source == "dcgm"  # the agent saw nothing of it
        return
    _conserved(result)
    (gpu,) = [g for g in result.gpu_hours if g.source == "agent"]
    assert gpu.unobserved_j >= 0.0 and gpu.unobserved_s >= 0.0
    assert gpu.unattributed_j == pytest.approx(extra_j, rel=1e-9, abs=1e-6 * max(1.0, agent_j))
    assert all(r.energy_j > 0 or r.sampled_s > 0 or r.occupancy_s > 0 for r in result.job_hours)


def test_the_part_of_the_hour_the_agent_missed_is_dcgms_meter_less_the_agents() -> None:
    # given an agent that saw 30 minutes of the hour, and DCGM's meter that saw it all
    data = _agent_hour({"slurm/1": {"whole_gpu": 0.9e6}}, idle_j=0.0, sampled_s=1800.0)
    _dcgm_meter(data, "GPU-1", 1.8e6)
    # when
    (gpu,) = hour_compute(data).gpu_hours
    # then the unseen half is nobody's yet (not idle): jobs + idle + unobserved = the meter
    assert gpu.unobserved_s == 1800.0 and gpu.unobserved_j == pytest.approx(0.9e6)
    assert gpu.device_energy_j == pytest.approx(1.8e6) and gpu.residual_j == pytest.approx(0.0)
    assert gpu.idle_energy_j == 0.0


@pytest.mark.parametrize(
    ("agent_j", "dcgm_j", "sampled_s", "part"),
    [
        (1e6, 2e6, 3600.0, (0.0, 0.0)),  # seen whole
        (1e6, 2e6, 3600.0 - UNSEEN_MIN_S + 1, (0.0, 0.0)),  # a few seconds: the meters' disagreement, not a gap
        (1e6, 2e6, 3600.0 - UNSEEN_MIN_S, (UNSEEN_MIN_S, 1e6)),
        (1e6, None, 1800.0, (1800.0, 0.0)),  # nothing measured it: the time stays, its energy unknown
        (2e6, 1e6, 1800.0, (1800.0, 0.0)),  # the agent counted more than DCGM: nothing unseen to add
        (1e6, 2e6, 4000.0, (0.0, 0.0)),  # an hour "sampled" past its length
    ],
)
def test_what_the_agent_did_not_see(
    agent_j: float, dcgm_j: float | None, sampled_s: float, part: tuple[float, float]
) -> None:
    assert unobserved_part(agent_j=agent_j, dcgm_j=dcgm_j, sampled_s=sampled_s) == part


def test_two_scrape_jobs_of_one_agent_count_once() -> None:
    data = _agent_hour({"slurm/1": {"whole_gpu": 1e6}}, idle_j=1e5)
    for metric in list(data.counters):
        data.counters[metric] = data.counters[metric] * 2  # every series twice
    (gpu,) = hour_compute(data).gpu_hours
    (row,) = hour_compute(data).job_hours
    assert gpu.agent_energy_j == 1.1e6 and row.energy_j == 1e6


def test_a_method_this_release_does_not_know_refuses_the_hour_naming_the_node() -> None:
    data = _agent_hour({"slurm/1": {"quantum_split": 1e6}}, idle_j=0.0)
    with pytest.raises(UnknownMethodError, match=r"gpu-a reports job 'slurm/1' under method 'quantum_split'"):
        hour_compute(data)
    # a method that counted nothing in the hour says nothing
    assert hour_compute(_agent_hour({"slurm/1": {"whole_gpu": 1e6, "quantum_split": 0.0}}, idle_j=0.0)).job_hours


def test_an_older_agents_missing_series_are_estimated_and_named() -> None:
    # given an agent before the extensions: no GPU sampled seconds, no occupancy, no last-seen; two jobs sharing
    gpu = _gpu()
    data = HourInput(hour_start=T0, scrape_interval_s=15)
    data.counters = {
        promql.GPU_ENERGY: [_rise(gpu, 1.5e6)],
        promql.GPU_IDLE_ENERGY: [_rise(gpu, 0.0)],
        promql.JOB_ENERGY: [
            _rise({**gpu, "job_key": "slurm/1", "method": "sm_time"}, 1e6),
            _rise({**gpu, "job_key": "slurm/2", "method": "sm_time"}, 0.5e6),
        ],
        promql.JOB_SAMPLED: [
            _rise({**gpu, "job_key": "slurm/1"}, 3600.0),
            _rise({**gpu, "job_key": "slurm/2"}, 1800.0),
        ],
        promql.AGENT_SAMPLES: [_rise({"hostname": "gpu-a"}, 3600.0)],
    }
    # when
    result = hour_compute(data)
    # then the node's ticks are the GPU's sampled time, the jobs' occupancy their sampled seconds scaled to it
    (row_gpu,) = result.gpu_hours
    assert row_gpu.sampled_s == 3600.0
    assert row_gpu.contract_gaps == list(promql.EXTENSIONS)
    rows = {r.job_key: r for r in result.job_hours}
    assert rows["slurm/1"].occupancy_s == pytest.approx(2400.0) and rows["slurm/2"].occupancy_s == pytest.approx(1200.0)
    assert row_gpu.occupied_s == pytest.approx(3600.0)  # no more than the GPU's sampled time
    assert rows["slurm/1"].last_seen == END and rows["slurm/2"].last_seen == END
    _conserved(result)


def test_gauges_no_calendar_or_gpu_holds_are_left_out() -> None:
    data = _agent_hour({"slurm/1": {"whole_gpu": 1e6}}, idle_j=0.0)
    job = {**_gpu(), "job_key": "slurm/1"}
    other_gpu = {**_gpu("GPU-2", index="1"), "job_key": "slurm/1"}
    data.job_gauges = [
        ("memory", job, float("nan")), ("memory", job, -1.0), ("memory", job, 2.0**63), ("memory", job, 8e9),
        ("start", job, 0.0), ("start", job, 1e20), ("start", other_gpu, T0 - 7200), ("start", job, T0 - 3600),
        ("last_seen", job, END + 2 * 86_400.0), ("last_seen", job, TIME_MIN_S - 1),
    ]  # fmt: skip
    result = hour_compute(data)
    (row,) = result.job_hours
    assert row.peak_memory_bytes == 8_000_000_000
    assert row.job_start == T0 - 7200  # the earliest start of the job, on any of its GPUs
    # no last-seen time that is a time: as for an agent that exports none, the hour's end, and the gap named
    assert row.last_seen == END and promql.JOB_LAST_SEEN in result.gpu_hours[0].contract_gaps


@pytest.mark.parametrize(
    ("labels", "key"),
    [
        ({"pod": "train-0", "namespace": "ml"}, "k8s/ml/train-0"),
        ({"pod": "dcgm-exporter-x", "namespace": "gpu", "exported_pod": "a", "exported_namespace": "ml"}, "k8s/ml/a"),
        ({"pod": "nvidia-dcgm-exporter-abc", "namespace": "gpu", "container": "nvidia-dcgm-exporter"}, ""),
        ({"pod": "dcgm-exporter-7", "namespace": "gpu", "container": "exporter"}, ""),
        ({"pod": "my-exporter", "namespace": "gpu", "container": "exporter"}, "k8s/gpu/my-exporter"),
        ({"hpc_job": "4242"}, "slurm/4242"),
        ({"pod": "", "hpc_job": ""}, ""),
    ],
)
def test_the_job_a_dcgm_series_is_labelled_with(labels: dict[str, str], key: str) -> None:
    assert dcgm_job_key(labels) == key


def test_a_dcgm_series_node_is_read_from_the_clusters_host_label() -> None:
    assert dcgm_host({"Hostname": "a"}) == "a" and dcgm_host({"hostname": "b"}) == "b"
    assert dcgm_host({"Hostname": "a", "node": "n1"}, "node") == "n1"
    assert dcgm_host({"Hostname": "a"}, "node") == ""


def test_a_dcgm_series_without_the_host_label_refuses_the_hour() -> None:
    data = HourInput(hour_start=T0, scrape_interval_s=15)
    data.dcgm_energy = [_rise({"UUID": "GPU-9", "gpu": "0"}, 1e9)]
    with pytest.raises(HostLabelMissingError, match=r"GPU\(s\) \(GPU-9\) carry no host label `node`"):
        hour_compute(data, dcgm_host_label="node")


def test_only_names_fleetwatt_does_not_read_refuse_the_hour_and_say_them() -> None:
    data = HourInput(hour_start=T0, scrape_interval_s=15, foreign_names=["dcgm_power_usage"])
    with pytest.raises(UnknownSeriesError, match=r"dcgm_power_usage.*upgrade the exporter"):
        hour_compute(data)
    # an hour with nothing at all is an empty hour, not an error
    assert hour_compute(HourInput(hour_start=T0, scrape_interval_s=15)).gpu_hours == []


def _dcgm_job(data: HourInput, uuid: str, job: dict[str, str], *, first: float, last: float, watts: float) -> None:
    labels = {"UUID": uuid, "Hostname": "gpu-b", "gpu": "0", **job}
    samples = (last - first) / 15 + 1
    data.dcgm_series += [
        ("samples", labels, samples), ("power_sum", labels, samples * watts), ("first", labels, first),
        ("last", labels, last),
    ]  # fmt: skip


@given(
    spans=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=239),
            st.integers(min_value=0, max_value=239),
            st.floats(min_value=50, max_value=700),
        ),
        max_size=3,
    ),
    idle_w=st.floats(min_value=0, max_value=200),
    meter_j=st.floats(min_value=1e3, max_value=5e6),
)
def test_energy_is_conserved_on_every_dcgm_only_gpu_hour(
    spans: list[tuple[int, int, float]], idle_w: float, meter_j: float
) -> None:
    # given a GPU no agent watches, jobs labelled on it for parts of the hour, and its own series
    data = HourInput(hour_start=T0, scrape_interval_s=15)
    _dcgm_meter(data, "GPU-D", meter_j, host="gpu-b")
    for n, (a, b, watts) in enumerate(spans):
        first, last = sorted((a, b))
        _dcgm_job(data, "GPU-D", {"hpc_job": str(n)}, first=T0 + 15 * first, last=T0 + 15 * last, watts=watts)
    gpu_level = {"UUID": "GPU-D", "Hostname": "gpu-b", "gpu": "0"}
    data.dcgm_series.append(("power_sum", gpu_level, 240 * idle_w))
    # when
    result = hour_compute(data)
    # then the meter is split once between the jobs and the idle line (or nobody's, with no job on it)
    (gpu,) = result.gpu_hours
    assert gpu.source == "dcgm" and gpu.device_energy_j == pytest.approx(meter_j)
    _conserved(result)
    assert gpu.occupied_s <= 3600.0 and sum(r.occupancy_s for r in result.job_hours) <= 3600.0 + 1e-6
    if not spans:
        assert gpu.unobserved_j == pytest.approx(meter_j) and gpu.unobserved_s == 3600.0 and result.job_hours == []


def test_jobs_only_dcgm_saw_take_what_their_key_says() -> None:
    data = HourInput(hour_start=T0, scrape_interval_s=15)
    _dcgm_meter(data, "GPU-D", 1e6, host="gpu-b")
    _dcgm_job(data, "GPU-D", {"pod": "train-0", "namespace": "ml"}, first=T0, last=T0 + 1785, watts=400)
    _dcgm_job(data, "GPU-D", {"hpc_job": "77"}, first=T0 + 1800, last=T0 + 3585, watts=400)
    jobs = hour_compute(data).jobs
    assert (jobs["k8s/ml/train-0"].scheduler, jobs["k8s/ml/train-0"].namespace, jobs["k8s/ml/train-0"].pod) == (
        "k8s", "ml", "train-0",
    )  # fmt: skip
    assert (jobs["slurm/77"].scheduler, jobs["slurm/77"].job_id) == ("slurm", "77")


def test_an_agents_gpu_is_not_split_again_from_dcgms_labels() -> None:
    # given an agent GPU whose dcgm-exporter series also carry a pod label
    data = _agent_hour({"k8s/ml/a": {"whole_gpu": 1e6}}, idle_j=0.0)
    labels = {"UUID": "GPU-1", "Hostname": "gpu-a", "gpu": "0"}
    data.dcgm_energy = [_rise({**labels, "pod": "a", "namespace": "ml"}, 1e9, anchor=9e9)]
    _dcgm_job(data, "GPU-1", {"pod": "a", "namespace": "ml"}, first=T0, last=T0 + 3585, watts=300)
    # then the agent's split stands alone: one row, the agent's
    result = hour_compute(data)
    assert [(r.job_key, r.source) for r in result.job_hours] == [("k8s/ml/a", "agent")]
    assert [g.source for g in result.gpu_hours] == ["agent"]
