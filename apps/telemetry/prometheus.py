"""Reading a cluster's Prometheus-compatible endpoint through prometheus-api-client's session (its retries),
each instant query sent as its custom_query sends it and decoded by orjson: Prometheus, Thanos,
Mimir or Cortex, VictoriaMetrics. `reader_for(cluster)` is the one way the app makes a reader: with the
cluster's connection settings (apps.fleet.endpoint), and its name in every error."""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
import requests
from django.conf import settings
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from apps.fleet.endpoint import EndpointConnection, EndpointSettingsError, endpoint_resolve
from apps.fleet.models import Cluster

from . import promql
from .guard import retention_parse

_UNKNOWN = object()


class PrometheusUnavailable(Exception):
    """The endpoint could not be reached or answered with an error; nothing was written. Its text names
    the cluster where the reader knows it; `detail` is the text without the cluster's name."""

    def __init__(self, detail: str, *, cluster: str | None = None) -> None:
        self.detail, self.cluster = detail, cluster
        super().__init__(f"cluster {cluster}: {detail}" if cluster else detail)


class PrometheusSettingsError(PrometheusUnavailable):
    """A cluster's connection settings cannot be used (a named environment variable is unset); nothing
    was asked, nothing written."""


@dataclass
class QueryLog:
    """How many queries an ingest ran and how long it waited on them (the Prometheus floor)."""

    count: int = 0
    seconds: float = 0.0
    queries: list[str] = field(default_factory=list)


class PrometheusReader:
    """Instant queries at a given time, with a clear error naming the cluster (or the URL) when they fail.

    `headers` (e.g. `Authorization: Bearer ...`, `X-Scope-OrgID`), `basic_auth` and `ca_file` (a CA bundle
    to verify the endpoint's certificate) go with every request, queries and runtime info alike."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        basic_auth: tuple[str, str] | None = None,
        ca_file: str | None = None,
        cluster: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.cluster = cluster
        self.where = f"Prometheus at {self.url}"
        # Few, quick retries: a down server must fail the ingest fast so the watermark stays put.
        retry = Retry(total=2, backoff_factor=0.2, status_forcelist=(502, 503, 504), allowed_methods=None)
        session = requests.Session()
        session.verify = ca_file or True
        self._headers = dict(headers or {})
        self._auth = basic_auth
        self._secrets = _secrets_sent(self._headers, basic_auth)
        self._client = PrometheusConnect(
            url=self.url,
            retry=retry,
            timeout=timeout_s,
            method="POST",
            session=session,
            headers=self._headers or None,
            auth=basic_auth,
        )
        self._session = session
        self.log = QueryLog()
        self._lock = threading.Lock()
        self.timeout_s = timeout_s
        self._retention: object = _UNKNOWN
        self._windows_open_left: bool | None = None

    def instant(self, query: str, *, at: float) -> list[dict[str, Any]]:
        started = time.perf_counter()
        try:
            return self._query(query, at=at)
        finally:
            with self._lock:
                self.log.count += 1
                self.log.seconds += time.perf_counter() - started
                self.log.queries.append(query)

    def _query(self, query: str, *, at: float) -> list[dict[str, Any]]:
        # The request prometheus-api-client's custom_query sends, through its session (retries, TLS), with the
        # query in the form body (no URL length limit) and the answer decoded by orjson: an hour's answers are
        # 7.3 MB of JSON at 1,000 GPUs, and the standard library's decoder took about a quarter of the fetch's
        # CPU (0.12 s of ~0.45 s an hour, profiled).
        try:
            response = self._session.post(
                f"{self.url}/api/v1/query",
                data={"query": query, "time": f"{at:.3f}"},
                headers=self._headers,
                auth=self._auth,
                timeout=self.timeout_s,
                verify=self._session.verify,  # explicitly: requests lets REQUESTS_CA_BUNDLE override the session's
            )
        except requests.exceptions.SSLError as exc:
            raise PrometheusUnavailable(
                f"{self.where}: its TLS certificate is not trusted (check prometheus_ca_file): {_tls_reason(exc)}",
                cluster=self.cluster,
            ) from exc
        except requests.RequestException as exc:
            raise PrometheusUnavailable(
                f"{self.where} is unreachable: {exc.__class__.__name__}", cluster=self.cluster
            ) from exc
        if response.status_code != 200:
            code = response.status_code
            text = self._redacted(f"HTTP Status Code {code} ({response.content!r})")
            # vmauth answers an unknown token or password with 400 "cannot find the provided auth token".
            if code in (401, 403) or (code == 400 and "auth" in text.lower()):
                raise PrometheusUnavailable(
                    f"{self.where} refused the credentials (HTTP {code}): check the cluster's bearer token, basic "
                    "auth or headers and the environment variables they name",
                    cluster=self.cluster,
                )
            raise PrometheusUnavailable(f"{self.where} refused a query: {text}", cluster=self.cluster)
        try:
            result: list[dict[str, Any]] = orjson.loads(response.content)["data"]["result"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise PrometheusUnavailable(
                f"{self.where} answered a query with something other than Prometheus's JSON "
                f"({exc.__class__.__name__}; is the URL the query API's root?)",
                cluster=self.cluster,
            ) from None
        return result

    def _redacted(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def windows_open_left(self) -> bool:
        """Whether the engine's windows are (t - d, t] (VictoriaMetrics, Prometheus 3) rather than
        Prometheus 2's [t - d, t] (promql.WINDOW_PROBE). Asked once per reader, without data, and not
        counted in `log`: the queries an hour costs stay the hour's own."""
        if self._windows_open_left is None:
            at = float(int(time.time()) - 3600)  # a whole second, away from any engine's latency offset
            answer = self._query(promql.WINDOW_PROBE, at=at)
            steps = float(answer[0]["value"][1]) if answer else float(promql.WINDOW_PROBE_STEPS_CLOSED)
            self._windows_open_left = steps < promql.WINDOW_PROBE_STEPS_CLOSED
        return self._windows_open_left

    def retention(self) -> timedelta | None:
        """How long the endpoint keeps samples, from Prometheus's runtime info (asked once per reader);
        None where the endpoint does not say (other engines) or keeps them without a time limit."""
        if self._retention is _UNKNOWN:
            try:
                answer = self._session.get(
                    f"{self.url}/api/v1/status/runtimeinfo",
                    headers=self._headers,
                    auth=self._auth,
                    timeout=self.timeout_s,
                    verify=self._session.verify,
                )
                text = answer.json()["data"]["storageRetention"] if answer.ok else ""
            except (requests.RequestException, ValueError, KeyError, TypeError):
                text = ""
            self._retention = retention_parse(str(text))
        return self._retention  # type: ignore[return-value]

    def close(self) -> None:
        self._client.close()


def _secrets_sent(headers: Mapping[str, str], basic_auth: tuple[str, str] | None) -> tuple[str, ...]:
    """What an error text must never repeat: header values and credentials as sent, raw and encoded (an
    endpoint may echo the Authorization header it refused, as vmauth does)."""
    secrets = [value for value in headers.values() if len(value) >= 4]
    secrets += [value.split(" ", 1)[1] for value in headers.values() if " " in value]  # "Bearer <token>"
    if basic_auth:
        secrets += [basic_auth[1], base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode()]
    return tuple(sorted({s for s in secrets if s}, key=len, reverse=True))


def _tls_reason(exc: Exception) -> str:
    """The TLS library's reason (`[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: ...`), without
    the request's URL and query that requests wraps it in."""
    found = re.search(r"\[SSL[^\]]*\][^'\")]*", str(exc))
    return found.group(0).strip() if found else exc.__class__.__name__


def connection_for(cluster: Cluster) -> EndpointConnection:
    """The cluster's connection settings with their secrets read from the worker's environment now. A named
    variable that is unset, or a CA bundle that is not there, raises PrometheusSettingsError naming the
    cluster (and the variable), before anything is asked or written."""
    try:
        connection = endpoint_resolve(
            cluster.endpoint_settings(), environ=os.environ, default_timeout_s=settings.FLEETWATT_PROMETHEUS_TIMEOUT_S
        )
    except EndpointSettingsError as exc:
        raise PrometheusSettingsError(exc.detail, cluster=cluster.name) from None
    if connection.ca_file and not os.path.isfile(connection.ca_file):
        raise PrometheusSettingsError(
            f"prometheus_ca_file {connection.ca_file} is not a file on this worker", cluster=cluster.name
        )
    return connection


def reader_for(cluster: Cluster) -> PrometheusReader:
    """A reader of the cluster's endpoint with its connection settings (connection_for): the one way the
    app makes one."""
    connection = connection_for(cluster)
    return PrometheusReader(
        connection.url,
        timeout_s=connection.timeout_s,
        headers=connection.headers,
        basic_auth=connection.basic_auth,
        ca_file=connection.ca_file,
        cluster=connection.cluster,
    )
