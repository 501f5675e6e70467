"""The split of one sample (sm_time, sm_mem and their fallbacks), and the per-sample invariant through the
whole sampler (hypothesis)."""

from __future__ import annotations

import math

import pytest
from fleetwatt_agent.model import ProcessReading
from fleetwatt_agent.power_model import JobSolo, PowerFit, PowerStats, solo_add, stats_add
from fleetwatt_agent.sampler import SamplerSettings
from fleetwatt_agent.split import SPLITS, JobLoad, job_loads, proportional, sm_mem_fractions, split_sample
from hypothesis import given, settings
from hypothesis import strategies as st

from .testkit import gpu, make_sampler, tick

loads = st.dictionaries(
    st.sampled_from([f"slurm/{i}" for i in range(8)]),
    st.builds(
        JobLoad,
        memory_bytes=st.integers(0, 80 * 2**30),
        activity_pct=st.one_of(st.just(0.0), st.floats(0, 100, allow_nan=False)),
        mem_activity_pct=st.one_of(st.none(), st.just(0.0), st.floats(0, 100, allow_nan=False)),
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


# -- sm_mem: the power model's split ------------------------------------------------------------------
# A calibrated model: 100 W static, 4 W per SM %, 2 W per memory %.
MODEL = PowerFit(p0_w=100.0, sm_w_per_pct=4.0, mem_w_per_pct=2.0, rms_w=5.0, samples=600, calibrated=True)
models = st.builds(
    PowerFit,
    p0_w=st.floats(-200, 2000),
    sm_w_per_pct=st.floats(-10, 10),
    mem_w_per_pct=st.floats(-10, 10),
    rms_w=st.just(1.0),
    samples=st.just(100),
    calibrated=st.booleans(),
)
powers = st.one_of(st.none(), st.just(0.0), st.floats(0, 2000))


solos = st.dictionaries(
    st.sampled_from([f"slurm/{i}" for i in range(8)]),
    st.builds(
        JobSolo,
        n=st.integers(0, 100),
        power_w_sum=st.floats(0, 1e5),
        sm_pct_sum=st.floats(0, 1e4),
        samples=st.integers(0, 100),
    ),
    max_size=8,
)


@given(energy=energies, jobs=loads, model=st.one_of(st.none(), models), power=powers, solo=solos)
def test_sm_mem_conserves_every_sample_and_falls_back_where_it_cannot_apply(
    energy: float, jobs: dict[str, JobLoad], model: PowerFit | None, power: float | None, solo: dict[str, JobSolo]
) -> None:
    # when
    result = split_sample(energy, jobs, "sm", model, power_w=power, solo=solo)
    # then jobs + idle = the sample's energy, nobody gets a negative share
    assert math.isclose(sum(result.shares_j.values()) + result.idle_j, energy, rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= 0 for v in result.shares_j.values())
    assert set(result.shares_j) == set(jobs)
    usable = (
        model is not None
        and model.calibrated
        and power is not None
        and power > 0
        and any(j.mem_activity_pct is not None for j in jobs.values())
        and any(j.activity_pct > 0 or (j.mem_activity_pct or 0) > 0 for j in jobs.values())
    )
    if len(jobs) >= 2 and usable:
        assert result.method == "sm_mem" and result.idle_j == 0
        # every job present holds at least its equal part of the static power
        assert model is not None and power is not None
        static_part = min(max(model.p0_w / power, 0.0), 1.0) / len(jobs)
        for share in result.shares_j.values():
            assert share >= static_part * energy * (1 - 1e-9) - 1e-9
    elif len(jobs) >= 2:
        assert result.method == split_sample(energy, jobs, "sm").method  # the rules without the model


def test_sm_mem_shares_the_static_power_equally_and_the_rest_by_modelled_power() -> None:
    # given one second at 700 W: a tensor-core job (80 % SM, 20 % memory) and a streaming one (40 %, 90 %)
    jobs = {
        "matmul": JobLoad(2**30, 80.0, mem_activity_pct=20.0),
        "stream": JobLoad(2**30, 40.0, mem_activity_pct=90.0),
    }
    # when
    result = split_sample(700.0, jobs, "sm", MODEL, power_w=700.0)
    # then 100 W is shared 50/50, the other 600 W by 4 x 80 + 2 x 20 = 360 against 4 x 40 + 2 x 90 = 340
    assert result.method == "sm_mem"
    assert result.shares_j["matmul"] == pytest.approx(50 + 600 * 360 / 700)
    assert result.shares_j["stream"] == pytest.approx(50 + 600 * 340 / 700)
    # where sm_time would have given the streaming job a third
    assert split_sample(700.0, jobs, "sm").shares_j["stream"] == pytest.approx(700 / 3)


def test_sm_mem_static_part_is_clamped_to_the_sample() -> None:
    jobs = {"a": JobLoad(1, 90.0, mem_activity_pct=10.0), "b": JobLoad(1, 5.0, mem_activity_pct=0.0)}
    # below p0 (the fit's p0 is above this sample's power): the whole sample is static, equal shares
    low = split_sample(80.0, jobs, "sm", MODEL, power_w=80.0)
    assert low.method == "sm_mem" and low.shares_j == {"a": pytest.approx(40.0), "b": pytest.approx(40.0)}
    # a negative p0 counts as 0: all by modelled power
    negative = PowerFit(-30.0, 4.0, 2.0, 5.0, 600, calibrated=True)
    result = split_sample(400.0, jobs, "sm", negative, power_w=400.0)
    assert result.shares_j["b"] == pytest.approx(400.0 * 20 / (380 + 20))


def test_sm_mem_clamps_a_negative_modelled_power_at_zero() -> None:
    # b < 0 (memory activity "lowers" power in the fit): a job whose weight is negative gets its static part only
    fit = PowerFit(100.0, 4.0, -3.0, 5.0, 600, calibrated=True)
    jobs = {"compute": JobLoad(1, 50.0, mem_activity_pct=10.0), "copy": JobLoad(1, 10.0, mem_activity_pct=60.0)}
    result = split_sample(500.0, jobs, "sm", fit, power_w=500.0)
    assert result.shares_j["copy"] == pytest.approx(50.0)
    assert result.shares_j["compute"] == pytest.approx(450.0)


def test_sm_mem_falls_back_to_sm_time_then_memory_weights_for_the_rest() -> None:
    no_rise = PowerFit(100.0, -1.0, -1.0, 5.0, 600, calibrated=True)  # every modelled power is 0
    jobs = {"a": JobLoad(3, 30.0, mem_activity_pct=5.0), "b": JobLoad(1, 10.0, mem_activity_pct=5.0)}
    fractions = sm_mem_fractions(jobs, no_rise, 200.0)
    assert fractions == {"a": pytest.approx(0.25 + 0.5 * 0.75), "b": pytest.approx(0.25 + 0.5 * 0.25)}
    idle_sm = {"a": JobLoad(3, 0.0, mem_activity_pct=5.0), "b": JobLoad(1, 0.0, mem_activity_pct=5.0)}
    result = split_sample(200.0, idle_sm, "sm", no_rise, power_w=200.0)  # no SM time either: memory held
    assert result.method == "sm_mem"
    assert result.shares_j == {"a": pytest.approx(50 + 100 * 0.75), "b": pytest.approx(50 + 100 * 0.25)}


@pytest.mark.parametrize(
    ("model", "signal", "power", "mem", "method"),
    [
        (PowerFit(100.0, 4.0, 2.0, 5.0, 30, calibrated=False, reason="samples"), "sm", 500.0, 20.0, "sm_time"),
        (None, "sm", 500.0, 20.0, "sm_time"),
        (MODEL, "sm", 500.0, None, "sm_time"),  # no memory signal (a version-1 trace)
        (MODEL, "sm", None, 20.0, "sm_time"),  # no power reading yet
        (MODEL, "busy", 500.0, 20.0, "busy_time"),  # DRM: the model is NVML's
        (MODEL, None, 500.0, 20.0, "memory"),  # MIG
    ],
)
def test_without_a_usable_model_the_rules_and_labels_are_unchanged(
    model: PowerFit | None, signal: str | None, power: float | None, mem: float | None, method: str
) -> None:
    jobs = {"a": JobLoad(3, 60.0, mem_activity_pct=mem), "b": JobLoad(1, 20.0, mem_activity_pct=mem)}
    result = split_sample(100.0, jobs, signal, model, power_w=power)  # type: ignore[arg-type]
    assert result.method == method
    if method != "memory":
        assert result.shares_j == {"a": pytest.approx(75.0), "b": pytest.approx(25.0)}


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


def test_job_loads_sum_memory_activity_where_the_driver_gave_it() -> None:
    procs = [
        ProcessReading(1, 100, 10.0, 30.0),
        ProcessReading(2, 50, None, None),  # no driver sample for this one
        ProcessReading(3, 10, 40.0, 5.0),
        ProcessReading(4, 10, 20.0, None),  # no memory signal at all (a version-1 trace)
    ]
    loads_ = job_loads(procs, {1: "slurm/7", 2: "slurm/7", 3: "slurm/8", 4: "slurm/9"})
    assert loads_["slurm/7"] == JobLoad(150, 10.0, (1, 2), 30.0)
    assert loads_["slurm/8"].mem_activity_pct == 5.0
    assert loads_["slurm/9"].mem_activity_pct is None


@given(total=energies, weights=st.dictionaries(st.text(min_size=1, max_size=3), st.floats(0.001, 1e6), min_size=1))
def test_proportional_parts_add_back_up(total: float, weights: dict[str, float]) -> None:
    parts = proportional(total, weights)
    assert math.isclose(math.fsum(parts.values()), total, rel_tol=1e-12, abs_tol=1e-9)
    assert all(v >= -1e-9 for v in parts.values())


def solo_of(w_per_pct: float, p0_w: float = 100.0, seconds: int = 10, sm_pct: float = 90.0) -> JobSolo:
    solo = JobSolo()
    for _ in range(seconds):
        solo = solo_add(solo, sm_pct=sm_pct, power_w=p0_w + w_per_pct * sm_pct)
    return solo


def test_a_job_seen_alone_draws_its_own_power_and_the_newcomer_the_rest() -> None:
    # given a tensor-core job seen alone at 6 W per SM point above p0, then joined by a job never seen alone
    jobs = {"matmul": JobLoad(2**30, 60.0, mem_activity_pct=20.0), "new": JobLoad(2**30, 40.0, mem_activity_pct=20.0)}
    # when one second at 700 W is split
    result = split_sample(700.0, jobs, "sm", MODEL, power_w=700.0, solo={"matmul": solo_of(6.0)})
    # then p0's 100 W is shared 50/50; matmul draws 6 x 60 = 360 W of the 600 above p0, the newcomer the 240 left
    assert result.method == "sm_mem"
    assert result.shares_j["matmul"] == pytest.approx(50 + 360)
    assert result.shares_j["new"] == pytest.approx(50 + 240)
    # where the model alone (4 sm + 2 mem: 280 against 200) would have given matmul 50 + 600 x 280 / 480
    assert split_sample(700.0, jobs, "sm", MODEL, power_w=700.0).shares_j["matmul"] == pytest.approx(50 + 350)


def test_own_power_beyond_the_board_is_scaled_down_and_jobs_all_known_go_by_their_own_power() -> None:
    jobs = {"a": JobLoad(2**30, 90.0, mem_activity_pct=20.0), "b": JobLoad(2**30, 10.0, mem_activity_pct=5.0)}
    # a alone would draw 8 x 90 = 720 W above p0, more than the 300 W the board drew above it
    over = split_sample(400.0, jobs, "sm", MODEL, power_w=400.0, solo={"a": solo_of(8.0)})
    assert over.shares_j["a"] == pytest.approx(50 + 300) and over.shares_j["b"] == pytest.approx(50)
    # both known: by their own powers, 8 x 90 = 720 against 2 x 10 = 20
    both = split_sample(400.0, jobs, "sm", MODEL, power_w=400.0, solo={"a": solo_of(8.0), "b": solo_of(2.0)})
    assert both.shares_j["b"] == pytest.approx(50 + 300 * 20 / 740)


def test_a_job_s_own_power_needs_enough_of_it_alone_and_computing() -> None:
    assert JobSolo().dynamic_w_per_sm_pct(100.0) is None
    assert solo_of(6.0, seconds=2).dynamic_w_per_sm_pct(100.0) is None  # 2 samples
    # a job that mostly keeps the GPU awake between kernels (SMs busy 20 %) is not counted at all
    assert solo_of(6.0, seconds=50, sm_pct=20.0) == JobSolo()
    assert solo_of(6.0, seconds=3).dynamic_w_per_sm_pct(100.0) == pytest.approx(6.0)
    assert JobSolo(5, 500.0, 0.0, samples=5).dynamic_w_per_sm_pct(100.0) is None  # no SM time to divide by
    assert solo_of(6.0, p0_w=50.0).dynamic_w_per_sm_pct(100.0) == pytest.approx(6.0 - 50 / 90)
    assert solo_of(0.1, p0_w=50.0).dynamic_w_per_sm_pct(100.0) == 0.0  # below p0: never negative


# -- the invariant through the sampler: random process sets, power profiles, counter reads and resets --
PIDS = [101, 102, 103, 201, 202, 301]
JOBS = {101: "slurm/1", 102: "slurm/1", 103: "slurm/2", 201: "k8s/ns/pod-a", 202: "container/abc", 301: "proc/301-5"}

tick_spec = st.fixed_dictionaries(
    {
        "dt": st.floats(0.2, 2.5),
        "power": st.one_of(st.none(), st.floats(0, 1000)),
        "procs": st.dictionaries(
            st.sampled_from(PIDS),
            st.tuples(
                st.integers(0, 40 * 2**30),
                st.one_of(st.none(), st.floats(0, 100)),
                st.one_of(st.none(), st.floats(0, 100)),
            ),
            max_size=6,
        ),
        "read": st.booleans(),
        "reset": st.integers(0, 30),
        "missing": st.booleans(),
        "signal": st.sampled_from(["sm", "sm", "busy", None]),
    }
)


def calibrated_stats() -> PowerStats:
    stats = PowerStats()
    for i in range(100):
        sm, mem = (i * 37) % 100, (i * 53) % 90
        stats = stats_add(stats, sm_pct=sm, mem_pct=mem, power_w=150 + 4 * sm + 2 * mem)
    return stats


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(tick_spec, min_size=1, max_size=40), counter=st.booleans(), split=st.sampled_from(SPLITS))
def test_invariant_holds_on_every_sample_and_every_scrape(specs: list[dict], counter: bool, split: str) -> None:
    # given a GPU whose processes, power and counter change at random between ticks
    t, energy_mj = 0.0, 5_000_000
    ticks = [tick(0.0, [gpu(energy_mj=energy_mj)])]
    for spec in specs:
        t += spec["dt"]
        energy_mj += int((spec["power"] or 50.0) * spec["dt"] * 1000 * 1.03)
        if spec["reset"] == 0:
            energy_mj = 1234  # driver reload
        procs = [(pid, mem, act, mem_act) for pid, (mem, act, mem_act) in sorted(spec["procs"].items())]
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
    # (under sm_mem with a model calibrated from the start, so that shared samples use it)
    sampler, _ = make_sampler(
        ticks,
        jobs=JOBS,
        energy_counter=counter,
        settings=SamplerSettings(hostname="h", max_gap_s=2.0, split=split),  # type: ignore[arg-type]
        power_models={"Test GPU": calibrated_stats()},
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
