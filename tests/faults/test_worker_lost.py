"""Celery lost tasks: a pool process killed with SIGKILL mid-task had its task acknowledged and never run
again (WorkerLostError: one hour skipped), and a worker whose database was down dropped every task at
once (only an unreachable Prometheus was retried). Now a lost task goes back to the queue, and database
errors are retried with backoff and jitter.

Tried with a real worker (prefork, one pool process) through Redis, real Postgres and Prometheus."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction

from apps.fleet.models import Cluster
from apps.telemetry import services as telemetry
from apps.telemetry.models import IngestedHour
from apps.telemetry.tasks import ingest_hour_task
from tests.scenarios import spine_scenario
from tests.servers import ROOT, child_env

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db(transaction=True)]

H0 = datetime(2026, 11, 2, tzinfo=UTC)
HOURS = [H0 + timedelta(hours=i) for i in range(10)]  # six with jobs, then four without


class Worker:
    """`celery worker` with one pool process, its log in a file."""

    def __init__(self, log: Path) -> None:
        self.log = log
        env = child_env(FLEETWATT_TASK_RETRY_BACKOFF_S="1", FLEETWATT_TASK_RETRY_BACKOFF_MAX_S="2")
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "fleetwatt", "worker", "--pool", "prefork",
                 "--concurrency", "1", "--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "info"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def pool_processes(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def output(self, *, tail: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[[], Worker]]:
    started: list[Worker] = []

    def start() -> Worker:
        started.append(Worker(tmp_path / f"worker-{len(started)}.log"))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def cluster(history_loader, cluster_for) -> Cluster:
    ingest_hour_task.app.connection().ensure_connection(max_retries=3)
    ingest_hour_task.app.control.purge()  # nothing left over from an earlier run
    return cluster_for(history_loader(spine_scenario()))


def _wait(condition: Callable[[], bool], worker: Worker, *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert worker.proc.poll() is None, worker.output()
        assert time.monotonic() < deadline, f"{what} within {seconds}s\n{worker.output()}"
        time.sleep(0.1)


def _waiting_on_hour_lock(cluster: Cluster, hour: datetime) -> set[int]:
    """The database sessions whose ingest of the hour is inside its transaction, waiting for the hour's
    lock (a killed process's session waits on until it gets the lock, then finds its client gone)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2",
            [cluster.pk, int(hour.timestamp() // 3600)],
        )
        return {pid for (pid,) in cursor.fetchall()}


def _new_lock_waiter(cluster: Cluster, hour: datetime, worker: Worker, *, seen: set[int], what: str) -> set[int]:
    _wait(lambda: bool(_waiting_on_hour_lock(cluster, hour) - seen), worker, seconds=40, what=what)
    return _waiting_on_hour_lock(cluster, hour)


def _pool_process_kill(worker: Worker) -> None:
    """SIGKILL the worker's pool process; wait for the worker to start another."""
    (pool_process,) = worker.pool_processes()
    os.kill(pool_process, signal.SIGKILL)
    _wait(lambda: pool_process not in worker.pool_processes() and bool(worker.pool_processes()), worker,
          seconds=20, what="a new pool process")  # fmt: skip


def test_a_task_whose_pool_process_is_killed_runs_again(cluster: Cluster, start_worker) -> None:
    # given a worker, and the lock of one hour held here, so that its ingest is caught mid-task
    worker = start_worker()
    held = HOURS[2]
    with transaction.atomic():
        telemetry.cluster_hour_lock(cluster=cluster, hour=held)
        # when ten hours are sent, and the pool process running the held hour is killed, twice
        for hour in HOURS:
            ingest_hour_task.delay(cluster.pk, hour.isoformat())
        seen = _new_lock_waiter(cluster, held, worker, seen=set(), what="the held hour's task running")
        for kill in ("first", "second"):
            _pool_process_kill(worker)
            seen |= _new_lock_waiter(cluster, held, worker, seen=seen, what=f"the task back after the {kill} kill")
    # then, the lock released, every hour ends up ingested, the killed one too
    _wait(lambda: IngestedHour.objects.count() == len(HOURS), worker, seconds=40, what="every hour ingested")
    assert set(IngestedHour.objects.values_list("hour", flat=True)) == set(HOURS)
    assert "SIGKILL" in worker.output()


def _connections_allowed(allowed: bool) -> None:
    """Let the test database take new connections, or refuse them all (ALTER DATABASE from another one)."""
    params = connection.settings_dict
    with psycopg.connect(
        host=params["HOST"] or "127.0.0.1", port=params["PORT"] or 5432, user=params["USER"], dbname="postgres",
        autocommit=True,
    ) as admin:  # fmt: skip
        admin.execute(f'ALTER DATABASE "{params["NAME"]}" WITH ALLOW_CONNECTIONS {str(allowed).lower()}')


def test_a_worker_whose_database_is_down_retries_until_it_is_back(cluster: Cluster, start_worker) -> None:
    # given the test database refusing every new connection (a Postgres outage, as a worker sees it)
    _connections_allowed(False)
    try:
        worker = start_worker()
        # when hours are sent, and the database comes back once each task has met it down
        for hour in HOURS[:4]:
            ingest_hour_task.delay(cluster.pk, hour.isoformat())
        _wait(lambda: worker.output(tail=10**7).count("OperationalError(") >= 4, worker, seconds=30,
              what="each task meeting the database down")  # fmt: skip
    finally:
        _connections_allowed(True)
    # then every hour is ingested: the tasks were retried, not dropped
    _wait(lambda: IngestedHour.objects.count() == 4, worker, seconds=40, what="every hour ingested")


def test_the_broker_redelivers_only_after_the_longest_task_could_have_run() -> None:
    # given the longest a task may run, and the longest a retry waits (it sits unacknowledged at the worker)
    longest_s = settings.CELERY_TASK_TIME_LIMIT + settings.FLEETWATT_TASK_RETRY_BACKOFF_MAX_S
    # then Redis hands an unacknowledged task to another worker only after that
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] > longest_s
    assert settings.CELERY_TASK_ACKS_LATE and settings.CELERY_TASK_REJECT_ON_WORKER_LOST
