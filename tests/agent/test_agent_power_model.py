"""The power model of the `sm_mem` split (power_model.py): the fit, its calibration thresholds, ill-conditioned
data, the state's JSON and file; its calibration through the sampler, its metrics and /jobs, the command's
--power-model-file."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from fleetwatt_agent import power_model as pm
from fleetwatt_agent.collector import make_registry
from fleetwatt_agent.model import JobInfo
from fleetwatt_agent.power_model import JobSolo, PowerStats, calibrated_fit, power_fit, stats_add
from fleetwatt_agent.sampler import SamplerSettings
from fleetwatt_agent.server import jobs_document
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from .conftest import AGENT_SRC
from .testkit import gpu, make_sampler, run_all, tick, write_trace

# A made-up GPU: 120 W with a context resident and nothing running, 4 W per SM %, 2.5 W per memory %.
P0, A, B = 120.0, 4.0, 2.5


def synthetic(n: int, *, seed: int = 1, noise_w: float = 10.0, mem_of_sm=None) -> list[tuple[float, float, float]]:  # type: ignore[no-untyped-def]
    """(sm, mem, P) single-job samples of the made-up GPU, with Gaussian noise on P."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        sm = rng.uniform(0, 100)
        mem = mem_of_sm(sm, rng) if mem_of_sm else rng.uniform(0, 80)
        out.append((sm, mem, P0 + A * sm + B * mem + rng.gauss(0, noise_w)))
    return out


def fold(samples: list[tuple[float, float, float]], stats: PowerStats | None = None) -> PowerStats:
    stats = stats or PowerStats()
    for sm, mem, p in samples:
        stats = stats_add(stats, sm_pct=sm, mem_pct=mem, power_w=p)
    return stats


def test_the_fit_recovers_known_coefficients_from_noisy_samples() -> None:
    # given 2,000 single-job samples with 10 W of noise
    stats = fold(synthetic(2000))
    # when
    fit = power_fit(stats)
    # then the coefficients come back (the ridge shrinks the slopes by about 1 %), the residual is the noise
    assert fit is not None and fit.calibrated and fit.reason == ""
    assert fit.sm_w_per_pct == pytest.approx(A, rel=0.03)
    assert fit.mem_w_per_pct == pytest.approx(B, rel=0.03)
    assert fit.p0_w == pytest.approx(P0, abs=8.0)
    assert fit.rms_w == pytest.approx(10.0, rel=0.1)
    assert fit.samples == 2000


def test_running_statistics_equal_the_two_pass_ones() -> None:
    samples = synthetic(500, seed=7)
    stats = fold(samples)
    n = len(samples)
    mean = [math.fsum(s[i] for s in samples) / n for i in range(3)]

    def co(i: int, j: int) -> float:
        return math.fsum((s[i] - mean[i]) * (s[j] - mean[j]) for s in samples)

    assert (stats.mean_sm, stats.mean_mem, stats.mean_power) == pytest.approx(mean, rel=1e-12)
    assert [stats.c_ss, stats.c_sm, stats.c_mm, stats.c_sp, stats.c_mp, stats.c_pp] == pytest.approx(
        [co(0, 0), co(0, 1), co(1, 1), co(0, 2), co(1, 2), co(2, 2)], rel=1e-9
    )


@settings(max_examples=50, deadline=None)
@given(
    points=st.lists(
        st.tuples(st.floats(0, 400), st.floats(0, 400), st.floats(0, 1500)),
        min_size=3,
        max_size=80,
    )
)
def test_any_samples_give_a_finite_fit_and_a_non_negative_residual(points: list[tuple[float, float, float]]) -> None:
    fit = power_fit(fold(points))
    assert fit is not None
    assert all(math.isfinite(v) for v in (fit.p0_w, fit.sm_w_per_pct, fit.mem_w_per_pct, fit.rms_w))
    assert fit.rms_w >= 0.0
    assert fit.calibrated == (fit.reason == "")


def test_not_calibrated_before_the_thresholds() -> None:
    samples = synthetic(pm.MIN_SAMPLES)
    assert power_fit(fold(samples[:2])) is None  # fewer than 3 samples: no fit at all
    short = power_fit(fold(samples[:-1]))
    assert short is not None and not short.calibrated and short.reason == "samples"
    assert calibrated_fit(fold(samples[:-1])) is None
    enough = power_fit(fold(samples))
    assert enough is not None and enough.calibrated
    # a job whose memory activity never moves says nothing about b
    flat_mem = fold([(sm, 30.0, p) for sm, _, p in synthetic(200)])
    assert power_fit(flat_mem).reason == "mem_spread"  # type: ignore[union-attr]
    flat_sm = fold([(95.0, mem, p) for _, mem, p in synthetic(200)])
    assert power_fit(flat_sm).reason == "sm_spread"  # type: ignore[union-attr]
    # power that does not rise with activity is nothing to split by
    falling = fold([(sm, mem, 500.0 - sm - mem) for sm, mem, _ in synthetic(200)])
    assert power_fit(falling).reason == "no_rise"  # type: ignore[union-attr]


def test_ill_conditioned_data_is_not_calibrated_and_gives_no_wild_model() -> None:
    # given one workload seen alone, five times: memory activity in lockstep with SM (corr 0.99999), 10 W noise
    fits, ols = [], []
    for seed in range(5):
        stats = fold(synthetic(200, seed=seed, mem_of_sm=lambda sm, rng: 0.4 * sm + rng.gauss(0, 0.05)))
        # when
        fit = power_fit(stats)
        assert fit is not None
        fits.append(fit)
        det = stats.c_ss * stats.c_mm - stats.c_sm**2
        ols.append((stats.c_ss * stats.c_mp - stats.c_sm * stats.c_sp) / det)  # plain least squares' b
    # then the model is not used ...
    assert all(not f.calibrated and f.reason == "correlated" for f in fits)
    # ... plain least squares trades a against b from one run to the next, the ridge fit does not ...
    assert max(ols) - min(ols) > 10.0
    mem_slopes = [f.mem_w_per_pct for f in fits]
    assert max(mem_slopes) - min(mem_slopes) < 0.5
    assert all(0.0 < f.sm_w_per_pct < 10.0 and 0.0 < f.mem_w_per_pct < 10.0 for f in fits)
    # ... and along the data it predicts the power (what the data can tell)
    for fit in fits:
        for sm in (0.0, 50.0, 100.0):
            predicted = fit.p0_w + fit.sm_w_per_pct * sm + fit.mem_w_per_pct * 0.4 * sm
            assert predicted == pytest.approx(P0 + A * sm + B * 0.4 * sm, rel=0.03)


def test_correlated_but_distinguishable_data_is_calibrated_and_close() -> None:
    # corr about 0.85: a streaming phase and a compute phase of one job
    stats = fold(synthetic(3000, seed=5, mem_of_sm=lambda sm, rng: 0.5 * sm + rng.uniform(0, 30)))
    fit = power_fit(stats)
    assert fit is not None and fit.calibrated
    assert fit.sm_w_per_pct == pytest.approx(A, rel=0.05)
    assert fit.mem_w_per_pct == pytest.approx(B, rel=0.1)


def test_the_state_serialises_and_round_trips_through_its_file(tmp_path: Path) -> None:
    # given the state of two GPU models
    models = {"NVIDIA H200": fold(synthetic(100)), "NVIDIA A100-SXM4-80GB": fold(synthetic(10, seed=2))}
    # when it goes through JSON and through the file
    doc = json.loads(json.dumps(pm.state_to_json(models)))
    path = tmp_path / "power-model.json"
    pm.state_save(path, models)
    # then it comes back exactly, and the write left no temporary file behind
    assert pm.state_from_json(doc) == models
    assert pm.state_load(path) == models
    assert sorted(p.name for p in tmp_path.iterdir()) == ["power-model.json"]
    assert pm.state_load(tmp_path / "missing.json") == {}  # the first run


@pytest.mark.parametrize(
    "doc",
    [
        {"format": "something-else", "version": 1, "models": {}},
        {"format": pm.FILE_FORMAT, "version": 99, "models": {}},
        {"format": pm.FILE_FORMAT, "version": 1, "models": {"G": {"n": -1}}},
        {"format": pm.FILE_FORMAT, "version": 1, "models": {"G": {**pm.stats_to_json(PowerStats(n=5)), "c_ss": -1.0}}},
        {"format": pm.FILE_FORMAT, "version": 1, "models": {"G": {**pm.stats_to_json(PowerStats(n=5)), "c_pp": "x"}}},
        {"format": pm.FILE_FORMAT, "version": 1, "models": {"G": {**pm.stats_to_json(PowerStats(n=True))}}},  # type: ignore[arg-type]
        [],
    ],
)
def test_an_invalid_state_is_refused(doc: object) -> None:
    with pytest.raises(ValueError):
        pm.state_from_json(doc)


# -- through the sampler ---------------------------------------------------------------------------------
def single_job_ticks(samples: list[tuple[float, float, float]], *, pid: int = 1, start: int = 0) -> list:  # type: ignore[type-arg]
    return [tick(start + i, [gpu(power_w=p, procs=[(pid, 2**30, sm, mem)])]) for i, (sm, mem, p) in enumerate(samples)]


def test_only_single_job_samples_with_the_driver_s_own_utilisation_calibrate() -> None:
    # given samples of every kind, of which 4 are calibration samples
    ticks = [
        tick(0, [gpu(power_w=300, procs=[(1, 1, 50.0, 20.0)])]),  # the first reading: a baseline, no sample
        tick(1, [gpu(power_w=300, procs=[(1, 1, 50.0, 20.0)])]),  # yes
        tick(2, [gpu(power_w=310, procs=[(1, 1, 55.0, 25.0)])]),  # yes
        tick(3, [gpu(power_w=300, procs=[(1, 1, None, None)], missing=True)]),  # NOT_FOUND: carried, no
        tick(4, [gpu(power_w=300, procs=[(1, 1, None, None)], missing=True)]),  # NOT_FOUND again, no
        tick(5, [gpu(power_w=None, procs=[(1, 1, 50.0, 20.0)])]),  # no power reading of its own, no
        tick(6, [gpu(power_w=300, procs=[(1, 1, 50.0, None)])]),  # no memory activity (version-1 trace), no
        tick(7, [gpu(power_w=400, procs=[(1, 1, 50.0, 20.0), (2, 1, 30.0, 10.0)])]),  # two jobs, no
        tick(8, [gpu(power_w=90, procs=[])]),  # no process: a lower power state, no
        tick(9, [gpu(power_w=300, procs=[(1, 1, 60.0, 30.0)], signal=None)]),  # MIG / no signal, no
        tick(10, [gpu(power_w=300, procs=[(1, 1, 0.0, 0.0), (3, 1, 40.0, 10.0)])]),  # one job, two processes: yes
        tick(11, [gpu(power_w=330, procs=[(1, 1, 70.0, 40.0)])]),  # yes
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1", 2: "slurm/2", 3: "slurm/1"})
    # when
    run_all(sampler)
    # then
    stats = sampler.power_models["Test GPU"]
    assert stats.n == 4
    assert stats.mean_sm == pytest.approx((50 + 55 + 40 + 70) / 4)
    assert stats.mean_mem == pytest.approx((20 + 25 + 10 + 40) / 4)
    assert stats.mean_power == pytest.approx((300 + 310 + 300 + 330) / 4)
    # and those with the SMs busy at least half the time are job 1's own, alone on the GPU (job 2 has none)
    jobs = sampler.gpus[0].jobs
    assert jobs["slurm/1"].solo == JobSolo(3, 300 + 310 + 330, 50 + 55 + 70, samples=3)
    assert jobs["slurm/2"].solo == JobSolo()


def test_shared_samples_follow_power_once_calibrated_and_only_under_sm_mem() -> None:
    # given a calibration minute of job 1 alone, then jobs 1 (tensor cores) and 2 (streaming) together
    calibration = single_job_ticks(synthetic(120, noise_w=2.0))
    together = [
        tick(120 + i, [gpu(power_w=700, procs=[(1, 2**30, 80.0, 20.0), (2, 2**30, 40.0, 90.0)])]) for i in range(5)
    ]
    results = {}
    for split in ("sm_time", "sm_mem"):
        sampler, _ = make_sampler(
            calibration + together,
            jobs={1: "slurm/1", 2: "slurm/2"},
            energy_counter=False,  # every sample's energy is committed as it comes
            settings=SamplerSettings(hostname="h", energy_interval_s=0.0, split=split),  # type: ignore[arg-type]
        )
        run_all(sampler)
        results[split] = sampler
    # then under sm_time the model is calibrated but not used
    plain = results["sm_time"].gpus[0].jobs
    assert set(plain["slurm/2"].energy_j) == {"sm_time"}
    assert plain["slurm/2"].energy_j["sm_time"] == pytest.approx(5 * 700 * 40 / 120)
    # and under sm_mem the shared seconds follow power: p0 shared equally; job 1, seen alone, draws its own
    # power per SM point x 80; job 2, never alone, what the board drew beyond that
    fit = calibrated_fit(results["sm_mem"].power_models["Test GPU"])
    assert fit is not None
    jobs = results["sm_mem"].gpus[0].jobs
    assert set(jobs["slurm/2"].energy_j) == {"sm_mem"}
    own_1 = jobs["slurm/1"].solo.dynamic_w_per_sm_pct(fit.p0_w)
    assert own_1 is not None
    d1 = min(own_1 * 80, 700 - fit.p0_w)
    expected_2 = 5 * (fit.p0_w / 2 + (700 - fit.p0_w) - d1)
    assert jobs["slurm/2"].energy_j["sm_mem"] == pytest.approx(expected_2)
    assert jobs["slurm/1"].energy_j["sm_mem"] == pytest.approx(5 * (fit.p0_w / 2 + d1))
    led = results["sm_mem"].gpus[0]
    assert led.max_residual_j <= 1e-9


def test_a_saved_model_is_used_from_the_first_shared_sample() -> None:
    models = {"Test GPU": fold(synthetic(200))}
    ticks = [tick(i, [gpu(power_w=600, procs=[(1, 1, 90.0, 10.0), (2, 1, 10.0, 70.0)])]) for i in range(3)]
    sampler, _ = make_sampler(
        ticks,
        jobs={1: "slurm/1", 2: "slurm/2"},
        energy_counter=False,
        settings=SamplerSettings(hostname="h", energy_interval_s=0.0, split="sm_mem"),
        power_models=models,
    )
    run_all(sampler)
    assert {m for j in sampler.gpus[0].jobs.values() for m in j.energy_j} == {"sm_mem"}
    assert sampler.power_state() == models  # shared samples do not calibrate


def test_metrics_and_jobs_show_the_calibration() -> None:
    # given a calibrated model, and the same made-up GPU model's calibration just begun
    sampler, _ = make_sampler(single_job_ticks(synthetic(80, noise_w=1.0)), jobs={1: "slurm/1"})
    run_all(sampler)
    sampler.power_models["Other GPU"] = fold(synthetic(2))
    # when
    from prometheus_client import generate_latest

    text = generate_latest(make_registry(sampler.snapshot, process_metrics=False)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    def values(name: str) -> dict[tuple[str, ...], float]:
        return {tuple(sorted(s.labels.items())): s.value for s in fams[name].samples}

    # then
    fit = power_fit(sampler.power_models["Test GPU"])
    assert fit is not None and fit.calibrated
    assert fams["fleetwatt_agent_power_model_samples"].type == "gauge"
    assert values("fleetwatt_agent_power_model_samples") == {
        (("gpu_model", "Other GPU"), ("hostname", "test-node")): 2.0,
        (("gpu_model", "Test GPU"), ("hostname", "test-node")): 79.0,  # 80 readings, the first a baseline
    }
    assert values("fleetwatt_agent_power_model_calibrated") == {
        (("gpu_model", "Other GPU"), ("hostname", "test-node")): 0.0,
        (("gpu_model", "Test GPU"), ("hostname", "test-node")): 1.0,
    }
    coefficients = values("fleetwatt_agent_power_model_coefficient")
    assert coefficients == {
        (("gpu_model", "Test GPU"), ("hostname", "test-node"), ("term", "p0")): pytest.approx(fit.p0_w),
        (("gpu_model", "Test GPU"), ("hostname", "test-node"), ("term", "sm")): pytest.approx(fit.sm_w_per_pct),
        (("gpu_model", "Test GPU"), ("hostname", "test-node"), ("term", "mem")): pytest.approx(fit.mem_w_per_pct),
    }  # no fit for "Other GPU" before 3 samples
    assert fit.sm_w_per_pct == pytest.approx(A, rel=0.05)
    rms = values("fleetwatt_agent_power_model_rms_residual_watts")
    assert rms[(("gpu_model", "Test GPU"), ("hostname", "test-node"))] == pytest.approx(fit.rms_w)
    # and /jobs says the same, with the split in force
    doc = jobs_document(sampler.snapshot())
    assert doc["split"] == "sm_time"
    models = {m["gpu_model"]: m for m in doc["power_models"]}
    assert models["Test GPU"]["calibrated"] is True and models["Test GPU"]["samples"] == 79
    assert models["Test GPU"]["p0_w"] == pytest.approx(fit.p0_w)
    assert models["Other GPU"] == {
        "gpu_model": "Other GPU",
        "samples": 2,
        "calibrated": False,
        "not_calibrated_because": "samples",
        "p0_w": None,
        "sm_w_per_pct": None,
        "mem_w_per_pct": None,
        "rms_residual_w": None,
    }
    # and the job's own power, learned from the same samples where its SMs were busy at least half the time
    (on_gpu,) = next(j for j in doc["jobs"] if j["job_key"] == "slurm/1")["gpus"]
    solo = sampler.gpus[0].jobs["slurm/1"].solo
    assert 0 < on_gpu["alone_samples"] == solo.n < 79
    own = (solo.power_w_sum - solo.n * fit.p0_w) / solo.sm_pct_sum
    assert on_gpu["own_power_w_per_sm_pct"] == pytest.approx(own)


def test_the_command_keeps_its_calibration_across_restarts(tmp_path: Path) -> None:
    # given a version-2 trace with 40 single-job samples, replayed twice by the real command
    samples = synthetic(41, noise_w=1.0)
    ticks = [
        tick(i, [gpu(power_w=p, energy_mj=int(p * 1000) * i, procs=[(1, 2**30, sm, mem)])])
        for i, (sm, mem, p) in enumerate(samples)
    ]
    trace = write_trace(tmp_path / "t.jsonl", ticks, {1: JobInfo("slurm/1")})
    state = tmp_path / "state" / "power-model.json"
    state.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": str(AGENT_SRC), "FLEETWATT_AGENT_POWER_MODEL_FILE": str(state)}
    args = [sys.executable, "-m", "fleetwatt_agent", "--backend", "replay", "--replay", str(trace)]
    args += ["--replay-speed", "0", "--replay-exit", "--listen", "127.0.0.1:0", "--split", "sm_mem"]
    for run in (1, 2):
        # when
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        # then each run adds its 40 samples to what the file held
        assert proc.returncode == 0, proc.stderr
        saved = pm.state_load(state)
        assert saved["Test GPU"].n == 40 * run
    # a corrupt file is reported and the agent calibrates afresh (it still measures)
    state.write_text("{not json")
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "calibrating afresh" in proc.stderr
    assert pm.state_load(state)["Test GPU"].n == 40
