"""What the simulated inference servers and training jobs count (apps/simulator/serving.py): tokens that follow the
job's load and stop with it, prompt tokens and requests in their ratios, counters that start again at a restart and
the truth that still counts everything scraped, a scrape gap that keeps no sample and loses no token, a job's own
work counter slowed by a power limit, and the labels a pod's or a Slurm job's scrape gives. The ingest's reading of
them: tests/telemetry/test_work.py (pure) and tests/integration/test_work_per_token.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from apps.simulator.scenario import scenario_from_dict
from apps.simulator.serving import (
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    REQUEST_SUCCESS,
    WORK_UNITS,
    counted_units_truth,
    job_pace,
    output_tokens_at,
    served_truth,
    serving_series,
    work_units_at,
)

HOUR = 3600.0


def _scenario(*jobs: dict[str, Any], **extra: Any) -> Any:
    return scenario_from_dict({"start": "2026-11-02T00:00:00Z", "duration": "4h", "linger_s": 120,
                               "nodes": [{"hostname": "n", "gpus": 2}], "jobs": list(jobs), **extra})  # fmt: skip


SERVER = {"scheduler": "k8s", "namespace": "ml", "pod": "llm-0", "node": "n", "start": "1h", "end": "3h",
          "sm": [[0, 100], ["1h", 50]],
          "serving": {"tokens_per_s": 100, "prompt_ratio": 2, "tokens_per_request": 50}}  # fmt: skip
TRAINER = {"scheduler": "slurm", "job_id": "9", "node": "n", "gpus": [0, 1], "start": 0, "end": "2h", "sm": 100,
           "power_w": 600, "work": {"unit": "step", "per_s": 2}}  # fmt: skip


def test_tokens_follow_the_load_and_stop_with_the_job() -> None:
    sc = _scenario(SERVER)
    job = sc.jobs[0]
    tokens = output_tokens_at(job, job.serving, np.array([0.0, HOUR, 1.5 * HOUR, 2 * HOUR, 5 * HOUR]))
    # an hour at 100 % (100 a second), then at 50 %; flat after its end
    assert tokens.tolist() == [0.0, 360_000.0, 450_000.0, 540_000.0, 540_000.0]


def test_prompts_and_requests_are_in_their_ratios_and_every_series_is_labelled_as_a_pod() -> None:
    sc = _scenario(SERVER)
    found = {family: (labels, values) for family, labels, _, values in serving_series(sc, np.arange(0, 4 * HOUR, 15.0))}
    labels, out = found[GENERATION_TOKENS]
    assert labels == {"namespace": "ml", "pod": "llm-0", "container": "vllm", "engine": "0",
                      "model_name": "meta-llama/Llama-3.1-8B-Instruct"}  # fmt: skip
    np.testing.assert_allclose(found[PROMPT_TOKENS][1], 2 * out)
    np.testing.assert_array_equal(found[REQUEST_SUCCESS][1], np.floor(out / 50))
    assert found[REQUEST_SUCCESS][0]["finished_reason"] == "stop"
    assert np.all(np.diff(out) >= 0) and out[-1] == 540_000.0  # the drain's scrapes see the final value


def test_a_restart_starts_the_counters_again_and_the_truth_counts_every_rise() -> None:
    sc = _scenario({**SERVER, "serving": {**SERVER["serving"], "restarts": ["30m"]}})
    scrapes = np.arange(0, 4 * HOUR, 15.0)
    [(_, _, _, out)] = [s for s in serving_series(sc, scrapes) if s[0] == GENERATION_TOKENS]
    assert (np.diff(out) < 0).sum() == 1  # one restart
    truth = served_truth(sc, scrapes)["k8s/ml/llm-0"]
    # everything but the seconds between the restart and the scrape before it
    assert 540_000.0 - 15 * 100 <= truth.output_tokens <= 540_000.0
    assert truth.prompt_tokens == pytest.approx(2 * truth.output_tokens)


def test_a_scrape_gap_keeps_no_sample_and_the_first_scrape_after_it_counts_what_it_missed() -> None:
    # given a server not scraped from 20 min to 1 h 30 min after its start (the whole hour 02:00-03:00 of the scenario)
    gap = _scenario({**SERVER, "serving": {**SERVER["serving"], "unscraped": [["20m", "1h30m"]]}})
    scrapes = np.arange(0, 4 * HOUR, 15.0)
    # when
    [(_, _, at, _)] = [s for s in serving_series(gap, scrapes) if s[0] == GENERATION_TOKENS]
    [(_, _, at_all, _)] = [s for s in serving_series(_scenario(SERVER), scrapes) if s[0] == GENERATION_TOKENS]
    # then: 70 minutes of 15 s scrapes missing, and nothing else
    since_start = at - gap.t0 - HOUR
    assert not np.any((since_start >= 20 * 60) & (since_start < 90 * 60))
    assert len(at) == len(at_all) - 70 * 4
    assert served_truth(gap, scrapes) == served_truth(_scenario(SERVER), scrapes)  # no token lost, none twice


def test_a_trainers_own_counter_and_its_pace_under_a_limit_on_its_slowest_gpu() -> None:
    free = _scenario(TRAINER)
    job = free.jobs[0]
    assert job_pace(free, job, 0.0) == 1.0
    assert work_units_at(free, job, np.array([HOUR, 3 * HOUR])).tolist() == [7200.0, 14_400.0]
    capped = _scenario(TRAINER, power_limits=[{"node": "n", "gpu": 1, "at": "1h", "watts": 300}])
    job = capped.jobs[0]
    assert job_pace(capped, job, 0.0) == 1.0
    assert 0.0 < job_pace(capped, job, 1.5 * HOUR) < 1.0  # GPU 1 holds the step back
    units = work_units_at(capped, job, np.array([HOUR, 2 * HOUR]))
    assert units[0] == 7200.0 and units[1] == pytest.approx(7200.0 + 7200.0 * job_pace(capped, job, 1.5 * HOUR))
    scrapes = np.arange(0, capped.duration_s, 15.0)
    assert counted_units_truth(capped, scrapes) == {"slurm/9": pytest.approx(units[1])}
    [(family, labels, _, _)] = list(serving_series(capped, scrapes))
    assert (family, labels) == (WORK_UNITS, {"hpc_job": "9", "unit": "step"})
