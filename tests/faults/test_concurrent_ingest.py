"""Two workers ingest different hours of one cluster at once (beat's catch-up beside a hand-run ingest, or a
fan-out): each derives the summaries of the jobs in its hours from the rows it can see. They take turns at
the cluster's write lock, and end with what one ingest of the whole day gives. (Without the lock this run
did not show a lost update either: later hours re-derive a job that is still open; the lock is what rules
it out.)"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from apps.jobs.models import Job
from apps.rollups.models import TeamDay
from tests.pipeline.test_scheduler_span import HOURS, T0, outage_scenario

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]


def _summaries() -> dict[str, Any]:
    return {
        "jobs": list(
            Job.objects.order_by("job_key").values_list(
                "job_key", "energy_j", "gpu_hours", "sampled_s", "coverage", "cost", "start", "end", "flags"
            )
        ),
        "team_days": list(
            TeamDay.objects.order_by("team_id", "cluster_id", "day").values_list("team_id", "day", "cost")
        ),
    }


def _ingest(start_h: int, end_h: int) -> None:
    call_command(
        "ingest",
        start=(T0 + timedelta(hours=start_h)).isoformat(),
        end=(T0 + timedelta(hours=end_h)).isoformat(),
        verbosity=0,
    )


def test_two_workers_on_different_hours_of_a_cluster_lose_no_update(history_loader, cluster_for) -> None:
    # given a fleet whose jobs run across the hours two workers take
    cluster_for(history_loader(outage_scenario()))
    errors: list[BaseException] = []

    def worker(start_h: int, end_h: int) -> None:
        try:
            _ingest(start_h, end_h)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    # when one ingests the first half of the day and another the second half, at once
    threads = [
        threading.Thread(target=worker, args=(0, HOURS // 2)),
        threading.Thread(target=worker, args=(HOURS // 2, HOURS)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    together = _summaries()
    # then every job's summary and every team's day is what one ingest of the whole day gives
    _ingest(0, HOURS)
    assert together == _summaries()
