"""Benchmark: the API's lists and rollups, and the dashboard's pages, with a million jobs in the database.

Fills a database of its own with a year of 1,000,000 jobs (one job-GPU-hour row and one method row
each, over 1,000 GPUs and 10 teams, a waste finding on every 47th job of which 10,000 are open and the rest
acknowledged, one job in ten in one of 20 job groups, a year of weekly reports per team, 5,000 audit entries, and
June's GPU-hours of every GPU for the fleet page's heatmap), builds the daily sums, serves
the app with gunicorn as deployed (gunicorn.conf.py), and sends 20 concurrent clients at every list and
rollup of the API and at the pages: as a member of a team with a session (the team's rollups, jobs, findings, teams,
reports, the teams side by side; the team's page and its job list for June, a job's page) and as an admin with a
session (the fleet-wide ones: clusters, GPUs, job groups and their rollups, the audit log; the fleet page with its
heatmap, a week of 1,000 GPUs by the hour, and the audit queue of the 10,000 open findings, their money at stake in
June). The floor is the API's root, asked by each caller beside the rest. Each endpoint is measured twice, side
by side: with the page caches (a repeated ask, as dashboards, tools and people coming back to a page repeat them) and
without them (`FLEETWATT_API_PAGE_CACHE_S=0`, `FLEETWATT_PAGE_CACHE_S=0`: every page computed; the rollups of a
team, a cluster and a job group and the teams side by side still read their own kept documents,
apps.rollups.documents, so their first ask shows only in `--after-change`). `--token`: also a finance tool with an
API token. `--only page`: the pages alone (with the floor: `--only` keeps it).
With the page cache, every endpoint is loaded in `--rounds` rounds (3), one endpoint after the other in
each round; the round of median p95 is reported (p50/p95/p99), with each round's p95 beside it. And the first
ask after a change (`--after-change N`, 5): N times, the data changes and the 20 clients ask for the page at once;
the change is an ingest's (as its task does: its mark, a new generation, and the rollups asked for lately prepared
again in a thread while the clients ask, and once more when it is done), then an admin's edit (a new generation,
nothing prepared). Target: p95 under 100 ms for the API, 150 ms for the pages.

    .venv/bin/python bench/dashboard_endpoints.py [--reuse] [--token] [--workers N] [--requests 1000]
        [--page-cache both|on|off] [--only SUBSTRING] [--rounds 3] [--after-change 5]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DB = "fleetwatt_bench_dashboard"
ENV = {
    "DJANGO_SETTINGS_MODULE": "fleetwatt.settings",
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_SECURE_SSL_REDIRECT": "0",
    "DJANGO_SECURE_COOKIES": "0",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB}",
    "FLEETWATT_API_TOKEN_RATE": "1000000/min",  # the load is one token: the limit is not what is measured
}
os.environ.update(ENV)

import django  # noqa: E402


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "'{}'::jsonb"
    if isinstance(value, list):
        return "'{}'"
    return "'" + str(value).replace("'", "''") + "'"


def _columns(model: type, overrides: dict[str, str]) -> tuple[str, str]:
    """Every column of the model, from the overrides or its default."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    names = ", ".join(f'"{f.column}"' for f in fields)
    return names, ", ".join(overrides.get(f.name, _literal(f.get_default())) for f in fields)


def fill(n_jobs: int) -> None:
    from django.db import connection

    from apps.fleet.models import Cluster, Gpu, Node, Team
    from apps.jobs.models import Job, JobGpuHour
    from apps.rollups.services import day_sums_refresh

    cluster = Cluster.objects.create(name="bench", prometheus_url="http://127.0.0.1:9")
    teams = [Team.objects.create(name=f"team{k}") for k in range(10)]
    nodes = Node.objects.bulk_create([Node(cluster=cluster, hostname=f"n{k:03d}") for k in range(125)])
    Gpu.objects.bulk_create(
        [Gpu(node=n, uuid=f"GPU-{n.hostname}-{i}", index=i, model_name="NVIDIA H200") for n in nodes for i in range(8)]
    )
    gpu_lo = Gpu.objects.order_by("id").values_list("id", flat=True).first()
    team_lo = teams[0].pk
    year = datetime(2025, 12, 1, tzinfo=UTC)

    hour = f"TIMESTAMPTZ '{year.isoformat()}' + ((s * 37) %% 8760) * INTERVAL '1 hour'"
    job_cols, job_exprs = _columns(Job, {
        "cluster": str(cluster.pk), "job_key": "'slurm/' || s", "scheduler": "'slurm'", "job_id": "s::text",
        "team": f"{team_lo} + (s %% 10)", "source": "'agent'", "start": hour, "end": hour + " + INTERVAL '50 minutes'",
        "last_seen": hour + " + INTERVAL '50 minutes'", "energy_j": "1.5e6 + (s %% 997)", "attribution": "'whole_gpu'",
        "attribution_j": "jsonb_build_object('whole_gpu', 1.5e6 + (s %% 997))", "coverage": "1.0",
        "gpu_hours": "0.8", "flags": "'{}'::varchar[]", "cost": "2.5", "currency": "'EUR'",
        "facility_kwh": "0.55", "operational_kg": "0.2", "first_day": f"(({hour}) AT TIME ZONE 'UTC')::date",
        "last_day": f"(({hour}) AT TIME ZONE 'UTC')::date",
    })  # fmt: skip
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(f"INSERT INTO jobs_job ({job_cols}) SELECT {job_exprs} FROM generate_series(1, %s) s", [n_jobs])
        jh_cols, jh_exprs = _columns(JobGpuHour, {
            "job": "j.id", "gpu": f"{gpu_lo} + (j.id %% 1000)", "hour": "date_trunc('hour', j.start)",
            "source": "'agent'", "energy_j": "j.energy_j", "sampled_s": "3000", "sm_s": "2000",
            "occupancy_s": "2880", "facility_kwh": "0.55", "operational_kg": "0.2", "embodied_kg": "0.05",
            "cost": "2.5", "job_start": "j.start", "first_seen": "j.start", "last_seen": "j.last_seen",
        })  # fmt: skip
        cursor.execute(f"INSERT INTO jobs_jobgpuhour ({jh_cols}) SELECT {jh_exprs} FROM jobs_job j", [])
        cursor.execute(
            "INSERT INTO jobs_jobgpuhourenergy (job_id, gpu_id, hour, method, energy_j) "
            "SELECT job_id, gpu_id, hour, 'whole_gpu', energy_j FROM jobs_jobgpuhour"
        )
        # As a database in use is: vacuumed (else autovacuum takes a core during the first endpoints' load).
        cursor.execute("VACUUM ANALYZE")
        print(f"filled {n_jobs:,} jobs in {time.perf_counter() - started:.0f}s")
    started = time.perf_counter()
    days = [year.date() + timedelta(days=d) for d in range(366)]
    day_sums_refresh(cluster_ids=[cluster.pk], days=days)
    sums_vacuum()
    print(f"built the teams' daily sums in {time.perf_counter() - started:.0f}s")


def sums_vacuum() -> None:
    """The daily sums just written vacuumed, as autovacuum leaves a database in use: the pages read the GPUs' days
    and the jobs' days from their indexes alone where the pages are all-visible."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE rollups_jobday, rollups_gpuday, rollups_teamday, rollups_clusterday")


OPEN_FINDINGS = 10_000  # the audit queue's


def fill_flags() -> None:
    """A waste finding on every 47th job (21,276 of a million, on every team), as findings leave them (open)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO waste_flag (kind, cluster_id, job_id, status, evidence, created_at, updated_at) "
            "SELECT CASE WHEN id %% 2 = 0 THEN 'memory_hog' ELSE 'idle_allocation' END, cluster_id, id, 'open', "
            "jsonb_build_object('gpu_hours_blocked', 0.8, 'kwh', 0.4, 'kg', 0.1, 'cost', '2.50'), last_seen, last_seen "
            "FROM jobs_job WHERE id %% 47 = 0",
            [],
        )
        cursor.execute("ANALYZE waste_flag")


def open_findings_limit() -> None:
    """OPEN_FINDINGS of the findings left open (the first by id, on jobs all over the year), the others acknowledged:
    the audit queue's 10,000 (also where an earlier run's database has them all open)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE waste_flag SET status = 'acknowledged' WHERE status = 'open' AND id NOT IN "
            "(SELECT id FROM waste_flag WHERE status = 'open' ORDER BY id LIMIT %s)",
            [OPEN_FINDINGS],
        )
        if cursor.rowcount:
            cursor.execute("ANALYZE waste_flag")


HEATMAP_MONTH = datetime(2026, 6, 1, tzinfo=UTC)


def fill_gpu_hours() -> None:
    """June's GPU-hours of every GPU (720,000 rows: the fleet page's heatmap reads them), each GPU drawing its own
    mean power, and the clusters' daily sums of June built again with them."""
    from django.db import connection

    from apps.fleet.models import Cluster
    from apps.rollups.services import day_sums_refresh
    from apps.telemetry.models import GpuHour

    if GpuHour.objects.filter(hour__gte=HEATMAP_MONTH).exists():
        return
    started = time.perf_counter()
    cols, exprs = _columns(GpuHour, {
        "gpu": "g.id", "hour": "h", "source": "'agent'",
        "device_energy_j": "(75 + (g.id * 37 + extract(hour FROM h)::int * 11) %% 600) * 3600.0",
        "occupied_s": "((g.id + extract(hour FROM h)::int) %% 3) * 1800.0", "sampled_s": "3600",
    })  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO telemetry_gpuhour ({cols}) SELECT {exprs} FROM fleet_gpu g, "
            "generate_series(%s::timestamptz, %s::timestamptz - INTERVAL '1 hour', INTERVAL '1 hour') h",
            [HEATMAP_MONTH, datetime(2026, 7, 1, tzinfo=UTC)],
        )
        cursor.execute("ANALYZE telemetry_gpuhour")
    day_sums_refresh(cluster_ids=Cluster.objects.values_list("pk", flat=True),
                     days=[HEATMAP_MONTH.date() + timedelta(days=d) for d in range(30)])  # fmt: skip
    sums_vacuum()
    print(f"filled June's GPU-hours in {time.perf_counter() - started:.0f}s")


def fill_extras() -> None:
    """What the other lists show, where an earlier run's database lacks it: 20 job groups holding one job in
    ten, a year of weekly reports per team (and the fleet's), 5,000 audit entries on findings' jobs."""
    from django.contrib.auth.models import User
    from django.db import connection

    from apps.carbon.models import JobGroup
    from apps.fleet.models import Cluster, Team
    from apps.reports.models import WeeklyReport
    from apps.rollups.services import day_sums_refresh
    from apps.waste.models import AuditEntry

    if not JobGroup.objects.exists():
        groups = JobGroup.objects.bulk_create(
            [JobGroup(name=f"model{k:02d}", match_kind=JobGroup.MatchKind.values[0], match_value=f"model{k:02d}")
             for k in range(20)]
        )  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("UPDATE jobs_job SET job_group_id = %s + (id / 10) %% 20 WHERE id %% 10 = 0", [groups[0].pk])
            # Vacuumed again, as a database in use is: the update left no page of the jobs all-visible, so the
            # index-only reads of the pages (a team's job ids) read the table too.
            cursor.execute("VACUUM ANALYZE jobs_job")
        # The jobs' days are summed again, as the derivation does when jobs change group: the groups' own sums.
        year = datetime(2025, 12, 1, tzinfo=UTC).date()
        day_sums_refresh(cluster_ids=Cluster.objects.values_list("pk", flat=True),
                         days=[year + timedelta(days=d) for d in range(366)])  # fmt: skip
        sums_vacuum()
    if not WeeklyReport.objects.exists():
        monday = datetime(2025, 12, 1, tzinfo=UTC).date()
        WeeklyReport.objects.bulk_create(
            [WeeklyReport(team=team, week_start=monday + timedelta(weeks=w), status=WeeklyReport.Status.SENT,
                          subject=f"GPU week of {monday + timedelta(weeks=w)}", html="<p>" + "x" * 2000 + "</p>",
                          text="x" * 1000, data={"energy_kwh": 123.4})
             for team in [*Team.objects.all(), None] for w in range(52)]
        )  # fmt: skip
    if not AuditEntry.objects.exists():
        admin = User.objects.get(username="bench-admin")
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO waste_auditentry (at, actor_id, action, job_id, flag_kind, reason, before, after) "
                "SELECT j.last_seen, %s, 'acknowledge', j.id, 'idle_allocation', 'reviewed', '{}'::jsonb, "
                "'{}'::jsonb FROM jobs_job j WHERE j.id %% 47 = 0 ORDER BY j.id LIMIT 5000",
                [admin.pk],
            )


def user_session(user: Any) -> str:
    """A logged-in session of the user, as the dashboard's browser holds it."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.base import SessionBase
    from django.utils.module_loading import import_string

    store: SessionBase = import_string(f"{settings.SESSION_ENGINE}.SessionStore")()
    store[SESSION_KEY], store[BACKEND_SESSION_KEY] = str(user.pk), "apps.core.backends.PasswordBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return str(store.session_key)


def member_session(team: Any) -> str:
    """A session of a member of the team."""
    from django.contrib.auth.models import User

    from apps.fleet.models import TeamMembership

    user, _ = User.objects.get_or_create(username="bench-member")
    TeamMembership.objects.get_or_create(user=user, team=team)
    return user_session(user)


def admin_user() -> Any:
    from django.contrib.auth.models import User

    user, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    return user


def finance_token() -> str:
    """A named API token of a finance user (a new one each run; only its hash is kept)."""
    from django.contrib.auth.models import Group, User

    from apps.core.access.policy import FINANCE_GROUP
    from apps.core.models import ApiToken

    user, _ = User.objects.get_or_create(username="bench-finance")
    user.groups.add(Group.objects.get_or_create(name=FINANCE_GROUP)[0])
    return ApiToken.issue(user=user, name="bench")[1]


def ab_run(*, url: str, auth: list[str], clients: int, requests_n: int) -> dict[str, str]:
    """ApacheBench's percentiles and failures for `requests_n` requests after a warm-up round (not counted)."""
    for n in (4 * clients, requests_n):
        out = subprocess.run(
            ["ab", "-q", "-n", str(n), "-c", str(clients), *auth, url], capture_output=True, text=True, check=True
        ).stdout
    pct = dict(re.findall(r"^\s+(\d+)%\s+(\d+)", out, re.M))
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    non_2xx = re.search(r"Non-2xx responses:\s+(\d+)", out)
    return {**pct, "failed": failed.group(1) if failed else "?", "non_2xx": non_2xx.group(1) if non_2xx else "0"}


def after_change_run(*, url: str, auth: list[str], clients: int, repeats: int, by: str) -> dict[str, dict[str, str]]:
    """`repeats` times: the data changes, then `clients` ask for the page at once. The change is an ingest's (`by`
    "ingest": its mark, its write's new generation, and, as its task does once its hours are committed, the
    rollups asked for lately prepared again, here in a thread beside the clients: they ask while it runs, on the
    same cores, and once more when it is done) or an admin's edit ("edit": a new generation, nothing prepared,
    every rollup computed on its first ask). The percentiles of those requests' times (ApacheBench's per-request
    record): "during" (the first ask after the change) and, after an ingest, "prepared"."""
    import threading

    from apps.core.kept import data_changed, ingest_started
    from apps.rollups.documents import asked_prepare

    times: dict[str, list[int]] = {"during": [], "prepared": []}
    failed = 0

    def ask(into: str) -> None:
        nonlocal failed
        with tempfile.NamedTemporaryFile(suffix=".tsv") as record:
            out = subprocess.run(
                ["ab", "-q", "-n", str(clients), "-c", str(clients), "-g", record.name, *auth, url],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            rows = Path(record.name).read_text().splitlines()[1:]
        times[into] += [int(row.split("\t")[4]) for row in rows]  # ttime, ms
        failed += int(m.group(1)) if (m := re.search(r"Failed requests:\s+(\d+)", out)) else 0

    for _ in range(repeats):
        if by == "ingest":
            ingest_started()
            data_changed(by_ingest=True)
            prepare = threading.Thread(target=asked_prepare)
            prepare.start()
            ask("during")
            prepare.join()
            ask("prepared")
        else:
            data_changed()
            ask("during")

    def pcts(values: list[int]) -> dict[str, str]:
        values = sorted(values)
        at = {p: str(values[min(len(values) - 1, int(p / 100 * len(values)))]) for p in (50, 95)}
        return {"50": at[50], "95": at[95], "100": str(values[-1]), "failed": str(failed)}

    return {into: pcts(values) for into, values in times.items() if values}


def gunicorn_start(*, port: int, workers: int, threads: int, page_cache: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, **ENV, "WEB_CONCURRENCY": str(workers), "GUNICORN_THREADS": str(threads)}
    if not page_cache:
        env["FLEETWATT_API_PAGE_CACHE_S"] = env["FLEETWATT_PAGE_CACHE_S"] = "0"
    web = subprocess.Popen(
        [str(ROOT / ".venv/bin/gunicorn"), "fleetwatt.wsgi", "-c", str(ROOT / "gunicorn.conf.py"),
         "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    for _ in range(100):
        try:
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.2)
    return web


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=1000, help="per endpoint and caller")
    ap.add_argument("--workers", type=int, default=os.cpu_count(), help="gunicorn processes")
    ap.add_argument("--threads", type=int, default=1, help="threads per gunicorn process")
    ap.add_argument("--token", action="store_true", help="also as a finance tool with an API token")
    ap.add_argument("--reuse", action="store_true", help="keep the database an earlier run filled")
    ap.add_argument("--page-cache", choices=["both", "on", "off"], default="both",
                    help="measure with the page caches, without them, or both side by side")  # fmt: skip
    ap.add_argument("--only", default="",
                    help="only the endpoints whose name contains this ('page': the pages), and the floor")  # fmt: skip
    ap.add_argument("--callers", default="",
                    help="only the callers whose name holds one of these (member,admin,token)")  # fmt: skip
    ap.add_argument("--computed-requests", type=int, default=200,
                    help="per endpoint and caller without the page cache (some take 0.1-0.5 s each)")  # fmt: skip
    ap.add_argument("--after-change", type=int, default=5, metavar="N",
                    help="with the page cache: N times, the data changes and the clients ask at once "
                         "(0: not measured)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds over every endpoint with the page cache; the median round's figures are reported "
                         "(one round without it)")  # fmt: skip
    args = ap.parse_args()
    if shutil.which("ab") is None:
        sys.exit("ApacheBench is missing: apt-get install apache2-utils")
    if not args.reuse:
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", DB], check=True)
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", DB], check=True)
    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.core.management import call_command

    from apps.carbon.models import JobGroup
    from apps.core.kept import PAGES_ASKED_KEY, ROLLUPS_ASKED_KEY, data_changed
    from apps.fleet.models import Cluster, Team
    from apps.jobs.models import Job
    from apps.waste.models import Flag

    call_command("migrate", verbosity=0)
    if not args.reuse:
        fill(args.jobs)
    if not Flag.objects.exists():
        fill_flags()
    open_findings_limit()
    admin = admin_user()
    fill_extras()
    fill_gpu_hours()
    data_changed()  # nothing kept in the cache by an earlier run is taken for this database's figures
    for asked_key in (ROLLUPS_ASKED_KEY, PAGES_ASKED_KEY):  # nor is what it asked for prepared again
        cache.delete(asked_key)
    team = Team.objects.get(name="team3")
    group = JobGroup.objects.order_by("name").first()
    cluster = Cluster.objects.get(name="bench")
    assert group is not None
    # Who asks: a member of the team from the dashboard (a session, as the browser sends it), an admin
    # (the fleet-wide lists), and, with --token, a finance tool with a named API token.
    cookie = settings.SESSION_COOKIE_NAME
    member = ["-C", f"{cookie}={member_session(team)}"]
    callers = {"member, session": member, "admin, session": ["-C", f"{cookie}={user_session(admin)}"]}
    if args.token:
        callers["finance tool, API token"] = ["-H", f"Authorization: Bearer {finance_token()}"]
    if args.callers:
        callers = {who: how for who, how in callers.items() if any(c in who for c in args.callers.split(","))}
    year = "start=2025-12-01&end=2026-12-01"
    month = "start=2026-06-01T00:00:00Z&end=2026-07-01T00:00:00Z"
    team_endpoints = {
        "floor: the API's root (a session, no data)": "/api/",
        "team rollup, a year by month": f"/api/teams/{team.pk}/rollup/?{year}&granularity=month",
        "team rollup, a year by day": f"/api/teams/{team.pk}/rollup/?{year}&granularity=day",
        "team's jobs of a month": f"/api/jobs/?team=team3&{month}&page_size=20",
        "team's open findings": "/api/flags/?team=team3&status=open&page_size=20",
        "teams": "/api/teams/",
        "team's weekly reports": "/api/reports/?page_size=20",
        "teams side by side, a month": "/api/teams/compare/?month=2026-06",
        "energy per day, a month": "/api/teams/daily-energy/?month=2026-06",
        "job group's outcomes, a month": f"/api/job-groups/{group.pk}/outcomes/?month=2026-06",
    }
    fleet_endpoints = {
        "floor: the API's root (a session, no data)": "/api/",
        "clusters": "/api/clusters/",
        "GPUs, the first 100": "/api/gpus/?page_size=100",
        "job groups": "/api/job-groups/",
        "cluster rollup, a month by day": f"/api/clusters/{cluster.pk}/rollup/?month=2026-06&granularity=day",
        "job group rollup, a year by month": f"/api/job-groups/{group.pk}/rollup/?{year}&granularity=month",
        "audit log, the first 20": "/api/audit-log/?page_size=20",
        "all jobs of a month": f"/api/jobs/?{month}&page_size=20",
        "all open findings": "/api/flags/?status=open&page_size=20",
    }
    # The pages, as a browser asks for them (a session): a member's of the team (its home and job list for a month,
    # one of its jobs with a finding), an admin's of the fleet (a week of 1,000 GPUs by the hour) and the queue.
    june = "start=2026-06-01&end=2026-07-01"
    job = Job.objects.filter(team=team, flag_rows__isnull=False, start__gte=HEATMAP_MONTH).order_by("pk").first()
    assert job is not None
    team_pages = {
        "team page, a month (HTML)": f"/teams/{team.pk}/?{june}",
        "team's job list page, a month (HTML)": f"/teams/{team.pk}/jobs/?{june}",
        "job page (HTML)": f"/jobs/{job.pk}/",
    }
    fleet_pages = {
        "fleet page, heatmap of a week (HTML)": "/?start=2026-06-01&end=2026-06-08",
        f"audit queue page, {OPEN_FINDINGS:,} open (HTML)": f"/audit/?{june}",
    }
    asked = {
        "member, session": {**team_endpoints, **team_pages},
        "admin, session": {**fleet_endpoints, **fleet_pages},
        "finance tool, API token": {**team_endpoints, **fleet_endpoints},
    }
    modes = {"both": [True, False], "on": [True], "off": [False]}[args.page_cache]
    port = 8765
    # Each endpoint's rounds, in order. This machine's own noise (other services, a VM's stolen time) moves one
    # run's p95 by up to 2 x: with the page cache every endpoint is loaded in `--rounds` rounds, one endpoint after
    # the other in each, and the round of median p95 is reported with the range of all.
    results: dict[tuple[str, str], dict[bool, list[dict[str, str]]]] = {}
    changed: dict[tuple[str, str, str], dict[str, str]] = {}
    for page_cache in modes:
        web = gunicorn_start(port=port, workers=args.workers, threads=args.threads, page_cache=page_cache)
        try:
            for round_no in range(1, (args.rounds if page_cache else 1) + 1):
                for caller, auth in callers.items():
                    for name, path in asked[caller].items():
                        if args.only not in name and not name.startswith("floor"):
                            continue
                        # ApacheBench is the load: a Python client would take the cores the server needs.
                        r = ab_run(
                            url=f"http://127.0.0.1:{port}{path}", auth=auth, clients=args.clients,
                            requests_n=args.requests if page_cache else args.computed_requests,
                        )  # fmt: skip
                        results.setdefault((caller, name), {}).setdefault(page_cache, []).append(r)
                        print(f"  {'cached' if page_cache else 'computed':8s} round {round_no} {caller:16s} "
                              f"{name:42s} p95 {r['95']:>5} ms", file=sys.stderr, flush=True)  # fmt: skip
            # The first ask after a change, the clients at once (dashboards reload after an ingest).
            for by in ("ingest", "edit"):
                for caller, auth in callers.items() if page_cache and args.after_change else []:
                    for name, path in asked[caller].items():
                        if args.only not in name and not name.startswith("floor"):
                            continue
                        runs = after_change_run(
                            url=f"http://127.0.0.1:{port}{path}", auth=auth, clients=args.clients,
                            repeats=args.after_change, by=by,
                        )  # fmt: skip
                        for when, r in runs.items():
                            changed[(f"{by}, {when}", caller, name)] = r
                            print(f"  after an {by:6s} {when:8s} {caller:16s} {name:42s} p95 {r['95']:>5} ms",
                                  file=sys.stderr, flush=True)  # fmt: skip
        finally:
            web.terminate()
            web.wait(timeout=20)
    print(f"gunicorn {args.workers} x {args.threads}, {args.clients} clients, {args.requests} requests each in "
          f"{args.rounds} rounds ({args.computed_requests} in one round without the page cache)")  # fmt: skip
    print("p50 / p95 / p99 ms of the median round [p95 of every round]: with the page cache | without it")
    for (caller, name), by_mode in results.items():
        cells = []
        for page_cache in (True, False):
            rounds = by_mode.get(page_cache)
            cells.append(_cell(rounds) if rounds else f"{'-':>18}")
        print(f"{caller:16s} {name:42s} {cells[0]} | {cells[1]}")
    if changed:
        whens = ("ingest, during", "ingest, prepared", "edit, during")
        print(f"\nafter a change, {args.clients} clients at once, {args.after_change} times (with the page cache): "
              "p50 / p95 / max ms: after an ingest, while its task prepares the rollups asked for (on the same cores) "
              "| after an ingest, once they are prepared | after an admin's edit (nothing prepared)")  # fmt: skip
        for caller, name in dict.fromkeys((caller, name) for _, caller, name in changed):
            cells = [_changed_cell(changed[(w, caller, name)]) if (w, caller, name) in changed else "-" for w in whens]
            print(f"{caller:16s} {name:42s} {' | '.join(cells)}")


def _changed_cell(r: dict[str, str]) -> str:
    failed = f" failed {r['failed']}" if r["failed"] != "0" else ""
    return f"{r['50']:>5} / {r['95']:>5} / {r['100']:>5}{failed}"


def _cell(rounds: list[dict[str, str]]) -> str:
    """The round of median p95 as p50 / p95 / p99, the p95 of each round beside it, and any failures."""
    r = sorted(rounds, key=lambda x: int(x["95"]))[(len(rounds) - 1) // 2]
    cell = f"{r['50']:>4} / {r['95']:>4} / {r['99']:>4}"
    if len(rounds) > 1:
        cell += f" [{', '.join(x['95'] for x in rounds)}]"
    failed = sum(int(x["failed"]) for x in rounds if x["failed"].isdigit())
    non_2xx = sum(int(x["non_2xx"]) for x in rounds)
    return cell + (f" failed {failed}" if failed else "") + (f" non-2xx {non_2xx}" if non_2xx else "")


if __name__ == "__main__":
    main()
