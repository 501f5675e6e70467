"""The checks of each cluster that /healthz reports: its Prometheus answers a query, and its ingest is not
more than FLEETWATT_INGEST_MAX_LAG_H hours behind the last closed hour. Named by the cluster, never by
its URL (which may carry credentials)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import requests

from apps.fleet.endpoint import EndpointConnection
from apps.fleet.models import Cluster

from .models import IngestWatermark
from .prometheus import PrometheusUnavailable, connection_for
from .selectors import clusters_meterless_gpus
from .services import HOUR, last_closed_hour

Check = dict[str, Any]


def prometheus_check(connection: EndpointConnection, *, timeout_s: float) -> Check:
    """The endpoint answers an instant query (the one API every Prometheus-compatible engine has), asked
    with the cluster's credentials, headers and CA bundle."""
    try:
        answer = requests.get(
            f"{connection.url.rstrip('/')}/api/v1/query",
            params={"query": "1"},
            headers=dict(connection.headers),
            auth=connection.basic_auth,
            verify=connection.ca_file or True,
            timeout=timeout_s,
        )
    except requests.RequestException as exc:
        return {"ok": False, "error": exc.__class__.__name__}
    if answer.status_code != 200:
        return {"ok": False, "error": f"HTTP {answer.status_code}"}
    try:
        success = answer.json().get("status") == "success"
    except ValueError:
        success = False
    return {"ok": True} if success else {"ok": False, "error": "not a Prometheus query API answer"}


def _cluster_prometheus_check(cluster: Cluster, *, timeout_s: float) -> Check:
    try:
        connection = connection_for(cluster)
    except PrometheusUnavailable as exc:  # its text holds names of variables and files, never a secret
        return {"ok": False, "error": exc.detail}
    return prometheus_check(connection, timeout_s=timeout_s)


def ingest_lag_check(*, ingested_through: datetime | None, now: datetime, max_lag_h: int) -> Check:
    """Whole hours closed but not ingested yet. A cluster never ingested has no lag yet (beat ingests
    its last closed hour on its next run)."""
    if ingested_through is None:
        return {"ok": True, "lag_h": None, "max_lag_h": max_lag_h}
    lag_h = max(0, int((last_closed_hour(now) + HOUR - ingested_through) / HOUR))
    return {"ok": lag_h <= max_lag_h, "lag_h": lag_h, "max_lag_h": max_lag_h}


def cluster_checks(*, now: datetime, max_lag_h: int, timeout_s: float) -> dict[str, Check]:
    """`prometheus:<cluster>` and `ingest:<cluster>` for every cluster; the Prometheus endpoints are asked
    at once, so /healthz takes one timeout at most whatever the number of clusters."""
    clusters = list(Cluster.objects.order_by("name"))
    marks = dict(IngestWatermark.objects.values_list("cluster_id", "ingested_through"))
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(clusters)))) as pool:
        reachable = list(pool.map(lambda c: _cluster_prometheus_check(c, timeout_s=timeout_s), clusters))
    checks: dict[str, Check] = {}
    for cluster, prometheus in zip(clusters, reachable, strict=True):
        checks[f"prometheus:{cluster.name}"] = prometheus
    meterless = clusters_meterless_gpus()
    for cluster in clusters:
        checks[f"ingest:{cluster.name}"] = ingest_lag_check(
            ingested_through=marks.get(cluster.pk), now=now, max_lag_h=max_lag_h
        )
        if meterless.get(cluster.pk):  # detail, not a failure: the ingest runs; these GPUs' energy is unknown
            checks[f"ingest:{cluster.name}"]["no_energy_meter"] = [g["uuid"] for g in meterless[cluster.pk]]
    return checks
