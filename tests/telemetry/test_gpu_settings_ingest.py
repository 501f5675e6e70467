"""Power limits and SM clocks per GPU-hour, end to end: the simulator's agent and dcgm-exporter series -> a real
Prometheus -> `manage.py ingest` -> each GPU-hour. The agent's word where it exports them, dcgm-exporter's where
an older agent does not, and unknown (null) where neither does: never 0."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from django.core.management import call_command

from apps.pipeline.ingest import hour_ingest
from apps.simulator import engine
from apps.telemetry import promql
from apps.telemetry.models import GpuHour
from apps.telemetry.prometheus import PrometheusReader

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

START = datetime(2026, 11, 2, tzinfo=UTC)
SCENARIO = {
    "name": "gpu-settings",
    "start": START.isoformat(),
    "duration": "3h",
    "scrape_interval_s": 60,
    "scrape_offset_s": 7,  # no sample on an hour's edge: every engine's window holds the same samples
    "linger_s": 120,
    "gpu_settings": True,
    "nodes": [
        {"hostname": "new-a", "gpus": 2},
        {"hostname": "old-b", "gpus": 1, "agent_contract": "core"},
        {"hostname": "bare-c", "gpus": 1, "agent_contract": "core", "dcgm": False},
        {"hostname": "pods-d", "gpus": 1, "agent": False, "dcgm_pod_labels": True},
    ],
    "jobs": [
        {"scheduler": "slurm", "job_id": "1", "node": "new-a", "gpus": [0], "start": "20m", "end": "2h30m", "sm": 90,
         "power_w": 650},
        {"scheduler": "slurm", "job_id": "2", "node": "old-b", "gpus": [0], "start": "0s", "end": "3h", "sm": 50},
        {"scheduler": "slurm", "job_id": "3", "node": "bare-c", "gpus": [0], "start": "10m", "end": "1h"},
        {"scheduler": "k8s", "namespace": "inf", "pod": "p1", "node": "pods-d", "gpus": [0], "start": "1h15m",
         "end": "2h45m", "sm": 80, "power_w": 600},
    ],
    "power_limits": [
        {"node": "new-a", "gpu": 0, "at": "1h30m", "watts": 450},
        {"node": "pods-d", "at": "2h", "watts": 500},
    ],
}  # fmt: skip


def _samples(sim: engine.FleetSimulation, family: str, uuid: str, hour: datetime) -> np.ndarray:
    """The values Prometheus holds for the GPU's series of `family` in the hour, one per scrape time."""
    lo, hi = hour.timestamp(), hour.timestamp() + 3600
    by_time: dict[float, float] = {}
    for s in sim.series():
        if s.family == family and uuid in (s.labels.get("uuid"), s.labels.get("UUID")):
            for t, v in zip(s.times, s.values, strict=True):
                if lo <= t <= hi:
                    by_time[float(t)] = float(v)
    return np.array([by_time[t] for t in sorted(by_time)])


def _expected(sim: engine.FleetSimulation, uuid: str, hour: datetime, *, agent: bool) -> tuple[float, ...]:
    limit_family = engine.GPU_POWER_LIMIT if agent else engine.DCGM_POWER_MGMT_LIMIT
    limits = _samples(sim, limit_family, uuid, hour)
    clocks = _samples(sim, engine.GPU_SM_CLOCK if agent else engine.DCGM_SM_CLOCK, uuid, hour)
    return limits.mean(), limits.min(), limits.max(), clocks.mean() / (1e6 if agent else 1.0)


def _stored(row: GpuHour) -> tuple[float | None, ...]:
    return row.power_limit_w, row.power_limit_min_w, row.power_limit_max_w, row.sm_clock_mhz


def test_each_gpu_hour_keeps_its_power_limit_and_clock(history_loader, cluster_for) -> None:
    # given
    history = history_loader(SCENARIO)
    cluster_for(history)
    sim, sc = history.sim, history.scenario
    # when
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T03:00:00Z", verbosity=0)
    # then
    rows = {(r.gpu.uuid, r.hour): r for r in GpuHour.objects.select_related("gpu")}
    assert len(rows) == 5 * 3
    for hostname, index, agent in (("new-a", 0, True), ("new-a", 1, True), ("old-b", 0, False), ("pods-d", 0, False)):
        uuid = sc.gpu_uuid(hostname, index)
        for h in range(3):
            hour = START.replace(hour=h)
            assert _stored(rows[(uuid, hour)]) == pytest.approx(_expected(sim, uuid, hour, agent=agent)), (hostname, h)
    # the cap set at 1h30m: the hour it changed in spans both limits, the next one holds the new one
    capped = sc.gpu_uuid("new-a", 0)
    assert _stored(rows[(capped, START.replace(hour=1))])[1:3] == (450.0, 700.0)
    assert _stored(rows[(capped, START.replace(hour=2))])[:3] == (450.0, 450.0, 450.0)
    # an older agent on a node without dcgm-exporter: its GPU-hours are there, their settings unknown
    bare = sc.gpu_uuid("bare-c", 0)
    for h in range(3):
        assert _stored(rows[(bare, START.replace(hour=h))]) == (None, None, None, None)


def test_reingesting_gives_the_same_settings(history_loader, cluster_for) -> None:
    history = history_loader(SCENARIO)
    cluster_for(history)
    hours = {"start": "2026-11-02T01:00:00Z", "end": "2026-11-02T02:00:00Z", "verbosity": 0}
    call_command("ingest", **hours)
    fields = ("gpu__uuid", "hour", "power_limit_w", "power_limit_min_w", "power_limit_max_w", "sm_clock_mhz")
    first = sorted(GpuHour.objects.values_list(*fields))
    call_command("ingest", **hours)
    assert sorted(GpuHour.objects.values_list(*fields)) == first


def _asked_dcgm_settings(history, cluster) -> bool:
    reader = PrometheusReader(history.url, timeout_s=30)
    hour_ingest(cluster=cluster, hour=START.replace(hour=1), reader=reader)
    return any(promql.DCGM_SM_CLOCK in q for q in reader.log.queries)


def test_dcgm_exporter_s_settings_are_asked_only_where_an_agent_gave_none(history_loader, cluster_for) -> None:
    # given a fleet of current agents only, then the mixed one
    current = {**SCENARIO, "name": "gpu-settings-current", "nodes": SCENARIO["nodes"][:1], "jobs": SCENARIO["jobs"][:1]}
    current["power_limits"] = SCENARIO["power_limits"][:1]
    # then the first reads each GPU's settings once, from its agent; the second asks dcgm-exporter too
    agents, mixed = history_loader(current), history_loader(SCENARIO)
    assert not _asked_dcgm_settings(agents, cluster_for(agents, "current"))
    assert _asked_dcgm_settings(mixed, cluster_for(mixed, "mixed"))
