"""Reaching a cluster's endpoint with its connection settings: a bearer token and basic auth checked by
vmauth in front of VictoriaMetrics, extra headers (a Mimir tenant's X-Scope-OrgID), a CA bundle for a
TLS endpoint. Secrets come from the environment; a wrong or missing one is a clear error naming the
cluster, with nothing written and the watermark where it was."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.fleet.models import Cluster
from apps.jobs.models import Job, JobGpuHour
from apps.pipeline.ingest import closed_hours_ingest
from apps.simulator.local_victoria import LocalVmauth, local_tls_certificate, vmauth_config_write
from apps.telemetry.health import cluster_checks
from apps.telemetry.models import GpuHour, IngestedHour, IngestWatermark
from apps.telemetry.prometheus import reader_for
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

TOKEN, PASSWORD = "s3cret-token-for-the-tests", "s3cret-password"
HOUR_START, HOUR_END = "2026-11-02T02:00:00Z", "2026-11-02T03:00:00Z"


def _ingest_hour() -> None:
    call_command("ingest", start=HOUR_START, end=HOUR_END, cluster="secured", verbosity=0)


def _nothing_written() -> bool:
    return not (
        Job.objects.exists()
        or JobGpuHour.objects.exists()
        or GpuHour.objects.exists()
        or IngestedHour.objects.exists()
        or IngestWatermark.objects.exists()
    )


@pytest.fixture(scope="module")
def vmauth_servers(
    victoria_history_loader: Callable[[dict[str, Any]], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, LocalVmauth]]:
    """vmauth in front of the spine's VictoriaMetrics: one wants a bearer token, one a user and password,
    one a bearer token over TLS (a self-signed certificate for 127.0.0.1)."""
    upstream = victoria_history_loader(spine_scenario()).url
    folder = tmp_path_factory.mktemp("vmauth")
    cert, key = local_tls_certificate(folder / "tls")
    vmauth_config_write(folder / "bearer.yml", upstream=upstream, bearer_token=TOKEN)
    vmauth_config_write(folder / "basic.yml", upstream=upstream, username="ada", password=PASSWORD)
    servers = {
        "bearer": LocalVmauth(folder / "bearer.yml", upstream),
        "basic": LocalVmauth(folder / "basic.yml", upstream),
        "tls": LocalVmauth(folder / "bearer.yml", upstream, tls_cert=cert, tls_key=key),
    }
    try:
        for name, server in servers.items():
            server.start(log=folder / f"vmauth-{name}.log")
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _cluster(url: str, **connection: Any) -> Cluster:
    cluster = Cluster(name="secured", prometheus_url=url, scrape_interval_s=15, **connection)
    cluster.full_clean()  # what the admin checks: no secret in clear
    cluster.save()
    return cluster


# --- a bearer token ---------------------------------------------------------------------------------------


def test_the_token_from_the_environment_is_let_through(vmauth_servers, monkeypatch) -> None:
    # given a cluster behind vmauth, its token in the worker's environment
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", TOKEN)
    cluster = _cluster(vmauth_servers["bearer"].url, prometheus_bearer_token_env="FW_TEST_PROM_TOKEN")
    # when its hour is ingested
    _ingest_hour()
    # then it is there
    assert JobGpuHour.objects.filter(gpu__node__cluster=cluster).count() > 5
    assert IngestWatermark.objects.get(cluster=cluster).ingested_through == datetime(2026, 11, 2, 3, tzinfo=UTC)


def test_a_wrong_token_is_refused_naming_the_cluster_and_nothing_is_written(vmauth_servers, monkeypatch) -> None:
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", "not-the-token")
    _cluster(vmauth_servers["bearer"].url, prometheus_bearer_token_env="FW_TEST_PROM_TOKEN")
    with pytest.raises(CommandError, match=r"^cluster secured: Prometheus at \S+ refused the credentials") as raised:
        _ingest_hour()
    assert "not-the-token" not in str(raised.value)  # vmauth echoes the header it refused
    assert _nothing_written()


def test_a_token_variable_named_but_unset_is_an_error_before_anything_is_asked(vmauth_servers, monkeypatch) -> None:
    monkeypatch.delenv("FW_TEST_PROM_TOKEN", raising=False)
    _cluster(vmauth_servers["bearer"].url, prometheus_bearer_token_env="FW_TEST_PROM_TOKEN")
    with pytest.raises(
        CommandError,
        match=r"^cluster secured: environment variable FW_TEST_PROM_TOKEN \(prometheus_bearer_token_env\) is not set",
    ):
        _ingest_hour()
    assert _nothing_written()


def test_beat_logs_a_refused_cluster_and_writes_nothing(vmauth_servers, monkeypatch, caplog) -> None:
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", "not-the-token")
    _cluster(vmauth_servers["bearer"].url, prometheus_bearer_token_env="FW_TEST_PROM_TOKEN")
    reports = closed_hours_ingest(now=datetime(2026, 11, 2, 3, 10, tzinfo=UTC))
    assert [r.cluster for r in reports] == []  # the default cluster's endpoint is down too
    assert "cluster secured: Prometheus at" in caplog.text and "refused the credentials" in caplog.text
    assert _nothing_written()


# --- basic auth -------------------------------------------------------------------------------------------


def test_basic_auth_with_the_password_from_the_environment(vmauth_servers, monkeypatch) -> None:
    monkeypatch.setenv("FW_TEST_PROM_PASSWORD", PASSWORD)
    _cluster(
        vmauth_servers["basic"].url,
        prometheus_basic_auth_user="ada",
        prometheus_basic_auth_password_env="FW_TEST_PROM_PASSWORD",
    )
    _ingest_hour()
    assert JobGpuHour.objects.count() > 5


def test_a_wrong_password_is_refused_naming_the_cluster(vmauth_servers, monkeypatch) -> None:
    monkeypatch.setenv("FW_TEST_PROM_PASSWORD", "wrong-password")
    _cluster(
        vmauth_servers["basic"].url,
        prometheus_basic_auth_user="ada",
        prometheus_basic_auth_password_env="FW_TEST_PROM_PASSWORD",
    )
    with pytest.raises(CommandError, match=r"^cluster secured: .* refused the credentials") as raised:
        _ingest_hour()
    assert "wrong-password" not in str(raised.value) and "YWRh" not in str(raised.value)  # nor base64 "ada:..."
    assert _nothing_written()


# --- a CA bundle --------------------------------------------------------------------------------------------


def test_a_tls_endpoint_is_trusted_through_its_ca_bundle(vmauth_servers, monkeypatch) -> None:
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", TOKEN)
    _cluster(
        vmauth_servers["tls"].url,
        prometheus_bearer_token_env="FW_TEST_PROM_TOKEN",
        prometheus_ca_file=str(vmauth_servers["tls"].tls_cert),
    )
    _ingest_hour()
    assert JobGpuHour.objects.count() > 5


def test_a_certificate_the_ca_bundle_does_not_vouch_for_is_refused(vmauth_servers, monkeypatch, tmp_path) -> None:
    # given a CA bundle of another (self-signed) authority
    other_ca, _ = local_tls_certificate(tmp_path / "other")
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", TOKEN)
    _cluster(
        vmauth_servers["tls"].url,
        prometheus_bearer_token_env="FW_TEST_PROM_TOKEN",
        prometheus_ca_file=str(other_ca),
    )
    with pytest.raises(CommandError, match=r"^cluster secured: Prometheus at https://\S+: its TLS certificate is not"):
        _ingest_hour()
    assert _nothing_written()


def test_a_ca_bundle_that_is_not_there_is_an_error_naming_the_cluster(vmauth_servers, tmp_path) -> None:
    _cluster(vmauth_servers["tls"].url, prometheus_ca_file=str(tmp_path / "nowhere.pem"))
    with pytest.raises(CommandError, match=r"^cluster secured: prometheus_ca_file \S+nowhere\.pem is not a file"):
        _ingest_hour()
    assert _nothing_written()


# --- extra headers ------------------------------------------------------------------------------------------


class _EmptyPrometheus(BaseHTTPRequestHandler):
    """Answers every query with no series, and keeps the headers and the path of each request."""

    seen: list[dict[str, str]] = []
    paths: list[str] = []
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    content_type = "application/json"

    def _answer(self) -> None:
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        type(self).paths.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def header_recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    _EmptyPrometheus.seen, _EmptyPrometheus.paths = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmptyPrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _EmptyPrometheus.seen
    finally:
        server.shutdown()
        server.server_close()


def test_extra_headers_go_with_every_request(header_recorder, monkeypatch) -> None:
    # given a Mimir tenant, and a header whose value is a secret from the environment
    url, seen = header_recorder
    monkeypatch.setenv("FW_TEST_API_KEY", "key-from-the-environment")
    _cluster(url, prometheus_headers={"X-Scope-OrgID": "tenant-a", "X-Api-Key": "${FW_TEST_API_KEY}"})
    # when an hour is ingested
    _ingest_hour()
    # then every request carried both, queries and runtime info alike
    assert len(seen) >= 10
    assert {(r.get("x-scope-orgid"), r.get("x-api-key")) for r in seen} == {("tenant-a", "key-from-the-environment")}
    assert not any("authorization" in r for r in seen)


def test_a_header_variable_named_but_unset_is_an_error_naming_the_cluster(header_recorder, monkeypatch) -> None:
    url, seen = header_recorder
    monkeypatch.delenv("FW_TEST_API_KEY", raising=False)
    _cluster(url, prometheus_headers={"X-Api-Key": "${FW_TEST_API_KEY}"})
    with pytest.raises(
        CommandError, match=r"^cluster secured: environment variable FW_TEST_API_KEY \(header X-Api-Key\)"
    ):
        _ingest_hour()
    assert seen == [] and _nothing_written()


def test_the_cluster_timeout_is_used_else_the_setting(header_recorder, settings) -> None:
    url, _ = header_recorder
    settings.FLEETWATT_PROMETHEUS_TIMEOUT_S = 42.0
    cluster = _cluster(url, prometheus_timeout_s=2.5)
    assert reader_for(cluster).timeout_s == 2.5
    cluster.prometheus_timeout_s = None
    assert reader_for(cluster).timeout_s == 42.0


# --- /healthz ------------------------------------------------------------------------------------------------


def test_healthz_asks_with_the_cluster_credentials(vmauth_servers, monkeypatch) -> None:
    _cluster(vmauth_servers["bearer"].url, prometheus_bearer_token_env="FW_TEST_PROM_TOKEN")
    now = datetime(2026, 11, 2, 3, 10, tzinfo=UTC)
    monkeypatch.setenv("FW_TEST_PROM_TOKEN", TOKEN)
    assert cluster_checks(now=now, max_lag_h=3, timeout_s=5)["prometheus:secured"] == {"ok": True}
    monkeypatch.delenv("FW_TEST_PROM_TOKEN")
    unset = cluster_checks(now=now, max_lag_h=3, timeout_s=5)["prometheus:secured"]
    assert unset == {
        "ok": False,
        "error": "environment variable FW_TEST_PROM_TOKEN (prometheus_bearer_token_env) is not set",
    }


# --- an answer that is not Prometheus's ------------------------------------------------------------------------


class _LoginPage(_EmptyPrometheus):
    """A URL that is not a query API's root (a dashboard's login page, say): 200 and HTML to every request."""

    seen: list[dict[str, str]] = []
    paths: list[str] = []
    body = b"<html><body>Sign in</body></html>"
    content_type = "text/html"


def test_an_answer_that_is_not_prometheus_json_is_an_error_naming_the_cluster() -> None:
    _LoginPage.seen, _LoginPage.paths = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LoginPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _cluster(f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(CommandError, match=r"^cluster secured: .* other than Prometheus's JSON .*query API's root"):
            _ingest_hour()
    finally:
        server.shutdown()
        server.server_close()
    assert _nothing_written()
    # the queries went in the requests' bodies, not their URLs (no length limit on a long node matcher)
    assert _LoginPage.paths and all("query=" not in path for path in _LoginPage.paths)
