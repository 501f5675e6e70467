"""The frontier of recurring workloads end to end: the simulator's training runs at several power limits (their pace
and draw from apps.simulator.power_cap's curve) -> promtool -> a real Prometheus -> `manage.py ingest` -> each run's
power limit, work and energy -> `/api/job-groups/{id}/frontier/` and `/api/frontier/`: the points, the front and the
advice equal the curve's truth, and a group that never varied gets its plan."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.carbon.models import JobGroup
from apps.simulator import power_cap
from tests.carbon.fleet_builder import T0
from tests.integration.fleet_run import admin_api, config_applied_and_ingested

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

DRAW_W, IDLE_W, PER_S, SM = 600.0, 75.0, 2.0, 95.0
CAPS = {0: 700.0, 1: 500.0, 2: 400.0}  # GPU index: its limit through the scenario (700 W: the TDP, no cap)
STARTS = ["10m", "1h10m", "2h10m", "3h10m"]
ENDS = dict(zip(STARTS, ["55m", "1h55m", "2h55m", "3h55m"], strict=True))  # 45 minutes each


def _job(job_id: int, name: str, gpu: int, start: str) -> dict:
    return {"scheduler": "slurm", "job_id": str(job_id), "account": "nlp", "user": "noam", "name": name,
            "node": "gpu-a", "gpus": [gpu], "start": start, "end": ENDS[start], "sm": SM, "power_w": DRAW_W,
            "work": {"unit": "step", "per_s": PER_S}}  # fmt: skip


SCENARIO = {
    "name": "frontier",
    "start": T0.isoformat(),
    "duration": "4h",
    "scrape_interval_s": 15,
    "linger_s": 120,
    "idle_power_w": IDLE_W,
    "tdp_w": 700,
    "gpu_settings": True,
    "nodes": [{"hostname": "gpu-a", "gpus": 4}],
    "jobs": [
        # pretrain: four runs at 700 W (the most used), three at 500 W and three at 400 W
        *[_job(100 + k, f"pretrain-{k}", 0, s) for k, s in enumerate(STARTS)],
        *[_job(200 + k, f"pretrain-{10 + k}", 1, s) for k, s in enumerate(STARTS[:3])],
        *[_job(300 + k, f"pretrain-{20 + k}", 2, s) for k, s in enumerate(STARTS[:3])],
        # finetune: every run at 700 W
        *[_job(400 + k, f"finetune-{k}", 3, s) for k, s in enumerate(STARTS[:3])],
    ],
    "power_limits": [{"node": "gpu-a", "gpu": g, "at": 0, "watts": w} for g, w in CAPS.items() if w < 700],
}

CONFIG = """
sites:
  - {name: dc, grid_zone: XX, pue: 1.2, electricity_price_per_kwh: 0.20, currency: EUR, timezone: UTC}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.50, currency: EUR, tdp_w: 700}
clusters:
  - {name: default, prometheus_url: "%s", scrape_interval_s: 15, site: dc}
teams:
  - {name: nlp, rules: [{kind: slurm_account, value: nlp}]}
job_groups:
  - {name: pretrain, match_kind: name_prefix, match_value: pretrain-}
  - {name: finetune, match_kind: name_prefix, match_value: finetune-}
"""


@pytest.fixture
def ingested(history_loader, tmp_path: Path):
    history = history_loader(SCENARIO)
    config_applied_and_ingested(history.url, CONFIG, tmp_path, hours=5)
    return history


def _truth(history, job_ids: range) -> tuple[float, float]:
    """The simulator's own median s and J per step of the runs."""
    keys = [f"slurm/{i}" for i in job_ids]
    s = [2700.0 / history.truth[k].work_units for k in keys]
    j = [history.truth[k].energy_j / history.truth[k].work_units for k in keys]
    return statistics.median(s), statistics.median(j)


def test_the_frontier_and_the_advice_equal_the_cap_curve_s_truth(ingested) -> None:
    group = JobGroup.objects.get(name="pretrain")
    # when
    answer = admin_api().get(f"/api/job-groups/{group.pk}/frontier/", {"slack": "0.1"})
    # then one point per limit, each at the simulator's truth
    assert answer.status_code == 200, answer.content
    doc = answer.json()
    assert (doc["unit"], doc["runs"], doc["varied_runs"], doc["unknown_cap_runs"]) == ("step", 10, 0, 0)
    points = {p["cap_w"]: p for p in doc["points"]}
    assert sorted(points) == [400, 500, 700] and [points[c]["runs"] for c in (700, 500, 400)] == [4, 3, 3]
    for cap, ids in ((700, range(100, 104)), (500, range(200, 203)), (400, range(300, 303))):
        s, j = _truth(ingested, ids)
        assert points[cap]["s_per_unit"] == pytest.approx(s, rel=0.005), cap
        assert points[cap]["j_per_unit"] == pytest.approx(j, rel=0.005), cap
        # and the truth is the curve's: s per step 1 / (per_s x SM x pace), J per step the capped draw x that
        pace = power_cap.pace(draw_w=DRAW_W, limit_w=cap, idle_w=IDLE_W)
        assert s == pytest.approx(1 / (PER_S * SM / 100 * pace), rel=0.005), cap
        assert j == pytest.approx(min(DRAW_W, cap) * s, rel=0.005), cap
    # every limit is on the front: each lower one is slower and uses less energy per step
    assert all(p["on_front"] for p in doc["points"])
    # within 10 % more time, 500 W (7.3 % longer); 400 W is 17.3 % longer
    advice = doc["advice"]
    assert (advice["cap_w"], advice["current_cap_w"]) == (500, 700)
    ratio = power_cap.energy_per_unit_ratio(draw_w=DRAW_W, limit_w=500, idle_w=IDLE_W)
    assert advice["energy_change_pct"] == pytest.approx((ratio - 1) * 100, abs=0.5)
    slower = 1 / power_cap.pace(draw_w=DRAW_W, limit_w=500, idle_w=IDLE_W)
    assert advice["time_change_pct"] == pytest.approx((slower - 1) * 100, abs=0.5)
    assert doc["text"] == (
        "at 500 W instead of 700 W this group's runs used 11 % less energy per step and took 7 % longer "
        "(3 runs at 500 W, 4 at 700 W)"
    )
    # with 20 % more time allowed, 400 W
    wider = _admin_again().get(f"/api/job-groups/{group.pk}/frontier/", {"slack": "0.2"}).json()
    assert wider["advice"]["cap_w"] == 400


def _admin_again() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.get(username="root"))
    return client


def test_the_group_that_never_varied_gets_its_plan(ingested) -> None:
    group = JobGroup.objects.get(name="finetune")
    doc = admin_api().get(f"/api/job-groups/{group.pk}/frontier/").json()
    assert doc["advice"] is None and doc["current_cap_w"] == 700
    assert doc["plan"]["caps_w"] == [700, 600, 500, 400]
    s, _ = _truth(ingested, range(400, 403))
    assert doc["plan"]["trial_s"] == pytest.approx(150 * s, rel=0.005)


def test_the_month_s_saving_of_the_fleet(ingested) -> None:
    doc = admin_api().get("/api/frontier/", {"month": "2026-11"}).json()
    lines = {g["job_group"]: g for g in doc["groups"]}
    assert set(lines) == {"pretrain", "finetune"}
    saving = lines["pretrain"]["saving"]
    # the 700 W runs moved to 500 W save (700 W's - 500 W's) J per step x their steps; the 400 W runs moved up use more
    points = {p["cap_w"]: p for p in lines["pretrain"]["points"]}
    expected_j = sum(
        ingested.truth[f"slurm/{i}"].work_units * (points[cap]["j_per_unit"] - points[500]["j_per_unit"])
        for cap, ids in ((700, range(100, 104)), (400, range(300, 303)))
        for i in ids
    )
    assert saving["runs"] == 7 and saving["gpu_kwh"] == pytest.approx(expected_j / 3.6e6, rel=1e-6)
    assert saving["co2e_kg"] is not None and saving["currency"] == "EUR"
    assert lines["finetune"]["saving"]["runs"] == 0
