"""The number of PromQL queries per cluster-hour does not grow with GPUs or jobs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.pipeline.ingest import hour_ingest
from apps.telemetry.prometheus import PrometheusReader
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.django_db, pytest.mark.prometheus]


def _bigger(factor: int) -> dict:
    raw = spine_scenario()
    raw["name"] = f"spine-x{factor}"
    raw["nodes"] = [{**n, "gpus": n["gpus"] * factor} if n["hostname"] == "slurm-a" else n for n in raw["nodes"]]
    extra = [
        {"scheduler": "slurm", "job_id": f"5{g:03d}", "node": "slurm-a", "gpus": [g], "start": "0s", "end": "5h"}
        for g in range(4, 4 * factor)
    ]
    raw["jobs"] = raw["jobs"] + extra
    return raw


def test_queries_per_cluster_hour_are_fixed(history_loader, cluster_for) -> None:
    counts = []
    for factor in (1, 4):
        history = history_loader(_bigger(factor))
        cluster = cluster_for(history, name=f"x{factor}")
        reader = PrometheusReader(history.url, timeout_s=30)
        hour_ingest(cluster=cluster, hour=datetime(2026, 11, 2, 2, tzinfo=UTC), reader=reader)
        counts.append(reader.log.count)
    assert counts[0] == counts[1]
    assert counts[0] <= 16
