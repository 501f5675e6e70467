"""fleetwatt's own metrics, served at /metrics (docs/operations.md, "fleetwatt's own metrics"): their names
and labels, the ingest lag's arithmetic, who may read them, and the metric families one scrape yields
from what was read. Pure: no Django, no Redis; the reads are apps.core.selectors' (the counters, in Redis)
and apps.telemetry.selectors' (the ingest's progress, in Postgres)."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

INGEST_LAG = "fleetwatt_ingest_lag_seconds"
INGEST_LAST_DURATION = "fleetwatt_ingest_last_duration_seconds"
INGEST_LAST_ROWS = "fleetwatt_ingest_last_rows"
CELERY_TASKS = "fleetwatt_celery_tasks_total"
REPORTS_SENT = "fleetwatt_reports_sent_total"
ROLLUP_CACHE = "fleetwatt_rollup_cache_requests_total"
API_PAGE_CACHE = "fleetwatt_api_page_cache_requests_total"
PAGE_CACHE = "fleetwatt_page_cache_requests_total"
SOURCE_UP = "fleetwatt_metrics_source_up"

TASK_OUTCOMES = ("success", "failure", "retry")
REPORT_OUTCOMES = ("sent", "failed")
CACHE_RESULTS = ("hit", "miss")
# "previous": a rollup kept before an ingest in progress, served while the new one is prepared.
ROLLUP_CACHE_RESULTS = ("hit", "miss", "previous")
SOURCES = ("database", "redis")


@dataclass(frozen=True)
class CounterSpec:
    """A counter kept in Redis: its labels, and the values a label may take where they are a fixed set
    (those are served as 0 before their first event, so that rate() has a start)."""

    labels: tuple[str, ...]
    help: str
    fixed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


COUNTERS: dict[str, CounterSpec] = {
    CELERY_TASKS: CounterSpec(
        ("task", "outcome"), "Celery tasks that ended, by task and outcome.", {"outcome": TASK_OUTCOMES}
    ),
    REPORTS_SENT: CounterSpec(("outcome",), "Weekly report sends, by outcome.", {"outcome": REPORT_OUTCOMES}),
    ROLLUP_CACHE: CounterSpec(("result",), "Lookups of cached rollups, by result.", {"result": ROLLUP_CACHE_RESULTS}),
    API_PAGE_CACHE: CounterSpec(
        ("result",), "Lookups of cached pages of the API's lists and sums, by result.", {"result": CACHE_RESULTS}
    ),
    PAGE_CACHE: CounterSpec(
        ("result",), "Lookups of the dashboard's pages kept rendered, by result.", {"result": ROLLUP_CACHE_RESULTS}
    ),
}


def counter_field(metric: str, values: Sequence[str]) -> str:
    """The Redis hash field of one labelled series of a counter (its label values as JSON). A call that names
    an unknown counter, the wrong number of labels or a value outside a fixed set is a bug: ValueError."""
    spec = COUNTERS.get(metric)
    if spec is None:
        raise ValueError(f"{metric!r} is not one of fleetwatt's counters {sorted(COUNTERS)}")
    if len(values) != len(spec.labels):
        raise ValueError(f"{metric} takes the labels {spec.labels}, got {tuple(values)}")
    for name, value in zip(spec.labels, values, strict=True):
        allowed = spec.fixed.get(name)
        if allowed is not None and value not in allowed:
            raise ValueError(f"{metric}: {name}={value!r} is not one of {allowed}")
    return json.dumps([str(v) for v in values])


def counter_labels(metric: str, raw_field: str) -> tuple[str, ...] | None:
    """The label values a hash field holds, or None for a field that is not one of the counter's series
    (written by another version, or by hand)."""
    try:
        values = json.loads(raw_field)
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) != len(COUNTERS[metric].labels):
        return None
    return tuple(str(v) for v in values)


def ingest_lag_s(*, ingested_through: datetime, now: datetime) -> float:
    """Seconds from the end of the last hour the watermark covers to now (never negative: an hour ingested
    while still open does not count as ahead)."""
    return max(0.0, (now - ingested_through).total_seconds())


@dataclass(frozen=True)
class ClusterIngest:
    """How far one cluster's ingest has gone, and what its last run took and wrote."""

    cluster: str
    ingested_through: datetime | None  # the watermark; None: never ingested
    last_duration_s: float | None = None  # None: no run recorded
    last_rows: Mapping[str, int] = field(default_factory=dict)  # per table


@dataclass(frozen=True)
class Snapshot:
    """What one scrape read. A source that could not be read is None: its series are left out (never served
    as zeros) and fleetwatt_metrics_source_up says so."""

    now: datetime
    ingest: Sequence[ClusterIngest] | None
    counts: Mapping[str, Mapping[tuple[str, ...], float]] | None


class MetricsCollector(Collector):
    """Yields fresh families on each scrape from what `read` returns (no module-level gauges whose label sets
    go stale: a deleted cluster disappears from the next scrape)."""

    def __init__(self, read: Callable[[], Snapshot]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        yield from snapshot_families(self._read())


def snapshot_families(snapshot: Snapshot) -> list[Metric]:
    up = GaugeMetricFamily(SOURCE_UP, "Whether this scrape could read the source (1) or not (0).", labels=["source"])
    up.add_metric(["database"], 0.0 if snapshot.ingest is None else 1.0)
    up.add_metric(["redis"], 0.0 if snapshot.counts is None else 1.0)
    families: list[Metric] = [up]
    families += _ingest_families(snapshot.ingest or (), now=snapshot.now)
    if snapshot.counts is not None:
        families += [_counter_family(metric, snapshot.counts.get(metric, {})) for metric in COUNTERS]
    return families


def _ingest_families(ingest: Sequence[ClusterIngest], *, now: datetime) -> list[Metric]:
    lag = GaugeMetricFamily(
        INGEST_LAG, "Now minus the end of the cluster's last ingested hour (its watermark).", labels=["cluster"]
    )
    duration = GaugeMetricFamily(
        INGEST_LAST_DURATION, "Wall seconds of the cluster's last ingest run (one cluster-hour).", labels=["cluster"]
    )
    rows = GaugeMetricFamily(
        INGEST_LAST_ROWS, "Rows the cluster's last ingest run wrote, per table.", labels=["cluster", "table"]
    )
    for c in sorted(ingest, key=lambda c: c.cluster):
        if c.ingested_through is not None:
            lag.add_metric([c.cluster], ingest_lag_s(ingested_through=c.ingested_through, now=now))
        if c.last_duration_s is not None:
            duration.add_metric([c.cluster], c.last_duration_s)
        for table, count in sorted(c.last_rows.items()):
            rows.add_metric([c.cluster, table], float(count))
    return [lag, duration, rows]


def _counter_family(metric: str, counts: Mapping[tuple[str, ...], float]) -> CounterMetricFamily:
    spec = COUNTERS[metric]
    family = CounterMetricFamily(metric, spec.help, labels=list(spec.labels))
    series = dict(counts)
    if len(spec.labels) == 1 and spec.labels[0] in spec.fixed:  # a fixed set: every value, 0 until it happens
        for value in spec.fixed[spec.labels[0]]:
            series.setdefault((value,), 0.0)
    for values, count in sorted(series.items()):
        family.add_metric(list(values), count)
    return family


class Access(Enum):
    ALLOWED = "allowed"
    OFF = "off"  # neither a token nor an allow-list is set
    WRONG_TOKEN = "wrong token"
    REFUSED = "refused"


def metrics_access(*, authorization: str, address: str, token: str, allow: Sequence[str]) -> Access:
    """Who may read /metrics: a caller with `Authorization: Bearer <token>`, or one whose address is in an
    `allow` network. A bearer token presented when a token is set must be the right one (a stale token in
    Prometheus's config shows as a 401 even from an allowed address); without one, the address decides."""
    if not token and not allow:
        return Access.OFF
    presented = bearer_token(authorization)
    if presented is not None and token:
        # Constant time: the comparison says nothing of how much of the token was right.
        return Access.ALLOWED if hmac.compare_digest(presented.encode(), token.encode()) else Access.WRONG_TOKEN
    return Access.ALLOWED if address_allowed(address, allow) else Access.REFUSED


def bearer_token(authorization: str) -> str | None:
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None


def address_allowed(address: str, allow: Sequence[str]) -> bool:
    """The address lies in one of the networks (CIDRs; an IPv4 address seen as IPv6-mapped counts as
    itself). An address that is not one (empty, a unix socket's) is in none."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        candidates.append(ip.ipv4_mapped)
    networks = networks_parse(allow)
    return any(c in n for c in candidates for n in networks if c.version == n.version)


def networks_parse(cidrs: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The CIDRs as networks; one that is not a network (a typo, host bits set) is a ValueError naming it."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip()))
        except ValueError as exc:
            raise ValueError(f"FLEETWATT_METRICS_ALLOW: {cidr!r} is not a network ({exc})") from None
    return networks
