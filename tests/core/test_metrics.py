"""/metrics: fleetwatt's own metrics (apps.core.metrics, its selectors and services, apps.ops.metrics_views):
the exposition parses and names every agreed series; who may read it; the ingest's lag, duration and rows
from a real ingest; Celery's outcomes through its signals; report sends; the rollups' cache."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from celery.signals import task_retry
from django.core.mail.backends.base import BaseEmailBackend
from django.core.management import call_command
from django.db.models import Model
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from apps.core import metrics as m
from apps.core import services as core_services
from apps.core.kept import data_changed
from apps.core.selectors import metric_counts_read
from apps.core.services import metric_count
from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.reports.models import ReportRecipient
from apps.reports.services import report_send
from apps.rollups.selectors import team_rollup_cached
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from fleetwatt.celery import app
from tests.factories import ClusterFactory, TeamFactory
from tests.scenarios import spine_scenario

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-metrics-token"
AGREED = [
    "fleetwatt_ingest_lag_seconds",
    "fleetwatt_ingest_last_duration_seconds",
    "fleetwatt_ingest_last_rows",
    "fleetwatt_celery_tasks_total",
    "fleetwatt_reports_sent_total",
    "fleetwatt_rollup_cache_requests_total",
    "fleetwatt_api_page_cache_requests_total",
    "fleetwatt_metrics_source_up",
]
DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def _metrics_settings(settings) -> None:
    settings.FLEETWATT_METRICS_TOKEN = TOKEN
    settings.FLEETWATT_METRICS_ALLOW = []
    settings.FLEETWATT_TRUSTED_PROXIES = 0


@app.task(bind=True, name="tests.core.metrics_probe_task", max_retries=1)
def metrics_probe_task(self: Any, mode: str) -> str:
    if mode == "fail":
        raise RuntimeError("the probe fails as asked")
    if mode == "retry" and self.request.retries == 0:
        raise self.retry(countdown=0)
    return "ok"


def _scrape(client, **headers: Any) -> dict[str, float]:
    """Every sample of a scrape with the token, keyed `name{label="value",...}`."""
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **headers)
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}"] = s.value
    return samples


def _names(client) -> set[str]:
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    text = answer.content.decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples} | {
        line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")
    }


# --- the exposition ---


def test_the_exposition_parses_and_names_every_agreed_series(client) -> None:
    # given one event of each counted kind
    metric_count(metric=m.CELERY_TASKS, labels=["apps.telemetry.tasks.ingest_hour_task", "success"])
    # when Prometheus scrapes
    names = _names(client)
    # then the app's series and django-prometheus's are there
    for name in AGREED:
        assert name in names or name.removesuffix("_total") in names, name
    assert any(n.startswith("django_http_requests_total") for n in names)
    assert any(n.startswith("django_http_responses_total_by_status") for n in names)
    assert any(n.startswith("django_db_execute_total") for n in names)


def test_the_fixed_outcomes_are_served_at_zero_before_their_first_event(client) -> None:
    samples = _scrape(client)
    assert samples['fleetwatt_reports_sent_total{outcome="sent"}'] == 0
    assert samples['fleetwatt_reports_sent_total{outcome="failed"}'] == 0
    assert samples['fleetwatt_rollup_cache_requests_total{result="hit"}'] == 0
    assert samples['fleetwatt_metrics_source_up{source="redis"}'] == 1
    assert samples['fleetwatt_metrics_source_up{source="database"}'] == 1


# --- who may read it ---


def test_the_right_token_reads(client) -> None:
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_a_wrong_token_is_a_401_even_from_an_allowed_address(client, settings) -> None:
    settings.FLEETWATT_METRICS_ALLOW = ["127.0.0.0/8"]
    answer = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")
    assert b"fleetwatt_" not in answer.content


@pytest.mark.parametrize("authorization", [None, "Basic dXNlcjpwYXNz", "Bearer "])
def test_no_token_from_an_address_not_allowed_is_a_403(client, authorization) -> None:
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    answer = client.get("/metrics", **headers)
    assert answer.status_code == 403
    assert b"fleetwatt_" not in answer.content


def test_an_allowed_address_reads_without_a_token(client, settings) -> None:
    settings.FLEETWATT_METRICS_TOKEN = ""
    settings.FLEETWATT_METRICS_ALLOW = ["10.0.0.0/8", "192.168.5.0/24"]
    assert client.get("/metrics", REMOTE_ADDR="192.168.5.20").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.6.20").status_code == 403


def test_behind_a_proxy_the_address_is_the_one_the_proxy_saw(client, settings) -> None:
    # given one trusted proxy (at 172.16.0.2) and Prometheus's network allowed
    settings.FLEETWATT_METRICS_TOKEN = ""
    settings.FLEETWATT_METRICS_ALLOW = ["10.1.0.0/16"]
    settings.FLEETWATT_TRUSTED_PROXIES = 1
    # then the proxy's word counts, and what a client wrote before it does not
    ok = client.get("/metrics", REMOTE_ADDR="172.16.0.2", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert ok.status_code == 200
    forged = client.get("/metrics", REMOTE_ADDR="172.16.0.2", HTTP_X_FORWARDED_FOR="10.1.2.3, 203.0.113.9")
    assert forged.status_code == 403


def test_with_neither_setting_metrics_are_off_and_say_how_to_turn_them_on(client, settings) -> None:
    settings.FLEETWATT_METRICS_TOKEN = ""
    settings.FLEETWATT_METRICS_ALLOW = []
    answer = client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything")
    assert answer.status_code == 403
    assert b"FLEETWATT_METRICS_TOKEN" in answer.content and b"FLEETWATT_METRICS_ALLOW" in answer.content


def test_access_rules_pure() -> None:
    allow = ["10.0.0.0/8"]
    assert m.metrics_access(authorization="Bearer t", address="1.2.3.4", token="t", allow=[]) is m.Access.ALLOWED
    assert m.metrics_access(authorization="bearer t", address="1.2.3.4", token="t", allow=[]) is m.Access.ALLOWED
    assert (
        m.metrics_access(authorization="Bearer x", address="10.0.0.1", token="t", allow=allow) is m.Access.WRONG_TOKEN
    )
    assert m.metrics_access(authorization="Bearer x", address="10.0.0.1", token="", allow=allow) is m.Access.ALLOWED
    assert m.metrics_access(authorization="", address="11.0.0.1", token="t", allow=allow) is m.Access.REFUSED
    assert m.metrics_access(authorization="", address="", token="", allow=[]) is m.Access.OFF
    assert m.address_allowed("::ffff:10.2.3.4", allow)  # IPv4 seen through an IPv6 socket
    assert not m.address_allowed("not an address", allow)
    assert m.address_allowed("fd00::1", ["fd00::/8"])
    with pytest.raises(ValueError, match=r"10\.0\.0\.1/8"):
        m.networks_parse(["10.0.0.1/8"])


# --- the ingest ---


def _rows_in(model: type[Model], **filters: Any) -> int:
    return model.objects.filter(**filters).count()  # type: ignore[attr-defined]


@pytest.mark.prometheus
def test_ingest_lag_duration_and_rows_come_from_a_real_ingest(client, history_loader, cluster_for) -> None:
    # given three hours ingested from a real Prometheus (its watermark: 03:00)
    cluster = cluster_for(history_loader(spine_scenario()))
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T03:00:00Z", verbosity=0)
    last = IngestedHour.objects.filter(cluster=cluster).order_by("-ingested_at").first()
    assert last is not None and last.hour == datetime(2026, 11, 2, 2, tzinfo=UTC)
    # when Prometheus scrapes
    before = timezone.now()
    samples = _scrape(client)
    after = timezone.now()
    # then the lag is now minus the watermark
    through = datetime(2026, 11, 2, 3, tzinfo=UTC)
    lag = samples['fleetwatt_ingest_lag_seconds{cluster="default"}']
    assert (before - through).total_seconds() - 1 <= lag <= (after - through).total_seconds() + 1
    # and the last run's duration and rows are the last hour's, per table, as in the database
    assert samples['fleetwatt_ingest_last_duration_seconds{cluster="default"}'] == pytest.approx(last.duration_s)
    hour = last.hour
    expected = {
        JobGpuHour._meta.db_table: _rows_in(JobGpuHour, hour=hour),
        JobGpuHourEnergy._meta.db_table: _rows_in(JobGpuHourEnergy, hour=hour),
        GpuHour._meta.db_table: _rows_in(GpuHour, hour=hour),
    }
    for table, count in expected.items():
        assert count > 0
        assert samples[f'fleetwatt_ingest_last_rows{{cluster="default",table="{table}"}}'] == count, table
    jobs = samples[f'fleetwatt_ingest_last_rows{{cluster="default",table="{Job._meta.db_table}"}}']
    assert 0 < jobs <= Job.objects.filter(cluster=cluster).count()


def test_a_cluster_never_ingested_has_no_lag_series(client) -> None:
    ClusterFactory(name="new")
    samples = _scrape(client)
    assert not [k for k in samples if k.startswith("fleetwatt_ingest_lag_seconds")]


def test_lag_arithmetic() -> None:
    through = datetime(2026, 11, 2, 3, tzinfo=UTC)
    assert m.ingest_lag_s(ingested_through=through, now=through + timedelta(hours=2, seconds=5)) == 7205
    assert m.ingest_lag_s(ingested_through=through, now=through - timedelta(minutes=5)) == 0


# --- Celery, reports, rollups ---


def test_celery_outcomes_are_counted_through_its_signals(client) -> None:
    # when a task succeeds, one fails, and one is retried then succeeds (Celery's tracer sends the signals)
    assert metrics_probe_task.apply(args=["ok"]).get() == "ok"
    assert metrics_probe_task.apply(args=["fail"]).failed()
    assert metrics_probe_task.apply(args=["retry"]).get() == "ok"
    # then each outcome is counted under the task's name
    samples = _scrape(client)
    name = metrics_probe_task.name
    assert samples[f'fleetwatt_celery_tasks_total{{outcome="success",task="{name}"}}'] == 2
    assert samples[f'fleetwatt_celery_tasks_total{{outcome="failure",task="{name}"}}'] == 1
    assert samples[f'fleetwatt_celery_tasks_total{{outcome="retry",task="{name}"}}'] == 1


def test_a_retry_signal_from_a_worker_is_counted() -> None:
    task_retry.send(sender=metrics_probe_task, request=None, reason="broker away", einfo=None)
    counts = metric_counts_read()
    assert counts is not None
    assert counts[m.CELERY_TASKS][(metrics_probe_task.name, "retry")] == 1


class _RelayDown(BaseEmailBackend):
    def open(self) -> bool:
        raise OSError("connection refused")


MONDAY = date(2026, 11, 2)


def test_report_sends_are_counted_by_outcome(client, settings) -> None:
    # given a team with a recipient, and a relay that is down then up
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    team = TeamFactory()
    ReportRecipient.objects.create(team=team, email="ada@example.org")
    # when the first send finds the relay down and the second goes out
    assert report_send(team=team, week_start=MONDAY, connection=_RelayDown()).outcome == "failed"
    assert report_send(team=team, week_start=MONDAY).outcome == "sent"
    # then one of each is counted, and a run that finds it sent counts nothing
    assert report_send(team=team, week_start=MONDAY).outcome == "already_sent"
    samples = _scrape(client)
    assert samples['fleetwatt_reports_sent_total{outcome="failed"}'] == 1
    assert samples['fleetwatt_reports_sent_total{outcome="sent"}'] == 1


def test_rollup_cache_miss_then_hit_then_miss_after_a_change(client) -> None:
    team = TeamFactory()
    period = {"start": datetime(2026, 11, 2, tzinfo=UTC), "end": datetime(2026, 11, 3, tzinfo=UTC)}
    team_rollup_cached(team=team, granularity="day", **period)
    team_rollup_cached(team=team, granularity="day", **period)
    samples = _scrape(client)
    assert samples['fleetwatt_rollup_cache_requests_total{result="miss"}'] == 1
    assert samples['fleetwatt_rollup_cache_requests_total{result="hit"}'] == 1
    # when the data changes, the next lookup misses
    data_changed()
    team_rollup_cached(team=team, granularity="day", **period)
    assert _scrape(client)['fleetwatt_rollup_cache_requests_total{result="miss"}'] == 2


def test_a_bad_counter_call_is_refused_loudly() -> None:
    with pytest.raises(ValueError, match="outcome"):
        metric_count(metric=m.REPORTS_SENT, labels=["lost"])
    with pytest.raises(ValueError, match="labels"):
        metric_count(metric=m.CELERY_TASKS, labels=["only-one"])


# --- Redis down ---


def test_redis_down_serves_the_rest_and_says_so(client, settings) -> None:
    # given a cluster with a watermark, one counted event, then Redis gone
    cluster = ClusterFactory(name="east")
    IngestWatermark.objects.create(cluster=cluster, ingested_through=datetime(2026, 11, 2, 3, tzinfo=UTC))
    metric_count(metric=m.REPORTS_SENT, labels=["sent"])
    settings.REDIS_URL = DEAD_REDIS
    # when Prometheus scrapes, and an event happens meanwhile
    metric_count(metric=m.REPORTS_SENT, labels=["sent"])  # not counted, never raised
    samples = _scrape(client)
    # then the database's series are there, the counters are left out (not zeros), and the gauge says why
    assert samples['fleetwatt_metrics_source_up{source="redis"}'] == 0
    assert samples['fleetwatt_metrics_source_up{source="database"}'] == 1
    assert 'fleetwatt_ingest_lag_seconds{cluster="east"}' in samples
    assert not [k for k in samples if k.startswith("fleetwatt_reports_sent_total")]
    assert DEAD_REDIS in core_services._down_until  # the next events skip Redis for a while
