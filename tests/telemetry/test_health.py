"""apps.telemetry.health: each cluster's checks for /healthz. Its Prometheus answers an instant query (asked with the
cluster's credentials; an error says what kind, never the URL); its ingest is at most FLEETWATT_INGEST_MAX_LAG_H whole
hours behind the last closed hour (a cluster never ingested has no lag yet, one ingested ahead none); the endpoints
are asked at once, so that one slow cluster costs one timeout; GPUs seen without an energy meter are a detail, not a
failure. Through /healthz: tests/ops/test_healthz.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from apps.fleet.endpoint import EndpointConnection
from apps.telemetry.health import cluster_checks, ingest_lag_check, prometheus_check
from apps.telemetry.models import IngestedHour, IngestWatermark
from tests.factories import ClusterFactory
from tests.json_server import JsonServer, json_server

NOW = datetime(2026, 11, 2, 12, 30, tzinfo=UTC)  # the last closed hour: 11:00-12:00
H = timedelta(hours=1)


@pytest.fixture
def server() -> Iterator[JsonServer]:
    with json_server() as found:
        found.answer = (200, {"status": "success", "data": {"result": []}})
        yield found


def _connection(url: str, **fields: object) -> EndpointConnection:
    return EndpointConnection(url=url, cluster="east", timeout_s=5.0, **fields)  # type: ignore[arg-type]


def test_an_endpoint_that_answers_a_query_is_up_and_is_asked_with_the_clusters_headers(server: JsonServer) -> None:
    connection = _connection(server.url + "/", headers={"X-Scope-OrgID": "a"}, basic_auth=("fw", "pw"))
    assert prometheus_check(connection, timeout_s=2) == {"ok": True}
    (asked,) = server.asked
    assert asked["path"] == "/api/v1/query?query=1" and asked["headers"]["X-Scope-OrgID"] == "a"
    assert asked["headers"]["Authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ((500, {"status": "error"}), "HTTP 500"),
        ((401, {}), "HTTP 401"),
        ((200, b"<html>a login page</html>"), "not a Prometheus query API answer"),
        ((200, {"status": "error", "error": "bad"}), "not a Prometheus query API answer"),
    ],
)
def test_an_endpoint_that_does_not_answer_as_prometheus_is_down_saying_how(server: JsonServer, answer, error) -> None:
    server.answer = answer
    check = prometheus_check(_connection(server.url), timeout_s=2)
    assert check == {"ok": False, "error": error}
    assert server.url not in str(check)


def test_an_unreachable_endpoint_is_down_by_the_kind_of_error_alone() -> None:
    assert prometheus_check(_connection("http://user:pw@127.0.0.1:9"), timeout_s=1) == {
        "ok": False, "error": "ConnectionError",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("through", "lag_h", "ok"),
    [
        (NOW.replace(minute=0), 0, True),  # through 12:00: the last closed hour is in
        (NOW.replace(minute=0) - 3 * H, 3, True),
        (NOW.replace(minute=0) - 4 * H, 4, False),
        (NOW.replace(minute=0) + 5 * H, 0, True),  # hours ingested while open do not count as ahead
    ],
)
def test_the_ingest_lag_is_whole_closed_hours_not_ingested(through: datetime, lag_h: int, ok: bool) -> None:
    assert ingest_lag_check(ingested_through=through, now=NOW, max_lag_h=3) == {
        "ok": ok,
        "lag_h": lag_h,
        "max_lag_h": 3,
    }


def test_a_cluster_never_ingested_has_no_lag_yet() -> None:
    assert ingest_lag_check(ingested_through=None, now=NOW, max_lag_h=3) == {"ok": True, "lag_h": None, "max_lag_h": 3}


def test_the_lag_waits_for_the_last_scrapes_of_an_hour_to_land(settings) -> None:
    # given an ingest through 11:00, and the hour 11:00-12:00 that ends at noon; settling: a minute
    settings.FLEETWATT_SCRAPE_INTERVAL_S = 15
    through, noon = datetime(2026, 11, 2, 11, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC)
    # then the hour is not behind until its last scrapes have landed
    assert ingest_lag_check(ingested_through=through, now=noon + timedelta(seconds=59), max_lag_h=0)["lag_h"] == 0
    assert ingest_lag_check(ingested_through=through, now=noon + timedelta(seconds=61), max_lag_h=0) == {
        "ok": False, "lag_h": 1, "max_lag_h": 0,
    }  # fmt: skip
    settings.FLEETWATT_SCRAPE_INTERVAL_S = 60  # settling: two scrapes
    assert ingest_lag_check(ingested_through=through, now=noon + timedelta(seconds=119), max_lag_h=0)["lag_h"] == 0


@pytest.mark.django_db
def test_every_cluster_is_checked_by_name_and_meterless_gpus_are_a_detail(server: JsonServer) -> None:
    # given a cluster whose Prometheus answers and is up to date, and one that is unreachable and behind
    up = ClusterFactory(name="a-up", prometheus_url=server.url)
    down = ClusterFactory(name="b-down", prometheus_url="http://127.0.0.1:9")
    IngestWatermark.objects.create(cluster=up, ingested_through=NOW.replace(minute=0))
    IngestWatermark.objects.create(cluster=down, ingested_through=NOW.replace(minute=0) - 6 * H)
    # and the up one's latest hour saw a GPU without an energy meter (an earlier hour saw another)
    IngestedHour.objects.create(cluster=up, hour=NOW - 3 * H, stats={"no_energy_meter": [{"uuid": "GPU-old"}]})
    IngestedHour.objects.create(cluster=up, hour=NOW - 2 * H, stats={"no_energy_meter": [{"uuid": "GPU-vm"}]})
    # when
    checks = cluster_checks(now=NOW, max_lag_h=3, timeout_s=2)
    # then
    assert checks == {
        "prometheus:a-up": {"ok": True},
        "prometheus:b-down": {"ok": False, "error": "ConnectionError"},
        "ingest:a-up": {"ok": True, "lag_h": 0, "max_lag_h": 3, "no_energy_meter": ["GPU-vm"]},
        "ingest:b-down": {"ok": False, "lag_h": 6, "max_lag_h": 3},
    }


@pytest.mark.django_db
def test_the_endpoints_are_asked_at_once() -> None:
    # given three clusters whose endpoints each take a second to answer
    with json_server() as slow:
        slow.answer = (200, {"status": "success", "data": {"result": []}})
        handler = slow.httpd.RequestHandlerClass
        reply = handler._reply  # type: ignore[attr-defined]

        def late(self) -> None:  # type: ignore[no-untyped-def]
            time.sleep(1.0)
            reply(self)

        handler.do_GET = late  # type: ignore[attr-defined]
        for name in ("x", "y", "z"):
            ClusterFactory(name=name, prometheus_url=slow.url)
        # when
        started = time.monotonic()
        checks = cluster_checks(now=NOW, max_lag_h=3, timeout_s=5)
        # then all answered in about one's time
        assert time.monotonic() - started < 2.5
        assert [checks[f"prometheus:{n}"] for n in ("x", "y", "z")] == [{"ok": True}] * 3
