"""/healthz: each dependency (Postgres, Redis, each cluster's Prometheus and ingest lag) with a 503 when
one is down; unauthenticated, cheap, and naming no URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from apps.fleet.models import Cluster
from apps.telemetry.models import IngestWatermark
from apps.telemetry.services import HOUR, last_closed_hour
from tests.scenarios import spine_scenario
from tests.servers import WebServer, child_env, web_server_start, web_server_stop

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture(autouse=True)
def _fresh_answers(settings) -> None:
    settings.FLEETWATT_HEALTHZ_CACHE_S = 0
    settings.FLEETWATT_INGEST_MAX_LAG_H = 3


def _ingested_until(cluster: Cluster, *, hours_behind: int) -> None:
    through = last_closed_hour() + HOUR - hours_behind * HOUR
    IngestWatermark.objects.update_or_create(cluster=cluster, defaults={"ingested_through": through})


@pytest.mark.prometheus
def test_everything_up_is_a_200_with_each_check(client, history_loader, cluster_for) -> None:
    # given a cluster whose Prometheus answers and whose ingest is an hour behind
    cluster = cluster_for(history_loader(spine_scenario()))
    _ingested_until(cluster, hours_behind=1)
    # when anybody asks
    answer = client.get("/healthz")
    # then every check is ok
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["status"] == "ok"
    assert {name: check["ok"] for name, check in body["checks"].items()} == {
        "postgres": True,
        "redis": True,
        "prometheus:default": True,
        "ingest:default": True,
    }
    assert body["checks"]["ingest:default"]["lag_h"] == 1
    assert body["checks"]["ingest:default"]["max_lag_h"] == 3


def test_redis_down_is_a_503(client, settings) -> None:
    # given the cache and the broker at a port where nothing listens
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}
    settings.REDIS_URL = settings.CELERY_BROKER_URL = DEAD_REDIS
    # when /healthz is asked
    answer = client.get("/healthz")
    # then it says so, with a 503
    assert answer.status_code == 503
    assert answer.json()["status"] == "failing"
    assert answer.json()["checks"]["redis"]["ok"] is False
    assert answer.json()["checks"]["postgres"]["ok"] is True


def test_an_unreachable_prometheus_is_a_503_that_names_no_url(client) -> None:
    # given a cluster whose Prometheus URL carries credentials and does not answer
    Cluster.objects.create(name="hpc", prometheus_url="http://fleet:s3cret@127.0.0.1:9/prom")
    # when /healthz is asked
    answer = client.get("/healthz")
    # then the cluster's check fails, and the answer holds neither the URL nor its credentials
    assert answer.status_code == 503
    assert answer.json()["checks"]["prometheus:hpc"]["ok"] is False
    text = answer.content.decode()
    assert "s3cret" not in text
    assert "127.0.0.1" not in text
    assert "fleet:" not in text


def test_an_ingest_behind_its_threshold_is_a_503(client) -> None:
    # given a cluster ingested up to ten hours ago (beat stopped)
    cluster = Cluster.objects.create(name="hpc", prometheus_url="http://127.0.0.1:9")
    _ingested_until(cluster, hours_behind=10)
    # when /healthz is asked
    answer = client.get("/healthz")
    # then the lag is reported against its threshold
    assert answer.status_code == 503
    assert answer.json()["checks"]["ingest:hpc"] == {"ok": False, "lag_h": 10, "max_lag_h": 3}


def test_answers_are_kept_a_few_seconds(client, settings, django_assert_num_queries) -> None:
    # given /healthz asked once
    settings.FLEETWATT_HEALTHZ_CACHE_S = 60
    first = client.get("/healthz")
    # when it is asked again at once
    with django_assert_num_queries(0):
        again = client.get("/healthz")
    # then the same answer comes without asking anyone again
    assert again.status_code == first.status_code
    assert again.json() == first.json()


@pytest.fixture
def web_without_postgres(tmp_path: Path) -> Iterator[WebServer]:
    env = child_env(DATABASE_URL="postgres://postgres@127.0.0.1:1/fleetwatt", DJANGO_DEBUG="0")
    server = web_server_start(tmp_path / "web.log", env=env)
    yield server
    web_server_stop(server)


def test_postgres_down_is_a_503_and_the_api_answers_json(web_without_postgres: WebServer) -> None:
    # given a web server whose database does not answer
    url = web_without_postgres.url
    # when /healthz and the API are asked
    health = requests.get(f"{url}/healthz", timeout=30)
    api = requests.get(f"{url}/api/jobs/", headers={"Authorization": "Bearer fw_0123456789abcdef"}, timeout=30)
    # then /healthz names Postgres, and the API answers a JSON 503 that a client can retry on
    assert health.status_code == 503
    assert health.json()["checks"]["postgres"]["ok"] is False
    assert api.status_code == 503, api.text[:300]
    assert api.headers["Content-Type"].startswith("application/json")
    assert "Retry-After" in api.headers
    assert "127.0.0.1" not in api.text + health.text
