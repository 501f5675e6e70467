"""Reading a cluster's Prometheus-compatible endpoint through prometheus-api-client."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from .guard import retention_parse

_UNKNOWN = object()


class PrometheusUnavailable(Exception):
    """The endpoint could not be reached or answered with an error; nothing was written."""


@dataclass
class QueryLog:
    """How many queries an ingest ran and how long it waited on them (the Prometheus floor)."""

    count: int = 0
    seconds: float = 0.0
    queries: list[str] = field(default_factory=list)


class PrometheusReader:
    """Instant queries at a given time, with a clear error naming the URL when they fail."""

    def __init__(self, url: str, *, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        # Few, quick retries: a down server must fail the ingest fast so the watermark stays put.
        retry = Retry(total=2, backoff_factor=0.2, status_forcelist=(502, 503, 504), allowed_methods=None)
        self._client = PrometheusConnect(url=self.url, retry=retry, timeout=timeout_s, method="POST")
        self.log = QueryLog()
        self._lock = threading.Lock()
        self._timeout_s = timeout_s
        self._retention: object = _UNKNOWN

    def instant(self, query: str, *, at: float) -> list[dict[str, Any]]:
        started = time.perf_counter()
        try:
            result = self._client.custom_query(query, params={"time": f"{at:.3f}"})
        except requests.RequestException as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url} is unreachable: {exc.__class__.__name__}") from exc
        except PrometheusApiClientException as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url} refused a query: {exc}") from exc
        finally:
            with self._lock:
                self.log.count += 1
                self.log.seconds += time.perf_counter() - started
                self.log.queries.append(query)
        return result

    def retention(self) -> timedelta | None:
        """How long the endpoint keeps samples, from Prometheus's runtime info (asked once per reader);
        None where the endpoint does not say (other engines) or keeps them without a time limit."""
        if self._retention is _UNKNOWN:
            try:
                answer = requests.get(f"{self.url}/api/v1/status/runtimeinfo", timeout=self._timeout_s)
                text = answer.json()["data"]["storageRetention"] if answer.ok else ""
            except (requests.RequestException, ValueError, KeyError, TypeError):
                text = ""
            self._retention = retention_parse(str(text))
        return self._retention  # type: ignore[return-value]

    def close(self) -> None:
        self._client.close()
