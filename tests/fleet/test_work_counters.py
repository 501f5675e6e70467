"""apps.fleet.work_counters: which work counters a cluster reads; the fleet config's `work_counters` and the
cluster's stored form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from apps.config.parse import config_parse
from apps.config.types import ConfigError
from apps.fleet.models import Cluster
from apps.fleet.work_counters import (
    DEFAULT_WORK_COUNTERS,
    WorkCounters,
    work_counters_from_json,
    work_counters_json,
    work_counters_parse,
)
from apps.pipeline.ingest import IngestError, hour_fetch_shard
from apps.telemetry.prometheus import PrometheusReader


def test_null_is_the_defaults_and_an_empty_list_reads_none() -> None:
    assert work_counters_from_json(None) == DEFAULT_WORK_COUNTERS
    assert work_counters_from_json([]) == ()
    assert {c.engine for c in DEFAULT_WORK_COUNTERS} == {"vllm", "tgi", "sglang", "triton", "fleetwatt"}


def test_a_site_s_own_engine_round_trips() -> None:
    raw = [{"engine": "lmdeploy", "output_tokens": "lmdeploy:generation_tokens_total", "model_label": "model"}]
    counters, problems = work_counters_parse(raw, "clusters[0].work_counters")
    assert problems == [] and counters == (
        WorkCounters("lmdeploy", output_tokens="lmdeploy:generation_tokens_total", model_label="model"),
    )
    assert work_counters_json(counters) == raw
    assert work_counters_from_json(raw) == counters


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"engine": "vllm"}, "a list of engines"),
        ([{"engine": "vllm"}], "name one counter at least"),
        ([{"engine": "VLLM!", "output_tokens": "x"}], ".engine: a short name"),
        ([{"engine": "a", "output_tokens": "not a name"}], ".output_tokens: a Prometheus metric name"),
        ([{"engine": "a", "units": "u", "model_label": "model-name"}], ".model_label: a label name"),
        ([{"engine": "a", "units": "u"}, {"engine": "a", "units": "v"}], "'a' is named twice"),
        ([{"engine": "a", "units": "u", "tokens": "t"}], ".tokens: not a key of an engine"),
    ],
)
def test_bad_entries_are_named_with_their_path(raw: object, problem: str) -> None:
    counters, problems = work_counters_parse(raw, "w")
    assert counters is None and any(problem in p and p.startswith("w") for p in problems), problems


def test_the_fleet_config_reads_them_per_cluster() -> None:
    config = config_parse(
        {
            "clusters": [
                {"name": "a", "prometheus_url": "http://p:9090", "work_counters": None},
                {"name": "b", "prometheus_url": "http://p:9090", "work_counters": [{"engine": "x", "units": "u"}]},
                {"name": "c", "prometheus_url": "http://p:9090"},
            ]
        }
    )
    a, b, c = config.clusters
    assert (a.work_counters_given, a.work_counters) == (True, None)
    assert b.work_counters == (WorkCounters("x", units="u"),)
    assert (c.work_counters_given, c.work_counters) == (False, None)
    with pytest.raises(ConfigError, match=r"clusters\[0\]\.work_counters\[0\]: name one counter at least"):
        config_parse(
            {"clusters": [{"name": "a", "prometheus_url": "http://p:9090", "work_counters": [{"engine": "x"}]}]}
        )


@pytest.mark.django_db
def test_the_admin_s_form_refuses_a_bad_list() -> None:
    cluster = Cluster(name="a", prometheus_url="http://p:9090", work_counters=[{"engine": "x"}])
    with pytest.raises(ValidationError, match="name one counter at least"):
        cluster.clean()
    assert Cluster(name="b", prometheus_url="http://p:9090").work_counters_read() == DEFAULT_WORK_COUNTERS


@pytest.mark.django_db
def test_the_ingest_refuses_a_cluster_whose_stored_counters_cannot_be_read() -> None:
    # given a list written past the admin's checks (by hand, in the database)
    cluster = Cluster.objects.create(name="a", prometheus_url="http://127.0.0.1:9", work_counters=[{"engine": "x"}])
    reader = PrometheusReader(cluster.prometheus_url, timeout_s=1)
    # then the hour fails loudly, before a query, rather than reading no work at all
    with pytest.raises(IngestError, match="cluster a: its work_counters cannot be read"):
        hour_fetch_shard(cluster=cluster, hour=datetime(2026, 11, 2, tzinfo=UTC), reader=reader, node_match="")
    assert reader.log.count == 0
