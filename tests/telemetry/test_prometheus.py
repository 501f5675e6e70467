"""apps.telemetry.prometheus: the reader of a cluster's endpoint, against a local HTTP server that answers as told.
An instant query goes as a form (no URL length limit) at the time given, with the cluster's headers and credentials,
and is counted; every failure is a PrometheusUnavailable naming the cluster and never repeating a secret sent; the
engine's windows and retention are asked once per reader, and not counted as the hour's queries. The settings read
from the environment: connection_for and reader_for. With vmauth and TLS:
tests/telemetry/test_endpoint_connection.py."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta

import pytest

from apps.telemetry import promql
from apps.telemetry.prometheus import (
    PrometheusReader,
    PrometheusSettingsError,
    PrometheusUnavailable,
    _secrets_sent,
    connection_for,
    reader_for,
)
from tests.factories import ClusterFactory
from tests.json_server import JsonServer, json_server

ANSWER = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2"]}]}}


@pytest.fixture
def server() -> Iterator[JsonServer]:
    with json_server() as found:
        found.answer = (200, ANSWER)
        yield found


def _reader(server: JsonServer, **kwargs: object) -> PrometheusReader:
    return PrometheusReader(server.url + "/", timeout_s=2.0, cluster="east", **kwargs)  # type: ignore[arg-type]


def test_a_query_goes_as_a_form_at_its_time_with_the_headers_and_is_counted(server: JsonServer) -> None:
    reader = _reader(server, headers={"X-Scope-OrgID": "team-a"}, basic_auth=("fw", "pw"))
    assert reader.instant("up", at=1_793_577_600.5) == ANSWER["data"]["result"]  # type: ignore[index]
    (asked,) = server.asked
    assert asked["method"] == "POST" and asked["path"] == "/api/v1/query"
    assert asked["form"] == {"query": ["up"], "time": ["1793577600.500"]}
    assert asked["headers"]["X-Scope-OrgID"] == "team-a"
    assert asked["headers"]["Authorization"] == "Basic " + base64.b64encode(b"fw:pw").decode()
    reader.instant("sum(up)", at=1.0)
    assert reader.log.count == 2 and reader.log.queries == ["up", "sum(up)"] and reader.log.seconds > 0


def test_refused_credentials_are_said_as_such_naming_the_cluster(server: JsonServer) -> None:
    for status, body in [(401, {"error": "unauthorized"}), (403, {}), (400, "cannot find the provided auth token")]:
        server.answer = (status, body)
        with pytest.raises(PrometheusUnavailable) as refused:
            _reader(server).instant("up", at=1.0)
        assert str(refused.value).startswith("cluster east: Prometheus at http://127.0.0.1:")
        assert f"refused the credentials (HTTP {status})" in refused.value.detail


def test_an_error_answer_never_repeats_a_secret_sent(server: JsonServer) -> None:
    # given an endpoint that echoes what it was sent in its error, as vmauth does
    token, password = "s3cret-token-value", "hunter22"
    encoded = base64.b64encode(f"fw:{password}".encode()).decode()
    server.answer = (422, {"error": f"bad query; you sent Bearer {token} and Basic {encoded} ({password})"})
    reader = _reader(server, headers={"Authorization": f"Bearer {token}"}, basic_auth=("fw", password))
    with pytest.raises(PrometheusUnavailable) as refused:
        reader.instant("up", at=1.0)
    text = str(refused.value)
    assert "refused a query: HTTP Status Code 422" in text
    assert token not in text and password not in text and encoded not in text and "[redacted]" in text


def test_what_is_not_the_query_apis_json_is_said_so(server: JsonServer) -> None:
    for body in [b"<html>login</html>", {"status": "success"}, [1, 2]]:
        server.answer = (200, body)
        with pytest.raises(PrometheusUnavailable, match="something other than Prometheus's JSON"):
            _reader(server).instant("up", at=1.0)


def test_an_unreachable_endpoint_is_named_without_its_query() -> None:
    reader = PrometheusReader("http://127.0.0.1:9", timeout_s=1.0, cluster="east")
    with pytest.raises(PrometheusUnavailable) as refused:
        reader.instant('secret_metric{token="x"}', at=1.0)
    assert refused.value.cluster == "east" and "is unreachable: ConnectionError" in refused.value.detail
    assert "secret_metric" not in str(refused.value)
    assert reader.log.count == 1  # a failed query is counted too
    assert reader.retention() is None  # nor is its retention known


def test_a_busy_endpoint_is_asked_again_then_given_up_on(server: JsonServer) -> None:
    server.answer = (503, {"error": "overloaded"})
    with pytest.raises(PrometheusUnavailable, match="is unreachable: RetryError"):
        _reader(server).instant("up", at=1.0)
    assert len(server.asked) == 3  # the first ask and two retries


@pytest.mark.parametrize(("steps", "open_left"), [("3", False), ("2", True)])
def test_the_engines_windows_are_asked_once_without_counting(server: JsonServer, steps: str, open_left: bool) -> None:
    server.answer = (200, {"status": "success", "data": {"result": [{"metric": {}, "value": [1, steps]}]}})
    reader = _reader(server)
    assert reader.windows_open_left() is open_left
    assert reader.windows_open_left() is open_left
    assert [a["form"]["query"] for a in server.asked] == [[promql.WINDOW_PROBE]]
    assert reader.log.count == 0


def test_an_engine_that_answers_the_probe_with_nothing_is_taken_for_closed_windows(server: JsonServer) -> None:
    server.answer = (200, {"status": "success", "data": {"result": []}})
    assert _reader(server).windows_open_left() is False


def test_the_retention_is_read_once_from_the_runtime_info(server: JsonServer) -> None:
    server.answers["/api/v1/status/runtimeinfo"] = (200, {"status": "success", "data": {"storageRetention": "15d"}})
    reader = _reader(server, headers={"X-Scope-OrgID": "a"})
    assert reader.retention() == timedelta(days=15) and reader.retention() == timedelta(days=15)
    assert len(server.asked) == 1 and server.asked[0]["headers"]["X-Scope-OrgID"] == "a"


@pytest.mark.parametrize("answer", [(404, {"error": "not found"}), (200, {"data": {}}), (200, b"not json")])
def test_an_engine_that_does_not_say_its_retention_has_none_known(server: JsonServer, answer) -> None:
    server.answers["/api/v1/status/runtimeinfo"] = answer
    assert _reader(server).retention() is None


def test_the_secrets_an_error_must_not_repeat() -> None:
    secrets = _secrets_sent({"Authorization": "Bearer abcdef", "X-Scope-OrgID": "abc", "X-Key": "k"}, ("u", "pw12"))
    assert "Bearer abcdef" in secrets and "abcdef" in secrets and "abc" not in secrets  # short values are no secret
    assert "pw12" in secrets and base64.b64encode(b"u:pw12").decode() in secrets
    assert list(secrets) == sorted(secrets, key=len, reverse=True)  # the longest first: none left half redacted


@pytest.mark.django_db
def test_a_clusters_reader_has_its_settings_and_a_variable_unset_is_an_error_before_any_question(
    monkeypatch: pytest.MonkeyPatch, server: JsonServer
) -> None:
    cluster = ClusterFactory(name="east", prometheus_url=server.url, prometheus_bearer_token_env="FW_TEST_TOKEN")
    monkeypatch.setenv("FW_TEST_TOKEN", "tok-123456")
    reader = reader_for(cluster)
    reader.instant("up", at=1.0)
    assert server.asked[0]["headers"]["Authorization"] == "Bearer tok-123456" and reader.cluster == "east"
    monkeypatch.delenv("FW_TEST_TOKEN")
    with pytest.raises(PrometheusSettingsError, match=r"^cluster east: .*FW_TEST_TOKEN"):
        reader_for(cluster)
    assert len(server.asked) == 1


@pytest.mark.django_db
def test_a_ca_bundle_that_is_not_a_file_is_an_error_naming_it(tmp_path) -> None:
    cluster = ClusterFactory(name="tls", prometheus_url="https://127.0.0.1:9", prometheus_ca_file=str(tmp_path / "no"))
    with pytest.raises(PrometheusSettingsError, match=r"^cluster tls: prometheus_ca_file .*/no is not a file"):
        connection_for(cluster)
