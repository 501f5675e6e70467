"""docker-compose.yml run by podman-compose with docker-compose.podman.yml: migrate, web, worker and beat
from the app's image, against this machine's Postgres (a database and two roles of the module's own) and a
Redis of the module's own (beat's and the worker's queues never meet the suite's). The stack is brought up
once for the module; its tests then

- check the roles: migrations as the owner, the app as its own role, /healthz;
- ingest a simulated fleet's hours with the containers' worker (the ingest task sent by name to the stack's
  broker) and read its jobs back through the web container's API with a named token an admin made;
- stop the worker container in the middle of an ingest task: with `compose stop` (SIGTERM: Celery's warm
  shutdown finishes the task, then the worker exits), and past a short stop timeout (podman then SIGKILLs
  it; the task, never acknowledged, is handed out again by Redis after CELERY_VISIBILITY_TIMEOUT); either
  way the hour's rows are exactly those of an undisturbed in-process ingest.

"Mid-task" is made certain rather than timed: the test holds the cluster-hour's advisory lock, so the task
has fetched its hour and waits inside its write transaction (as tests/faults/test_worker_lost.py does)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from celery import Celery
from django.db import connection

from apps.fleet.models import Cluster
from apps.pipeline.ingest import hour_ingest
from apps.simulator.local_prometheus import free_port
from tests.conftest import LoadedHistory
from tests.deploy.containers import REPO, BuiltImage, podman, podman_env
from tests.deploy.stack_services import StackDatabase, database_with_roles, redis_server
from tests.scenarios import spine_scenario

# django_db on every test keeps them in the file's order (pytest-django runs its database tests first).
pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

PODMAN_COMPOSE = Path(sys.executable).parent / "podman-compose"
COMPOSE_FILES = ("-f", "docker-compose.yml", "-f", "docker-compose.podman.yml")
INGEST_HOUR_TASK = "apps.telemetry.tasks.ingest_hour_task"
# How long Redis keeps a delivered, unacknowledged task from the other workers (CELERY_VISIBILITY_TIMEOUT):
# short here, so that the test of a killed worker does not wait the product's 45 minutes. Every task of
# these tests ends well within it.
VISIBILITY_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def compose_database() -> Iterator[StackDatabase]:
    """A database owned by an owner role, and an app role that owns nothing (docs/operations.md, "Database
    roles"), both of this module's own; dropped afterwards."""
    with database_with_roles("compose") as db:
        yield db


@pytest.fixture(scope="module")
def compose_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis of the module's own, so that beat's schedule and the worker's queue stay apart from the suite's."""
    with redis_server(tmp_path_factory.mktemp("compose-redis")) as url:
        yield url


def compose(project: Path, name: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """podman-compose in the project. Compose fills `${NAME}` from its own environment before .env: the
    suite's DATABASE_URL must not reach the containers, so .env's settings are its environment too."""
    dotenv = dict(line.split("=", 1) for line in (project / ".env").read_text().splitlines())
    proc = subprocess.run(
        [str(PODMAN_COMPOSE), "--in-pod", "false", "-p", name, *COMPOSE_FILES, *args],
        cwd=project,
        env=podman_env() | dotenv,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert proc.returncode == 0, f"podman-compose {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@contextmanager
def celery_client(broker_url: str) -> Iterator[Celery]:
    """A Celery app of the test's own on the stack's broker, which never becomes Celery's current app: the
    suite's tasks keep their broker."""
    app = Celery(broker=broker_url, set_as_current=False)
    try:
        yield app
    finally:
        app.close()


@dataclass(frozen=True)
class ComposeStack:
    project: Path
    name: str
    database: StackDatabase
    redis_url: str
    web_url: str

    def container(self, service: str) -> str:
        return f"{self.name}_{service}_1"

    def logs(self, service: str, *, since: str | None = None, tail: int = 4000) -> str:
        proc = podman("logs", *(["--since", since] if since else []), self.container(service), check=False)
        return (proc.stdout + proc.stderr)[-tail:]

    def manage(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
        """`manage.py` in the web container, as an admin runs it (`docker compose exec web ...`)."""
        options = [opt for name, value in (env or {}).items() for opt in ("-e", f"{name}={value}")]
        proc = subprocess.run(
            ["podman", "exec", "-i", *options, self.container("web"), "python", "manage.py", *args],
            env=podman_env(),
            input=stdin or "",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, f"manage.py {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return proc.stdout

    def worker_ping(self, *, seconds: float = 60) -> None:
        """Until the worker answers on the broker."""
        with celery_client(self.redis_url) as app:
            deadline = time.monotonic() + seconds
            while not (replies := app.control.ping(timeout=2)):
                assert time.monotonic() < deadline, self.logs("worker")
        assert len(replies) == 1, replies

    def ingest_send(self, cluster_id: int, hour: datetime) -> None:
        """The hour's ingest task, sent by name to the stack's broker (as `ingest_hour_task.delay` would)."""
        with celery_client(self.redis_url) as app:
            app.send_task(INGEST_HOUR_TASK, args=[cluster_id, hour.isoformat()])


@pytest.fixture(scope="module")
def stack(
    app_image: BuiltImage,
    compose_database: StackDatabase,
    compose_redis: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ComposeStack]:
    """The repository's compose files beside a .env pointing at this machine's services; migrate run to its
    end, then web, worker and beat up, /healthz answering and the worker answering on the broker."""
    project = tmp_path_factory.mktemp("compose") / "project"
    project.mkdir()
    for name in ("docker-compose.yml", "docker-compose.podman.yml"):
        shutil.copy(REPO / name, project / name)
    port = free_port()
    away = (datetime.now(UTC).minute + 30) % 60  # beat's hourly ingest and scheduler sync: not while this runs
    env = {
        "FLEETWATT_IMAGE": app_image.tag,
        "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_SECURE_COOKIES": "0",  # served over plain http here: the login's cookies must come back
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "CELERY_WORKER_CONCURRENCY": "1",
        "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT_S),
        "FLEETWATT_INGEST_MINUTE": str(away),
        "FLEETWATT_SCHEDULER_MINUTE": str(away),
        "DATABASE_URL": compose_database.url(compose_database.app),
        "DATABASE_OWNER_URL": compose_database.url(compose_database.owner),
        "FLEETWATT_DB_APP_ROLE": compose_database.app,
        "REDIS_URL": compose_redis,
    }
    (project / ".env").write_text("".join(f"{name}={value}\n" for name, value in env.items()))
    name = f"fleetwatt-test-{uuid.uuid4().hex[:8]}"
    running = ComposeStack(project, name, compose_database, compose_redis, f"http://127.0.0.1:{port}")
    try:
        compose(project, name, "up", "-d", "--no-build", "--no-deps", "migrate")
        exit_code = podman("wait", running.container("migrate"), timeout_s=300).stdout.strip()
        assert exit_code == "0", running.logs("migrate")
        compose(project, name, "up", "-d", "--no-build", "--no-deps", "web", "worker", "beat")
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{running.web_url}/healthz", timeout=10)
                break
            except (requests.ConnectionError, requests.Timeout):
                assert time.monotonic() < deadline, running.logs("web")
                time.sleep(0.5)
        running.worker_ping()
        yield running
    finally:
        try:
            compose(project, name, "down", "-v", "-t", "10")
        finally:
            for leftover in podman("ps", "-aq", "--filter", f"label=io.podman.compose.project={name}").stdout.split():
                podman("rm", "--force", leftover, check=False)
            podman("volume", "rm", "--force", f"{name}_pgdata", check=False)


def test_compose_migrates_as_the_owner_and_serves_as_the_app_role(stack: ComposeStack) -> None:
    # given the stack up (migrate ended well: the fixture checked its exit code)
    # when /healthz is asked (30 s: on a loaded machine a fresh gunicorn worker answers its first request slowly)
    resp = requests.get(f"{stack.web_url}/healthz", timeout=30)
    # then it answers, with Postgres and Redis reached from the containers
    assert resp.status_code == 200, stack.logs("web")
    assert resp.json()["checks"]["postgres"]["ok"] and resp.json()["checks"]["redis"]["ok"]
    # and web, the worker and beat run
    for service in ("web", "worker", "beat"):
        state = podman("inspect", "--format", "{{.State.Running}}", stack.container(service)).stdout.strip()
        assert state == "true", f"{service}: {stack.logs(service)}"
    # and the owner owns every table, the app's role none, and the app's role may not rewrite the audit log
    db = stack.database
    with db.connect() as conn:
        owners = dict(conn.execute("SELECT tableowner, count(*) FROM pg_tables WHERE schemaname = 'public' GROUP BY 1"))
        assert set(owners) == {db.owner}, owners
        rights = conn.execute(
            "SELECT has_table_privilege(%(app)s, 'waste_auditentry', 'INSERT'),"
            " has_table_privilege(%(app)s, 'waste_auditentry', 'UPDATE')",
            {"app": db.app},
        ).fetchone()
        assert rights == (True, False)
        # and web's, the worker's and beat's connections are the app role's: no container holds the owner's URL
        roles = {
            row[0]
            for row in conn.execute(
                "SELECT usename FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (db.name,)
            )
        }
        assert roles == {db.app}, roles
    for service in ("web", "worker", "beat"):
        environment = podman("exec", stack.container(service), "env").stdout
        assert f"DATABASE_OWNER_URL={db.url(db.owner)}" not in environment


# --- A simulated fleet ingested by the containers' worker, read back through the containers' API. ---


def cluster_configure(stack: ComposeStack, history: LoadedHistory, name: str) -> int:
    """The cluster, as an admin configures one: a fleet config applied with `manage.py apply_config` in the
    web container (docs/config.md). Returns its id in the stack's database."""
    config = (
        f"clusters:\n  - name: {name}\n    prometheus_url: {history.url}\n"
        f"    scrape_interval_s: {history.scenario.scrape_interval_s}\n"
    )
    stack.manage("apply_config", "/dev/stdin", stdin=config)
    with stack.database.connect() as conn:
        row = conn.execute("SELECT id FROM fleet_cluster WHERE name = %s", (name,)).fetchone()
    assert row is not None, f"apply_config made no cluster {name}"
    return int(row[0])


def ingested_hours(stack: ComposeStack, cluster_id: int) -> dict[datetime, datetime]:
    """The cluster's ingested hours in the stack's database, with when each was last written."""
    with stack.database.connect() as conn:
        rows = conn.execute(
            "SELECT hour, ingested_at FROM telemetry_ingestedhour WHERE cluster_id = %s", (cluster_id,)
        ).fetchall()
    return dict(rows)


def wait_for(condition: Callable[[], bool], stack: ComposeStack, *, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {seconds} s\n{stack.logs('worker')}"
        time.sleep(0.2)


def api_token(stack: ComposeStack) -> str:
    """A named API token, made as docs/api.md says: an admin (`manage.py createsuperuser` in the web
    container, docs/deploy.md) logs in and creates it under Tokens, where its key is shown once."""
    password = uuid.uuid4().hex
    stack.manage(
        "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com",
        env={"DJANGO_SUPERUSER_PASSWORD": password},
    )  # fmt: skip
    with requests.Session() as browser:

        def csrf(path: str) -> str:
            page = browser.get(f"{stack.web_url}{path}", timeout=10)
            assert page.status_code == 200, page.text[-2000:]
            found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert found, page.text[-2000:]
            return found.group(1)

        login = browser.post(
            f"{stack.web_url}/accounts/login/",
            data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf("/accounts/login/")},
            timeout=10,
        )
        assert login.status_code == 200 and "/accounts/login/" not in login.url, login.text[-2000:]
        made = browser.post(
            f"{stack.web_url}/tokens/",
            data={"name": "compose test", "csrfmiddlewaretoken": csrf("/tokens/")},
            timeout=10,
        )
    key = re.search(r'<code id="new-key-value">(fw_[^<]+)</code>', made.text)
    assert made.status_code == 200 and key, made.text[-2000:]
    return key.group(1)


def api_jobs(stack: ComposeStack, token: str, cluster: str) -> dict[str, dict[str, Any]]:
    """Every job of the cluster from `/api/jobs/`, page by page, by job key."""
    jobs: dict[str, dict[str, Any]] = {}
    url: str | None = f"{stack.web_url}/api/jobs/?cluster={cluster}&page_size=100"
    while url:
        resp = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert resp.status_code == 200, resp.text[-2000:]
        body = resp.json()
        jobs |= {job["job_key"]: job for job in body["results"]}
        url = body["next"]
    return jobs


def test_a_simulated_fleet_ingested_by_the_worker_is_read_back_through_the_api(
    stack: ComposeStack, history_loader: Callable[[dict[str, Any]], LoadedHistory]
) -> None:
    # given the spine's history in a Prometheus on this machine, and a cluster an admin configured for it
    history = history_loader(spine_scenario())
    cluster_id = cluster_configure(stack, history, "spine")
    sc = history.scenario
    first = datetime.fromtimestamp(sc.t0, UTC)
    hours = [first + timedelta(hours=i) for i in range(int(sc.duration_s // 3600) + 1)]  # the last jobs linger
    # when each hour's ingest task is sent to the stack's broker
    for hour in hours:
        stack.ingest_send(cluster_id, hour)
    # then the containers' worker ingests them all
    wait_for(lambda: set(ingested_hours(stack, cluster_id)) == set(hours), stack, seconds=180, what="every hour")
    # and the web container's API, asked with a named token, lists the simulator's jobs with their energy, to
    # the precision of the in-process end-to-end test (tests/telemetry/test_ingest_end_to_end.py)
    jobs = api_jobs(stack, api_token(stack), "spine")
    assert set(jobs) == set(history.truth)
    for key, truth in history.truth.items():
        job = jobs[key]
        assert job["coverage"] == pytest.approx(truth.coverage, abs=0.01), key
        if truth.source == "agent":
            if truth.coverage >= 0.95:
                assert job["energy_j"] == pytest.approx(truth.energy_j, rel=1e-4), key
            for method, joules in truth.energy_by_method.items():
                assert job["attribution_j"][method] == pytest.approx(joules, rel=1e-4, abs=1.0), (key, method)
        else:  # dcgm-exporter only: hourly series, so the split is as close as the scrape interval allows
            assert job["energy_j"] == pytest.approx(truth.energy_j, rel=0.02), key
            assert job["attribution"] == truth.attribution, key
        # a gap the agent saw the job on both sides of is charged as an estimate (docs/arithmetic.md): then the
        # job's energy is what it drew every second it ran, seen or not
        expected_j = truth.physical_energy_j if "estimated" in job["attribution_j"] else truth.energy_j
        assert job["energy_kwh"] == pytest.approx(expected_j / 3.6e6, rel=0.02), key


# --- A worker container stopped in the middle of an ingest task. ---

# A fleet of the shutdown tests' own (its own nodes, so its GPUs are no other cluster's): agent GPUs with a
# shared one, and a dcgm-only node with two pods on one GPU.
SHUTDOWN_SCENARIO: dict[str, Any] = {
    "name": "shutdown",
    "start": "2026-11-09T00:00:00Z",
    "duration": "2h",
    "scrape_interval_s": 15,
    "nodes": [
        {"hostname": "term-a", "gpus": 4},
        {"hostname": "term-k8s", "gpus": 2, "agent": False, "dcgm_pod_labels": True, "dcgm_pod_values": "own"},
    ],
    "jobs": [
        {"scheduler": "slurm", "job_id": "701", "user": "ada", "account": "vision", "node": "term-a",
         "gpus": [0, 1], "start": "12m", "end": "1h48m", "sm": [[0, 90], ["40m", 60]],
         "power_w": [[0, 650], ["40m", 480]], "memory_gib": 60},
        {"scheduler": "slurm", "job_id": "702", "user": "bob", "account": "nlp", "node": "term-a", "gpus": [2],
         "start": "5m", "end": "1h30m", "sm": 95, "power_w": 690, "memory_gib": 4},
        {"scheduler": "slurm", "job_id": "703", "user": "cy", "account": "nlp", "node": "term-a", "gpus": [2],
         "start": "25m", "end": "1h10m", "sm": 3, "power_w": 90, "memory_gib": 12},
        {"scheduler": "k8s", "namespace": "search", "pod": "ranker-1", "node": "term-k8s", "gpus": [0],
         "start": "0s", "end": "2h", "sm": 70, "power_w": 600, "memory_gib": 40},
        {"scheduler": "k8s", "namespace": "search", "pod": "embed-1", "node": "term-k8s", "gpus": [0],
         "start": "20m", "end": "1h40m", "sm": 20, "power_w": 300, "memory_gib": 10},
    ],
}  # fmt: skip
SHUTDOWN_CLUSTER = "shutdown"
SHUTDOWN_H0 = datetime(2026, 11, 9, tzinfo=UTC)
COMPOSE_DEFAULT_GRACE_S = 10  # docker compose's and podman-compose's stop timeout where the file gives none


@pytest.fixture(scope="module")
def shutdown_cluster(stack: ComposeStack, history_loader: Callable[[dict[str, Any]], LoadedHistory]) -> int:
    return cluster_configure(stack, history_loader(SHUTDOWN_SCENARIO), SHUTDOWN_CLUSTER)


@pytest.fixture
def worker(stack: ComposeStack) -> Iterator[str]:
    """The worker container, running and answering at the start of the test and again after it, whatever
    the test did to it."""

    def up() -> None:
        if podman("inspect", "--format", "{{.State.Running}}", stack.container("worker")).stdout.strip() != "true":
            podman("start", stack.container("worker"))
        stack.worker_ping()

    up()
    yield stack.container("worker")
    up()


def process_alive(stack: ComposeStack, service: str) -> bool:
    """Whether the container's main process lives (while podman stops a container, its state is already
    `stopping`, not running)."""
    pid = int(podman("inspect", "--format", "{{.State.Pid}}", stack.container(service)).stdout.strip() or 0)
    return pid > 0 and Path(f"/proc/{pid}").exists()


def hour_key(hour: datetime) -> int:
    return int(hour.timestamp() // 3600)  # the second key of the cluster-hour's lock (cluster_hour_lock)


def hour_lock_waiters(stack: ComposeStack, cluster_id: int, hour: datetime) -> set[int]:
    """The app role's sessions whose ingest of the hour is inside its transaction, waiting for the hour's lock."""
    with stack.database.connect() as conn:
        rows = conn.execute(
            "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid::bigint = %s AND l.objid::bigint = %s"
            " AND l.objsubid = 2 AND a.usename = %s",
            (cluster_id, hour_key(hour), stack.database.app),
        ).fetchall()
    return {pid for (pid,) in rows}


@contextmanager
def hour_lock_held(stack: ComposeStack, cluster_id: int, hour: datetime) -> Iterator[Callable[[], None]]:
    """The cluster-hour's lock held by a session of the test's own until the `release` it yields is called
    (or the block ends): an ingest of that hour waits, its hour fetched, inside its write transaction."""
    with stack.database.connect() as conn:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (cluster_id, hour_key(hour)))
        held = [True]

        def release() -> None:
            if held.pop():
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (cluster_id, hour_key(hour)))
                held.append(False)

        try:
            yield release
        finally:
            release()


def ingest_messages(stack: ComposeStack) -> dict[str, list[list[Any]]]:
    """The ingest tasks' arguments in the broker: those waiting in the queue, and those delivered to a worker
    and not acknowledged (kombu's Redis transport keeps them in the `unacked` hash until acked)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        queued = [json.loads(raw) for raw in client.lrange("celery", 0, -1)]
        unacked = [json.loads(raw)[0] for raw in client.hvals("unacked")]
    finally:
        client.close()

    def args(messages: list[dict[str, Any]]) -> list[list[Any]]:
        return [
            json.loads(base64.b64decode(m["body"]))[0] for m in messages if m["headers"].get("task") == INGEST_HOUR_TASK
        ]

    return {"queued": args(queued), "unacked": args(unacked)}


def ingest_delivered_at(stack: ComposeStack) -> float:
    """When the unacknowledged ingest task was delivered (kombu's `unacked_index`: the time Redis counts the
    visibility timeout from)."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        (tag,) = [
            tag
            for tag, raw in client.hgetall("unacked").items()
            if json.loads(raw)[0]["headers"].get("task") == INGEST_HOUR_TASK
        ]
        score = client.zscore("unacked_index", tag)
    finally:
        client.close()
    assert score is not None
    return float(score)


HOUR_ROWS = {
    "gpu_hours": """
        SELECT n.hostname, g.index, '', to_jsonb(r) - 'id' - 'gpu_id'
        FROM telemetry_gpuhour r JOIN fleet_gpu g ON g.id = r.gpu_id JOIN fleet_node n ON n.id = g.node_id
        JOIN fleet_cluster c ON c.id = n.cluster_id WHERE c.name = %s AND r.hour = %s""",
    "job_gpu_hours": """
        SELECT n.hostname, g.index, j.job_key, to_jsonb(r) - 'id' - 'gpu_id' - 'job_id'
        FROM jobs_jobgpuhour r JOIN jobs_job j ON j.id = r.job_id JOIN fleet_gpu g ON g.id = r.gpu_id
        JOIN fleet_node n ON n.id = g.node_id JOIN fleet_cluster c ON c.id = j.cluster_id
        WHERE c.name = %s AND r.hour = %s""",
    "job_gpu_hour_energy": """
        SELECT n.hostname, g.index, j.job_key, to_jsonb(r) - 'id' - 'gpu_id' - 'job_id'
        FROM jobs_jobgpuhourenergy r JOIN jobs_job j ON j.id = r.job_id JOIN fleet_gpu g ON g.id = r.gpu_id
        JOIN fleet_node n ON n.id = g.node_id JOIN fleet_cluster c ON c.id = j.cluster_id
        WHERE c.name = %s AND r.hour = %s""",
}


def hour_rows(cursor: Any, cluster: str, hour: datetime) -> dict[str, list[str]]:
    """The hour's GPU-hours, job-GPU-hours and their energy by method, named by node, GPU index and job key
    (ids differ between databases), every column else as stored: two ingests of the hour must agree exactly."""
    cursor.execute("SET TIME ZONE 'UTC'")
    out = {}
    for table, sql in HOUR_ROWS.items():
        cursor.execute(sql, (cluster, hour))
        out[table] = sorted(
            json.dumps({"node": node, "gpu": index, "job": job, **(json.loads(row) if isinstance(row, str) else row)},
                       sort_keys=True)
            for node, index, job, row in cursor.fetchall()
        )  # fmt: skip  # (Django's cursor gives jsonb as text, psycopg's as a dict)
    return out


def reference_rows(
    history: LoadedHistory, cluster_for: Callable[..., Cluster], hours: list[datetime], hour: datetime
) -> dict[str, list[str]]:
    """The hour's rows as an undisturbed in-process ingest writes them, in the test database: the same hours
    ingested, in the same order, as the stack's database holds."""
    cluster = cluster_for(history, SHUTDOWN_CLUSTER)
    for h in hours:
        hour_ingest(cluster=cluster, hour=h)
    with connection.cursor() as cursor:
        return hour_rows(cursor, SHUTDOWN_CLUSTER, hour)


def stack_rows(stack: ComposeStack, hour: datetime) -> dict[str, list[str]]:
    with stack.database.connect() as conn, conn.cursor() as cursor:
        return hour_rows(cursor, SHUTDOWN_CLUSTER, hour)


def test_a_worker_stopped_mid_task_finishes_the_task_then_exits(
    stack: ComposeStack, shutdown_cluster: int, worker: str, history_loader, cluster_for
) -> None:
    hour = SHUTDOWN_H0
    assert hour not in ingested_hours(stack, shutdown_cluster)
    with ThreadPoolExecutor(1) as background, hour_lock_held(stack, shutdown_cluster, hour) as release:
        # given the hour's ingest task running in the worker container, its hour fetched, waiting to write it
        stack.ingest_send(shutdown_cluster, hour)
        wait_for(lambda: bool(hour_lock_waiters(stack, shutdown_cluster, hour)), stack, seconds=60, what="mid-task")
        # when the worker is stopped as an operator stops it (`compose stop worker`: SIGTERM, then SIGKILL once
        # the file's stop_grace_period is over)
        signalled = datetime.now(UTC)
        stopping = background.submit(compose, stack.project, stack.name, "stop", "worker", timeout_s=300)
        since = signalled.isoformat()
        wait_for(lambda: "Warm shutdown" in stack.logs("worker", since=since), stack, seconds=30, what="warm shutdown")
        # then the worker waits for its task, longer than compose's default grace (10 s) if need be
        time.sleep(max(0.0, signalled.timestamp() + COMPOSE_DEFAULT_GRACE_S + 2 - time.time()))
        assert process_alive(stack, "worker"), stack.logs("worker", since=since)
        assert hour_lock_waiters(stack, shutdown_cluster, hour)
        assert hour not in ingested_hours(stack, shutdown_cluster)
        # and once the task can write, it ends, and so does the worker, cleanly
        release()
        stopping.result()
    logs = stack.logs("worker", since=since, tail=20_000)
    exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", worker).stdout.strip()
    assert exit_code == "0", logs
    assert ingested_hours(stack, shutdown_cluster)[hour] > signalled, logs
    assert re.search(r"Task apps\.telemetry\.tasks\.ingest_hour_task\[[^]]+\] succeeded", logs), logs
    # and its message was acknowledged: nothing of it is left in the broker to run again
    assert ingest_messages(stack) == {"queued": [], "unacked": []}
    # and the hour's rows are exactly an undisturbed ingest's
    done = sorted(ingested_hours(stack, shutdown_cluster))
    rows = stack_rows(stack, hour)
    assert all(rows.values()), rows
    assert rows == reference_rows(history_loader(SHUTDOWN_SCENARIO), cluster_for, done, hour)


def test_a_worker_killed_past_its_stop_timeout_mid_task_gets_the_task_again(
    stack: ComposeStack, shutdown_cluster: int, worker: str, history_loader, cluster_for
) -> None:
    hour = SHUTDOWN_H0 + timedelta(hours=1)
    assert hour not in ingested_hours(stack, shutdown_cluster)
    with hour_lock_held(stack, shutdown_cluster, hour) as release:
        # given the hour's ingest task running in the worker container, its hour fetched, waiting to write it
        stack.ingest_send(shutdown_cluster, hour)
        wait_for(lambda: bool(hour_lock_waiters(stack, shutdown_cluster, hour)), stack, seconds=60, what="mid-task")
        dead = hour_lock_waiters(stack, shutdown_cluster, hour)
        # when the container is stopped with a timeout the task outlasts: SIGTERM, then SIGKILL
        podman("stop", "-t", "3", worker, timeout_s=60)
        exit_code = podman("inspect", "--format", "{{.State.ExitCode}}", worker).stdout.strip()
        assert exit_code == "137", stack.logs("worker")  # SIGKILLed: the warm shutdown still waited on the task
        # then the task is neither done nor lost: the broker holds it, delivered and not acknowledged
        assert hour not in ingested_hours(stack, shutdown_cluster)
        assert ingest_messages(stack) == {"queued": [], "unacked": [[shutdown_cluster, hour.isoformat()]]}
        # when the worker starts again, once the visibility timeout has passed since the task was delivered
        delivered_at = ingest_delivered_at(stack)
        time.sleep(max(0.0, delivered_at + VISIBILITY_TIMEOUT_S + 1 - time.time()))
        restarted = datetime.now(UTC)
        podman("start", worker)
        # then Redis hands the task out again and the worker runs it: a new session waits on the hour
        wait_for(
            lambda: bool(hour_lock_waiters(stack, shutdown_cluster, hour) - dead), stack, seconds=90,
            what="the task delivered again",
        )  # fmt: skip
        release()
        wait_for(lambda: hour in ingested_hours(stack, shutdown_cluster), stack, seconds=60, what="the hour written")
    wait_for(lambda: ingest_messages(stack) == {"queued": [], "unacked": []}, stack, seconds=30, what="the ack")
    logs = stack.logs("worker", since=restarted.isoformat(), tail=20_000)
    assert len(re.findall(r"Task apps\.telemetry\.tasks\.ingest_hour_task\[[^]]+\] succeeded", logs)) == 1, logs
    stack.worker_ping()
    # and the hour's rows are exactly an undisturbed ingest's: none lost, none twice
    done = sorted(ingested_hours(stack, shutdown_cluster))
    rows = stack_rows(stack, hour)
    assert all(rows.values()), rows
    assert rows == reference_rows(history_loader(SHUTDOWN_SCENARIO), cluster_for, done, hour)
