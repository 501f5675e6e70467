"""Two ingests of the same cluster and day at once (two hours, two workers) both rebuild that day's
teams' sums: the second must wait for the first, not break the unique key."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from apps.rollups.models import TeamDay
from apps.rollups.services import day_sums_refresh
from tests.carbon.fleet_builder import T0, fleet_build, job_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_rebuilds_of_one_cluster_day_take_turns() -> None:
    # given a cluster with a job on a day
    fleet = fleet_build(servers=1, gpus_per_server=2)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=2, power_w=500.0)
    first_done, errors = threading.Event(), []

    def first() -> None:
        try:
            with transaction.atomic():
                day_sums_refresh(cluster_ids=[fleet.cluster.pk], days=[T0.date()])
                first_done.set()
                time.sleep(1.0)  # still open while the second one starts
        finally:
            first_done.set()
            connection.close()

    def second() -> None:
        first_done.wait(10)
        try:
            with transaction.atomic():
                day_sums_refresh(cluster_ids=[fleet.cluster.pk], days=[T0.date()])
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    # when both run at once
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    # then neither failed and the day holds one row per team
    assert not errors, errors
    assert TeamDay.objects.filter(cluster=fleet.cluster, day=T0.date()).count() == 1
