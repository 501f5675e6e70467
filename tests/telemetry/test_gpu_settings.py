"""apps.telemetry.gpu_settings: a GPU-hour's power limit and SM clock from the agent's and dcgm-exporter's answers."""

from __future__ import annotations

import math

import pytest

from apps.telemetry.gpu_settings import GpuSettings, gpu_settings

AGENT = {"hostname": "n1", "gpu": "0", "uuid": "GPU-a"}
DCGM = {"Hostname": "n1", "gpu": "0", "UUID": "GPU-a"}


def _agent(limit: float, low: float, high: float, clock_hz: float, labels: dict[str, str] = AGENT) -> list:
    return [
        ("power_limit", labels, limit),
        ("power_limit_min", labels, low),
        ("power_limit_max", labels, high),
        ("sm_clock", labels, clock_hz),
    ]


def _dcgm(limit: float, clock_mhz: float, samples: float, labels: dict[str, str] = DCGM) -> list:
    return [
        ("power_limit", labels, limit),
        ("power_limit_min", labels, limit),
        ("power_limit_max", labels, limit),
        ("sm_clock", labels, clock_mhz),
        ("present", labels, samples),
    ]


def test_the_agents_word_comes_first_and_its_clock_is_in_hertz() -> None:
    # given both sources for one GPU
    found = gpu_settings(job_gauges=_agent(600.0, 500.0, 700.0, 1.98e9), dcgm_series=_dcgm(650.0, 1700.0, 60))
    # then
    assert found == {
        "GPU-a": GpuSettings(power_limit_w=600.0, power_limit_min_w=500.0, power_limit_max_w=700.0, sm_clock_mhz=1980.0)
    }


def test_an_older_agent_leaves_dcgm_exporters_word() -> None:
    job_memory = [("memory", {**AGENT, "job_key": "slurm/1"}, 1.0)]
    found = gpu_settings(job_gauges=job_memory, dcgm_series=_dcgm(450, 1410, 60))
    assert found["GPU-a"] == GpuSettings(450.0, 450.0, 450.0, 1410.0)


def test_each_field_falls_back_on_its_own() -> None:
    # given an agent that reports the clock but not the limit
    agent = [("sm_clock", AGENT, 1.5e9)]
    found = gpu_settings(job_gauges=agent, dcgm_series=_dcgm(300, 1000, 60))
    assert found["GPU-a"] == GpuSettings(300.0, 300.0, 300.0, 1500.0)


def test_nothing_exported_is_unknown_not_zero() -> None:
    found = gpu_settings(job_gauges=[], dcgm_series=[("power_sum", DCGM, 1000.0), ("present", DCGM, 60)])
    assert found == {}


@pytest.mark.parametrize("value", [0.0, -5.0, math.nan, math.inf, 1e7])
def test_an_implausible_sample_says_nothing(value: float) -> None:
    found = gpu_settings(job_gauges=[("power_limit", AGENT, value), ("sm_clock", AGENT, value * 1e6)], dcgm_series=[])
    assert found.get("GPU-a", GpuSettings()) == GpuSettings()


def test_dcgm_copies_weigh_by_their_samples() -> None:
    # given a GPU idle for 45 of the hour's 60 samples (its own series) and busy for 15 (a pod's copy)
    pod = {**DCGM, "pod": "p", "namespace": "ns"}
    found = gpu_settings(job_gauges=[], dcgm_series=_dcgm(700, 345, 45) + _dcgm(500, 1980, 15, pod))
    # then the clock is the time mean, and the limit spans both
    settings = found["GPU-a"]
    assert settings.sm_clock_mhz == pytest.approx((45 * 345 + 15 * 1980) / 60)
    assert (settings.power_limit_min_w, settings.power_limit_max_w) == (500.0, 700.0)
    assert settings.power_limit_w == pytest.approx((45 * 700 + 15 * 500) / 60)


def test_dcgm_uuid_label_spelled_in_lower_case() -> None:
    labels = {"hostname": "n1", "gpu": "0", "uuid": "GPU-b"}
    assert gpu_settings(job_gauges=[], dcgm_series=_dcgm(400, 1200, 60, labels))["GPU-b"].sm_clock_mhz == 1200.0
