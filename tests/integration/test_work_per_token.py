"""Work counted where it is already counted, end to end: the simulator's vLLM servers (tokens that follow their load)
-> promtool -> a real Prometheus -> `manage.py ingest` -> each job's work per hour -> `/api/work/` and the job's
detail: J per 1,000 output tokens equal to the simulator's truth within 0.5 %, for pods the agent measures (one with
its engine restarted twice, one with its engine not scraped for more than an hour), a pod dcgm-exporter alone sees,
and a Slurm job; the carbon and the billed cost per token from the same jobs' figures."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.core.units.money import round_minor
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job, JobWorkHour
from apps.telemetry.models import IngestedHour
from tests.carbon.fleet_builder import HOUR, T0
from tests.integration.fleet_run import admin_api, config_applied_and_ingested

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

LLAMA, MISTRAL = "meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3"
SCENARIO = {
    "name": "serving",
    "start": T0.isoformat(),
    "duration": "4h",
    "scrape_interval_s": 15,
    "linger_s": 120,
    "nodes": [
        {"hostname": "k8s-a", "gpus": 2},
        {"hostname": "slurm-b", "gpus": 1},
        {"hostname": "dcgm-c", "gpus": 1, "agent": False, "dcgm_pod_labels": True},
    ],
    "jobs": [
        {"scheduler": "k8s", "namespace": "search", "pod": "llama-0", "node": "k8s-a", "gpus": [0], "start": "10m",
         "end": "3h20m", "sm": [[0, 80], ["1h", 40]], "power_w": [[0, 600], ["1h", 380]],
         # its engine not scraped from 01:00 to 02:20: the hour 01:00 has no sample of it, 02:00 counts the gap's
         "serving": {"model": LLAMA, "tokens_per_s": 2400, "unscraped": [["50m", "2h10m"]]}},
        {"scheduler": "k8s", "namespace": "search", "pod": "llama-1", "node": "k8s-a", "gpus": [1], "start": "0s",
         "end": "4h", "sm": [[0, 20], ["2h", 90]], "power_w": [[0, 250], ["2h", 650]],
         # its engine restarts twice in its pod: counters from 0 again, within an hour (raw samples read)
         "serving": {"model": LLAMA, "tokens_per_s": 2400, "restarts": ["1h30m", "2h40m10s"]}},
        {"scheduler": "k8s", "namespace": "ads", "pod": "mistral-0", "node": "dcgm-c", "gpus": [0], "start": "30m",
         "end": "3h", "sm": 70, "power_w": 500, "serving": {"model": MISTRAL, "tokens_per_s": 3000}},
        {"scheduler": "slurm", "job_id": "7", "account": "nlp", "user": "noam", "node": "slurm-b", "gpus": [0],
         "start": "1h", "end": "3h", "sm": 85, "power_w": 620, "serving": {"model": MISTRAL, "tokens_per_s": 3000}},
        # a training run that exports its own work counter (steps): no tokens, no per-token figure
        {"scheduler": "slurm", "job_id": "8", "account": "nlp", "user": "noam", "node": "slurm-b", "gpus": [0],
         "start": "3h5m", "end": "3h50m", "sm": 95, "power_w": 680, "work": {"unit": "step", "per_s": 2.5}},
    ],
}  # fmt: skip
SERVERS = ("k8s/search/llama-0", "k8s/search/llama-1", "k8s/ads/mistral-0", "slurm/7")

CONFIG = """
sites:
  - {name: dc, grid_zone: XX, pue: 1.2, electricity_price_per_kwh: 0.20, currency: EUR, timezone: UTC}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.50, currency: EUR, tdp_w: 700}
clusters:
  - {name: default, prometheus_url: "%s", scrape_interval_s: 15, site: dc, work_counters: null}
teams:
  - {name: search, rules: [{kind: k8s_namespace, value: search}]}
  - {name: ads, rules: [{kind: k8s_namespace, value: ads}]}
  - {name: nlp, rules: [{kind: slurm_account, value: nlp}]}
"""


@pytest.fixture
def ingested(history_loader, tmp_path: Path):
    history = history_loader(SCENARIO)
    config_applied_and_ingested(history.url, CONFIG, tmp_path, hours=4)
    return history


def _truth_j_per_1k(history, keys: tuple[str, ...]) -> float:
    energy = sum(history.truth[k].energy_j for k in keys)
    return energy / sum(history.truth[k].output_tokens for k in keys) * 1000


def test_each_server_s_hours_add_up_to_what_it_served(ingested) -> None:
    for key in SERVERS:
        truth = ingested.truth[key]
        rows = JobWorkHour.objects.filter(job__job_key=key)
        assert {r.engine for r in rows} == {"vllm"} and {r.unit for r in rows} == {""}, key
        assert sum(r.output_tokens for r in rows) == pytest.approx(truth.output_tokens, rel=1e-9), key
        assert sum(r.prompt_tokens for r in rows) == pytest.approx(truth.prompt_tokens, rel=1e-9), key
        assert sum(r.requests for r in rows) == truth.requests, key
    # the training run counted its steps, and nothing else; no series was left without its job
    steps = JobWorkHour.objects.filter(job__job_key="slurm/8")
    assert {(r.engine, r.unit) for r in steps} == {("fleetwatt", "step")}
    assert sum(r.units for r in steps) == pytest.approx(ingested.truth["slurm/8"].work_units, rel=1e-9)
    assert ingested.truth["slurm/8"].work_units == pytest.approx(45 * 60 * 0.95 * 2.5)
    assert JobWorkHour.objects.exclude(job__job_key__in=(*SERVERS, "slurm/8")).count() == 0
    # the hour its engine was not scraped has no row; the next counted what it missed (the sums above)
    gap = JobWorkHour.objects.filter(job__job_key="k8s/search/llama-0")
    assert sorted({r.hour for r in gap}) == [T0, T0 + 2 * HOUR, T0 + 3 * HOUR]
    assert all(not h.stats["work_without_job"] for h in IngestedHour.objects.all())


def test_joules_per_1k_tokens_per_model_equal_the_simulator_s_truth(ingested) -> None:
    # when
    answer = admin_api().get("/api/work/", {"start": "2026-11-02", "end": "2026-11-03", "group_by": "model"})
    # then
    assert answer.status_code == 200, answer.content
    lines = {line["name"]: line for line in answer.json()}
    assert set(lines) == {LLAMA, MISTRAL}
    for model, keys in ((LLAMA, SERVERS[:2]), (MISTRAL, SERVERS[2:])):
        line = lines[model]
        truth_j = _truth_j_per_1k(ingested, keys)
        assert line["energy_j_per_1k_tokens"] == pytest.approx(truth_j, rel=0.005), model
        assert line["energy_wh_per_1k_tokens"] == pytest.approx(truth_j / 3600, rel=0.005), model
        assert line["output_tokens"] == pytest.approx(sum(ingested.truth[k].output_tokens for k in keys)), model
        assert line["requests"] == sum(ingested.truth[k].requests for k in keys), model
        assert line["jobs"] == 2
        # carbon and money come from the same jobs' stored figures; money as billed, each job rounded first
        jobs = list(Job.objects.filter(job_key__in=keys))
        tokens = line["output_tokens"]
        co2e_kg = sum(j.operational_kg + j.embodied_kg for j in jobs)
        assert line["co2e_g_per_1k_tokens"] == pytest.approx(co2e_kg * 1000 / tokens * 1000, rel=1e-9)
        billed = sum(round_minor(j.cost, "EUR") for j in jobs)
        assert Decimal(line["cost"]) == billed and line["currency"] == "EUR"
        expected = (billed / Decimal(repr(tokens)) * 1_000_000).quantize(Decimal("0.0001"))
        assert Decimal(line["cost_per_million_tokens"]) == expected


def test_per_team_and_per_cluster_and_the_csv(ingested) -> None:
    client = admin_api()
    period = {"start": "2026-11-02", "end": "2026-11-03"}
    teams = {line["name"]: line for line in client.get("/api/work/", {**period, "group_by": "team"}).json()}
    assert set(teams) == {"search", "ads", "nlp"} and teams["nlp"]["jobs"] == 1  # not the training run
    assert teams["search"]["energy_j_per_1k_tokens"] == pytest.approx(_truth_j_per_1k(ingested, SERVERS[:2]), rel=5e-3)
    (cluster,) = client.get("/api/work/", {**period, "group_by": "cluster"}).json()
    assert cluster["name"] == "default" and cluster["jobs"] == 4
    assert cluster["energy_j_per_1k_tokens"] == pytest.approx(_truth_j_per_1k(ingested, SERVERS), rel=5e-3)
    rows = list(csv.DictReader(io.StringIO(client.get("/api/work/", {**period, "format": "csv"}).content.decode())))
    assert {r["name"] for r in rows} == {LLAMA, MISTRAL}
    assert "energy_j_per_1k_tokens" in rows[0] and "cost_per_million_tokens" in rows[0]


def test_the_job_detail_says_what_it_served_and_a_member_sees_only_their_team(ingested) -> None:
    # given a member of search
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=Team.objects.get(name="search"))
    client = APIClient()
    client.force_authenticate(member)
    # when
    lines = client.get("/api/work/", {"start": "2026-11-02", "end": "2026-11-03"}).json()
    job = Job.objects.get(job_key="k8s/search/llama-0")
    detail = client.get(f"/api/jobs/{job.pk}/").json()
    # then
    assert [line["name"] for line in lines] == [LLAMA] and lines[0]["jobs"] == 2
    (served,) = detail["served"]
    assert served["name"] == LLAMA
    assert served["output_tokens"] == pytest.approx(ingested.truth[job.job_key].output_tokens)
    assert served["energy_j_per_1k_tokens"] == pytest.approx(_truth_j_per_1k(ingested, (job.job_key,)), rel=5e-3)
    assert detail["counted_units"] == {}
    other = Job.objects.get(job_key="slurm/7")
    assert client.get(f"/api/jobs/{other.pk}/").status_code == 404
    training = admin_api().get(f"/api/jobs/{Job.objects.get(job_key='slurm/8').pk}/").json()
    assert training["served"] == [] and training["counted_units"] == {"step": pytest.approx(45 * 60 * 0.95 * 2.5)}
    assert APIClient().get("/api/work/", {"start": "2026-11-02", "end": "2026-11-03"}).status_code in (401, 403)
