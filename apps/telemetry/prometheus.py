"""Reading a cluster's Prometheus-compatible endpoint through prometheus-api-client."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry


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

    def close(self) -> None:
        self._client.close()
