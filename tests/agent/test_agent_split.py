"""The split of one sample, and the per-sample invariant through the whole sampler (hypothesis)."""

from __future__ import annotations

import math

import pytest
from fleetwatt_agent.model import ProcessReading
from fleetwatt_agent.sampler import SamplerSettings
from fleetwatt_agent.split import JobLoad, job_loads, proportional, split_sample
from hypothesis import given, settings
from hypothesis import strategies as st

from .testkit import gpu, make_sampler, tick

loads = st.dictionaries(
    st.sampled_from([f"slurm/{i}" for i in range(8)]),
    st.builds(
        JobLoad,
        memory_bytes=st.integers(0, 80 * 2**30),
        activity_pct=st.one_of(st.just(0.0), st.floats(0, 100, allow_nan=False)),
    ),
    max_size=8,
)
energies = st.floats(0, 5000, allow_nan=False, allow_infinity=False)


@given(energy=energies, jobs=loads, signal=st.sampled_from(["sm", "busy", None]))
def test_invariant_and_methods_on_any_sample(energy: float, jobs: dict[str, JobLoad], signal: str | None) -> None:
    # when
    result = split_sample(energy, jobs, signal)  # type: ignore[arg-type]
    # then: jobs + idle = the sample's energy, nobody gets a negative share
    assert math.isclose(sum(result.shares_j.values()) + result.idle_j, energy, rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= 0 for v in result.shares_j.values())
    assert set(result.shares_j) == set(jobs)
    if not jobs:
        assert result.method is None and result.idle_j == energy
    elif len(jobs) == 1:
        assert result.method == "whole_gpu" and result.idle_j == 0
    elif signal is not None and any(j.activity_pct > 0 for j in jobs.values()):
        assert result.method == ("sm_time" if signal == "sm" else "busy_time")
        for key, load in jobs.items():
            if load.activity_pct == 0:
                assert result.shares_j[key] == 0  # a job that did not compute gets no energy
    else:
        assert result.method == "memory"
    assert result.method != "equal"


def test_sm_time_split_is_proportional_to_sm() -> None:
    # given the probe's second 13: heavy 80 %, light 20 %
    jobs = {"heavy": JobLoad(1_050_673_152, 80.0), "light": JobLoad(11_406_409_728, 20.0)}
    # when
    result = split_sample(689.6, jobs, "sm")
    # then
    assert result.method == "sm_time"
    assert result.shares_j["heavy"] == pytest.approx(551.68)
    assert result.shares_j["light"] == pytest.approx(137.92)


def test_memory_split_when_nobody_computed() -> None:
    jobs = {"a": JobLoad(3 * 2**30, 0.0), "b": JobLoad(1 * 2**30, 0.0)}
    result = split_sample(100.0, jobs, "sm")
    assert result.method == "memory"
    assert result.shares_j == {"a": pytest.approx(75.0), "b": pytest.approx(25.0)}


def test_memory_split_without_any_memory_figure_is_equal_but_still_labelled_memory() -> None:
    result = split_sample(90.0, {"a": JobLoad(0, 0.0), "b": JobLoad(0, 0.0), "c": JobLoad(0, 0.0)}, None)
    assert result.method == "memory"
    assert result.shares_j == {"a": pytest.approx(30.0), "b": pytest.approx(30.0), "c": pytest.approx(30.0)}


def test_job_loads_sum_processes_and_skip_pids_without_a_job() -> None:
    procs = [ProcessReading(1, 100, 10.0), ProcessReading(2, 50, 5.0), ProcessReading(3, 999, 90.0)]
    loads_ = job_loads(procs, {1: "slurm/7", 2: "slurm/7"})
    assert loads_ == {"slurm/7": JobLoad(150, 15.0, (1, 2))}


@given(total=energies, weights=st.dictionaries(st.text(min_size=1, max_size=3), st.floats(0.001, 1e6), min_size=1))
def test_proportional_parts_add_back_up(total: float, weights: dict[str, float]) -> None:
    parts = proportional(total, weights)
    assert math.isclose(math.fsum(parts.values()), total, rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= -1e-9 for v in parts.values())


# -- the invariant through the sampler: random process sets, power profiles, counter reads and resets --
PIDS = [101, 102, 103, 201, 202, 301]
JOBS = {101: "slurm/1", 102: "slurm/1", 103: "slurm/2", 201: "k8s/ns/pod-a", 202: "container/abc", 301: "proc/301-5"}

tick_spec = st.fixed_dictionaries(
    {
        "dt": st.floats(0.2, 2.5),
        "power": st.one_of(st.none(), st.floats(0, 1000)),
        "procs": st.dictionaries(
            st.sampled_from(PIDS),
            st.tuples(st.integers(0, 40 * 2**30), st.one_of(st.none(), st.floats(0, 100))),
            max_size=6,
        ),
        "read": st.booleans(),
        "reset": st.integers(0, 30),
        "missing": st.booleans(),
        "signal": st.sampled_from(["sm", "sm", "busy", None]),
    }
)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(tick_spec, min_size=1, max_size=40), counter=st.booleans())
def test_invariant_holds_on_every_sample_and_every_scrape(specs: list[dict], counter: bool) -> None:
    # given a GPU whose processes, power and counter change at random between ticks
    t, energy_mj = 0.0, 5_000_000
    ticks = [tick(0.0, [gpu(energy_mj=energy_mj)])]
    for spec in specs:
        t += spec["dt"]
        energy_mj += int((spec["power"] or 50.0) * spec["dt"] * 1000 * 1.03)
        if spec["reset"] == 0:
            energy_mj = 1234  # driver reload
        procs = [(pid, mem, act) for pid, (mem, act) in sorted(spec["procs"].items())]
        ticks.append(
            tick(
                t,
                [
                    gpu(
                        power_w=spec["power"],
                        energy_mj=energy_mj if spec["read"] else None,
                        procs=procs,
                        signal=spec["signal"],
                        missing=spec["missing"],
                    )
                ],
            )
        )
    sampler, _ = make_sampler(
        ticks, jobs=JOBS, energy_counter=counter, settings=SamplerSettings(hostname="h", max_gap_s=2.0)
    )
    previous: dict[tuple[str, str], float] = {}
    # when each tick is applied
    for _ in ticks:
        sampler.tick()
        led = sampler.gpus[0]
        # then the split of every sample adds up ...
        assert led.max_residual_j <= 1e-9 * max(1.0, led.energy_j + 1e4)
        # ... and so do the exported counters at any moment
        job_sum = sum(sum(j.energy_j.values()) for j in led.jobs.values())
        assert math.isclose(job_sum + led.idle_j, led.energy_j, rel_tol=1e-9, abs_tol=1e-6)
        # counters never fall
        for key, job in led.jobs.items():
            for method, joules in job.energy_j.items():
                assert joules >= previous.get((key, method), 0.0) - 1e-9
                previous[(key, method)] = joules
            assert job.sm_s <= job.sampled_s + 1e-9
            assert job.occupancy_s <= job.sampled_s + 1e-9
