"""The ingest through the real components: a Celery worker process, Redis as broker, Postgres, Prometheus."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.jobs.models import Job
from apps.telemetry.models import IngestedHour
from apps.telemetry.tasks import ingest_closed_hours_task, ingest_hour_task
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fleetwatt.test_settings",
        "DATABASE_URL": "postgres://{USER}@{HOST}:{PORT}/{NAME}".format(
            **{**settings.DATABASES["default"], "NAME": connection.settings_dict["NAME"]}
        ),
        "FLEETWATT_TEST_REDIS_URL": settings.CELERY_BROKER_URL,
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "fleetwatt",
            "worker",
            "--pool",
            "solo",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    yield proc
    proc.terminate()
    proc.wait(timeout=20)


def test_a_worker_ingests_hours_sent_through_redis(history_loader, cluster_for, worker) -> None:
    history = history_loader(spine_scenario())
    cluster = cluster_for(history)
    ingest_closed_hours_task.app.connection().ensure_connection(max_retries=3)
    for hour in ("2026-11-02T00:00:00+00:00", "2026-11-02T01:00:00+00:00", "2026-11-02T02:00:00+00:00"):
        ingest_hour_task.delay(cluster.pk, hour)
    deadline = time.monotonic() + 90
    while IngestedHour.objects.count() < 3 and time.monotonic() < deadline:
        assert worker.poll() is None, worker.stdout.read().decode()  # type: ignore[union-attr]
        time.sleep(0.5)
    assert IngestedHour.objects.count() == 3
    assert Job.objects.filter(job_key="slurm/101").exists()
