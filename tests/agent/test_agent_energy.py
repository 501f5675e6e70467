"""GPU energy per sample: counter deltas, the energy window, counter resets, no counter, gaps."""

from __future__ import annotations

import pytest
from fleetwatt_agent.energy import Commit, EnergyMeter
from fleetwatt_agent.sampler import SamplerSettings

from .testkit import gpu, make_sampler, run_all, tick, totals


def test_window_commits_the_counter_delta_in_proportion_to_power() -> None:
    # given a counter read at the start and after three samples
    meter = EnergyMeter()
    assert meter.counter_read(1_000_000) is None
    # when power says 100, 200, 100 J but the counter says 440 J
    assert [meter.add_sample(1.0, p) for p in (100.0, 200.0, 100.0)] == [100.0, 200.0, 100.0]
    commit = meter.counter_read(1_440_000)
    # then the measured energy replaces the provisional sum
    assert commit == Commit(440.0, "energy")
    assert not meter.open_samples


def test_counter_going_backwards_keeps_the_power_integral_and_counts_a_reset() -> None:
    meter = EnergyMeter()
    meter.counter_read(9_000_000)
    meter.add_sample(1.0, 300.0)
    commit = meter.counter_read(500)  # driver reload: the counter restarted near 0
    assert commit == Commit(300.0, "energy", reset=True)
    assert meter.resets == 1
    meter.add_sample(1.0, 300.0)
    assert meter.counter_read(300_500) == Commit(300.0, "energy")  # counting resumes from the new base


def test_no_power_reading_shares_the_counter_by_time() -> None:
    meter = EnergyMeter()
    meter.counter_read(0)
    meter.add_sample(1.0, None)
    assert meter.counter_read(50_000) == Commit(50.0, "time")


def test_sampler_counter_reset_does_not_reset_the_agents_counters() -> None:
    # given a job alone on the GPU while the driver reloads between t=2 and t=3
    ticks = [
        tick(0, [gpu(energy_mj=10_000_000, procs=[(7, 1000, 50.0)])]),
        tick(1, [gpu(power_w=400, energy_mj=10_400_000, procs=[(7, 1000, 50.0)])]),
        tick(2, [gpu(power_w=400, energy_mj=10_800_000, procs=[(7, 1000, 50.0)])]),
        tick(3, [gpu(power_w=410, energy_mj=2_000, procs=[(7, 1000, 50.0)])]),
        tick(4, [gpu(power_w=400, energy_mj=402_000, procs=[(7, 1000, 50.0)])]),
    ]
    sampler, _ = make_sampler(ticks, jobs={7: "slurm/7"})
    # when
    run_all(sampler)
    # then the agent's counters kept rising: 400 + 400 + 410 (integrated) + 400
    t = totals(sampler)
    assert t["gpu"] == pytest.approx(1610.0)
    assert t["jobs"]["slurm/7"] == {"whole_gpu": pytest.approx(1610.0)}
    assert sampler.gpus[0].resets == 1


def test_unsupported_energy_counter_integrates_power() -> None:
    ticks = [tick(0, [gpu(power_w=100)])] + [
        tick(i, [gpu(power_w=100.0 * i, procs=[(1, 10, None)], signal=None)]) for i in range(1, 5)
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1"}, energy_counter=False)
    run_all(sampler)
    assert totals(sampler)["gpu"] == pytest.approx(100 + 200 + 300 + 400)
    assert totals(sampler)["jobs"]["slurm/1"]["whole_gpu"] == pytest.approx(1000)


def test_energy_window_is_exact_at_each_counter_read() -> None:
    # given the counter read only every third tick, with power readings 10 % low
    ticks = [tick(0, [gpu(energy_mj=0)])]
    energy = 0
    for i in range(1, 10):
        energy += 1100 * 1000
        procs = [(1, 100, 90.0), (2, 100, 10.0)] if i <= 5 else []
        ticks.append(tick(i, [gpu(power_w=1000, energy_mj=energy if i % 3 == 0 else None, procs=procs)]))
    sampler, _ = make_sampler(ticks, jobs={1: "a", 2: "b"})
    # when
    for i, _ in enumerate(ticks):
        sampler.tick()
        led = sampler.gpus[0]
        if i % 3 == 0:
            # then at every read the counters hold exactly the counter's delta, split 90/10 and idle
            assert led.energy_j == pytest.approx(1100 * i)
            assert not led.window
    t = totals(sampler)
    assert t["jobs"]["a"]["sm_time"] == pytest.approx(0.9 * 5 * 1100)
    assert t["jobs"]["b"]["sm_time"] == pytest.approx(0.1 * 5 * 1100)
    assert t["idle"] == pytest.approx(4 * 1100)


def test_sampler_asks_for_the_counter_every_energy_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    import fleetwatt_agent.sampler as sampler_mod

    now = [0.0]
    monkeypatch.setattr(sampler_mod.time, "monotonic", lambda: now[0])
    ticks = [tick(i, [gpu()]) for i in range(12)]
    sampler, backend = make_sampler(
        ticks, settings=SamplerSettings(hostname="h", interval_s=1.0, energy_interval_s=5.0)
    )
    for i in range(12):
        now[0] = float(i)
        sampler.tick()
    assert [i for i, asked in enumerate(backend.energy_requests) if asked] == [0, 5, 10]


def test_a_long_gap_is_not_sampled_and_not_charged() -> None:
    # given the agent stopped for 60 s (SIGSTOP, a hung node) between t=2 and t=62
    ticks = [
        tick(0, [gpu(energy_mj=0, procs=[(1, 10, 50.0)])]),
        tick(1, [gpu(power_w=300, energy_mj=300_000, procs=[(1, 10, 50.0)])]),
        tick(2, [gpu(power_w=300, energy_mj=600_000, procs=[(1, 10, 50.0)])]),
        tick(62, [gpu(power_w=300, energy_mj=18_600_000, procs=[(1, 10, 50.0)])]),
        tick(63, [gpu(power_w=300, energy_mj=18_900_000, procs=[(1, 10, 50.0)])]),
    ]
    sampler, _ = make_sampler(ticks, jobs={1: "slurm/1"})
    run_all(sampler)
    led = sampler.gpus[0]
    # then the 60 s are neither energy the agent watched nor sampled seconds
    assert led.energy_j == pytest.approx(900.0)
    assert led.sampled_s == pytest.approx(3.0)
    assert led.jobs["slurm/1"].sampled_s == pytest.approx(3.0)
    assert sampler.gaps_total == 1


def test_two_gpus_are_split_independently() -> None:
    ticks = [
        tick(0, [gpu(0, energy_mj=0), gpu(1, energy_mj=0)]),
        tick(
            1,
            [
                gpu(0, energy_mj=500_000, procs=[(1, 10, 60.0), (2, 10, 20.0)]),
                gpu(1, energy_mj=200_000, procs=[(2, 10, 5.0)]),
            ],
        ),
    ]
    sampler, _ = make_sampler(ticks, n_gpus=2, jobs={1: "a", 2: "b"})
    run_all(sampler)
    assert totals(sampler, 0)["jobs"] == {
        "a": {"sm_time": pytest.approx(375.0)},
        "b": {"sm_time": pytest.approx(125.0)},
    }
    assert totals(sampler, 1)["jobs"] == {"b": {"whole_gpu": pytest.approx(200.0)}}
