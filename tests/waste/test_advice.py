"""apps/waste/advice.py: each finding kind says what to do, with the job's own figures."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.waste.advice import finding_advice
from apps.waste.kinds import FlagKind
from apps.waste.models import Flag
from tests.carbon.fleet_builder import fleet_build, job_run

HOG = {"memory_bytes": 40 * 1024**3, "sm_percent": 0.3, "gpu_hours_blocked": 5.5, "cost": "13.75", "gpus": ["g"]}


def test_every_kind_has_advice() -> None:
    assert all(finding_advice(kind, {}, currency="EUR") for kind in FlagKind)


def test_a_memory_hog_is_told_its_memory_and_to_free_or_share_the_gpu() -> None:
    line = finding_advice(FlagKind.MEMORY_HOG, HOG, currency="EUR")
    assert "40.0 GiB" in line and "0.3 % SM" in line and "5.5 GPU-hours (13.75 EUR)" in line
    assert "MIG" in line and "MPS" in line


def test_an_idle_allocation_is_told_how_many_gpus_to_ask_for() -> None:
    unused = {"gpus": ["a"], "unused_gpus": 3, "unused_gpu_hours": 12.0, "gpu_hours_blocked": 12.0, "cost": "30.00"}
    line = finding_advice(FlagKind.IDLE_ALLOCATION, unused, currency="EUR")
    assert "given 4 GPUs and ran on 1: ask for 1 next time" in line and "12.0 GPU-hours (30.00 EUR)" in line
    idle = {"gpus": ["a", "b"], "sm_percent": 2.4, "gpu_hours_blocked": 0.5, "cost": "1.25"}
    line = finding_advice(FlagKind.IDLE_ALLOCATION, idle, currency="EUR")
    assert "2.4 % SM for 30 GPU-minutes (1.25 EUR): ask for fewer GPUs" in line


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("out_of_memory", "ran out of memory after 21.5 GPU-hours (63.61 EUR): ask for more memory"),
        ("timeout", "reached its time limit after 21.5 GPU-hours (63.61 EUR): ask for a longer limit"),
        ("node_fail", "Its node failed after 21.5 GPU-hours (63.61 EUR): nothing in the job caused it"),
        ("failed", "It failed after 21.5 GPU-hours (63.61 EUR): run it on a small input"),
    ],
)
def test_a_failed_run_is_told_what_to_change_with_its_own_figures(state: str, says: str) -> None:
    evidence = {"state": state, "gpu_hours_blocked": 21.5, "cost": "63.61"}
    line = finding_advice(FlagKind.FAILED_RUN, evidence, currency="EUR")
    assert says in line and "Checkpoint at least every 1 h" in line
    short = finding_advice(FlagKind.FAILED_RUN, {**evidence, "gpu_hours_blocked": 0.2}, currency="EUR")
    assert "Checkpoint" not in short  # a short run loses little: no checkpoint advice


def test_odd_evidence_gives_advice_without_figures_not_an_error() -> None:
    assert finding_advice(FlagKind.MEMORY_HOG, {"cost": "n/a", "memory_bytes": None}, currency="EUR")
    assert finding_advice("no_such_kind", {}) == ""


@pytest.mark.django_db
def test_the_job_page_and_the_audit_queue_say_what_to_do() -> None:
    # given an out-of-memory run's finding
    fleet = fleet_build(servers=1, gpus_per_server=1)
    job = job_run(fleet, key="slurm/7", gpus=fleet.gpus, hours=2, power_w=300)
    job.currency = "EUR"
    job.save(update_fields=["currency"])
    evidence = {"state": "out_of_memory", "gpu_hours_blocked": 2.0, "cost": "5.10"}
    Flag.objects.create(kind=FlagKind.FAILED_RUN, cluster=fleet.cluster, job=job, evidence=evidence)
    client = Client()
    client.force_login(User.objects.create_user("boss", is_staff=True))
    # when an admin opens the job and the queue, then both give the advice with the run's figures
    for page in (f"/jobs/{job.pk}/", "/audit/"):
        html = client.get(page).content.decode()
        assert "What to do: It ran out of memory after 2.0 GPU-hours (5.10 EUR)" in html, page
