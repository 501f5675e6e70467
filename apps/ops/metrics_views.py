"""/metrics: fleetwatt's own metrics (django-prometheus's requests and database series, and the app's:
apps.core.metrics), for Prometheus, behind a bearer token or an allow-list of addresses."""

from __future__ import annotations

import os
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from apps.core.access.login_throttle import client_address
from apps.core.metrics import Access, MetricsCollector, Snapshot, metrics_access
from apps.core.selectors import metric_counts_read
from apps.telemetry.selectors import ingest_progress_read

_OFF = (
    "fleetwatt's metrics are off: set FLEETWATT_METRICS_TOKEN (a bearer token for Prometheus) or "
    "FLEETWATT_METRICS_ALLOW (the networks that may scrape, as CIDRs) to serve them.\n"
)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus's text format. 401 for a wrong bearer token, 403 for a caller with neither the token nor
    an allowed address, and 403 saying so while neither setting is set (never open by default)."""
    access = metrics_access(
        authorization=request.headers.get("Authorization", ""),
        address=client_address(request),
        token=settings.FLEETWATT_METRICS_TOKEN,
        allow=settings.FLEETWATT_METRICS_ALLOW,
    )
    if access is Access.OFF:
        return _plain(_OFF, status=403)
    if access is Access.WRONG_TOKEN:
        response = _plain("Wrong bearer token.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="fleetwatt metrics"'
        return response
    if access is Access.REFUSED:
        return _plain("Not allowed: send the metrics bearer token, or scrape from an allowed address.\n", status=403)
    registry = CollectorRegistry(auto_describe=False)
    _register_django_prometheus(registry)
    registry.register(
        MetricsCollector(
            lambda: Snapshot(now=timezone.now(), ingest=ingest_progress_read(), counts=metric_counts_read())
        )
    )
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


def _register_django_prometheus(registry: CollectorRegistry) -> None:
    """django-prometheus's series: with several gunicorn workers on one machine, PROMETHEUS_MULTIPROC_DIR
    makes each worker write them to files there and this merges them (as django-prometheus's own view
    does); without it, this process's own."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_Default())


class _Default(Collector):
    """The process's default registry, where django-prometheus keeps its series, as one collector."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def _plain(text: str, *, status: int) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")
