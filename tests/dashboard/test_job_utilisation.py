"""A job's page opens with how it used its GPUs (apps.jobs.utilisation through jobs.selectors.job_utilisation_summary):
SM busy, the memory it held (the GPU's size is not recorded), mean power (peak power is not recorded: the highest
hourly mean instead) and its time on a shared GPU, from its own rows and the jobs beside it on each GPU-hour."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.jobs.selectors import gpu_hour_job_counts
from tests.factories import HOUR, T0, AdminFactory, GpuFactory, JobFactory, JobGpuHourFactory

pytestmark = pytest.mark.django_db

GIB = 1024**3


def _figures(html: str) -> dict[str, str]:
    section = html[html.index('id="job-utilisation"') : html.index("</section>", html.index('id="job-utilisation"'))]
    return {
        m.group(1): " ".join(re.sub(r"<[^>]+>", " ", m.group(2)).split())
        for m in re.finditer(r'<div data-figure="([\w-]+)">(.*?)</div>', section, re.S)
    }


def test_the_job_page_opens_with_its_use_of_its_gpus() -> None:
    # given a job on one GPU for two hours: the first at 400 W, half of it beside another job, SM busy half the
    # hour; the second alone at 600 W, SM busy throughout, holding more memory; and an hour nobody saw (estimated)
    job = JobFactory(sm_s=5400, sampled_s=7200)
    gpu = GpuFactory(node__cluster=job.cluster, node__hostname="node-a", index=3)
    row = {"job": job, "gpu": gpu, "sampled_s": 3600}
    JobGpuHourFactory(**row, hour=T0, energy_j=400 * 3600, sm_s=1800, occupancy_s=2700, peak_memory_bytes=20 * GIB)
    JobGpuHourFactory(**row, hour=T0 + HOUR, energy_j=600 * 3600, sm_s=3600, occupancy_s=3600,
                      peak_memory_bytes=30 * GIB)  # fmt: skip
    JobGpuHourFactory(job=job, gpu=gpu, hour=T0 + 2 * HOUR, source="estimated", energy_j=900 * 3600, sampled_s=0,
                      sm_s=0, occupancy_s=3600, peak_memory_bytes=0)  # fmt: skip
    other = JobFactory(cluster=job.cluster, team=job.team)
    JobGpuHourFactory(job=other, gpu=gpu, hour=T0, occupancy_s=900, sampled_s=1800)
    client = Client()
    client.force_login(AdminFactory())
    # when its page is opened
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    figures = _figures(html)
    # then each figure is over the two hours it was seen
    assert figures["sm-busy"].startswith("SM busy (mean) 75 % of the 2.00 GPU-hours it was seen")
    assert figures["memory"] == (
        "GPU memory held (peak) 30.0 GB the GPU's memory size is not recorded, so no share of it is shown"
    )
    assert figures["power"].startswith("Power (mean, per GPU) 500 W peak power is not recorded")
    assert "highest hourly mean 600 W, node-a/3 at 2026-11-02 11:00 UTC" in figures["power"]
    assert figures["shared"] == "Time on a shared GPU 25 % 0.50 GPU-hours beside one other job"


def test_a_job_alone_says_so_and_one_never_seen_has_no_figures() -> None:
    client = Client()
    client.force_login(AdminFactory())
    alone = JobGpuHourFactory().job
    assert _figures(client.get(f"/jobs/{alone.pk}/").content.decode())["shared"].endswith("it had its GPUs to itself")
    unseen = JobGpuHourFactory(source="estimated", sampled_s=0).job
    html = client.get(f"/jobs/{unseen.pk}/").content.decode()
    assert "The agent never saw this job on a GPU" in html and not _figures(html)


def test_the_jobs_beside_it_are_one_query_whatever_its_hours() -> None:
    # given a job on two GPUs for three hours, and another job on one of them in one hour
    job = JobFactory()
    gpus = [GpuFactory(node__cluster=job.cluster) for _ in range(2)]
    for h in range(3):
        for gpu in gpus:
            JobGpuHourFactory(job=job, gpu=gpu, hour=T0 + h * HOUR)
    JobGpuHourFactory(job=JobFactory(cluster=job.cluster), gpu=gpus[1], hour=T0 + HOUR)
    # when the counts are read
    with CaptureQueriesContext(connection) as queries:
        counts = gpu_hour_job_counts(job=job)
    # then
    assert len(queries) == 1
    assert counts[(gpus[1].pk, T0 + HOUR)] == 2
    assert {k: v for k, v in counts.items() if v != 1} == {(gpus[1].pk, T0 + HOUR): 2}
