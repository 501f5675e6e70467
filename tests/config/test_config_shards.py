"""A big cluster's shards in the fleet config: parsed, refused with their path, applied exactly, and left
alone when the key is left out."""

from __future__ import annotations

from typing import Any

import pytest

from apps.config.parse import config_parse
from apps.config.selectors import known_names_read
from apps.config.types import ConfigError, KnownNames, ShardConfig
from apps.fleet.models import Cluster
from apps.pipeline.inputs import config_apply
from apps.telemetry.models import ClusterShard

KNOWN = KnownNames(clusters=frozenset({"big"}))


def test_shards_are_read_in_the_file_s_order() -> None:
    config = config_parse(
        {"clusters": [{"name": "big", "shards": [{"name": "rack1", "nodes": "gpu-r1-.*"}, {"name": "rack2",
                                                                                         "nodes": "gpu-r2-.*"}]}]},
        known=KNOWN,
    )  # fmt: skip
    assert config.clusters[0].shards == (ShardConfig("rack1", "gpu-r1-.*"), ShardConfig("rack2", "gpu-r2-.*"))
    assert config_parse({"clusters": [{"name": "big"}]}, known=KNOWN).clusters[0].shards is None


@pytest.mark.parametrize(
    ("shards", "problem"),
    [
        ([{"name": "rest", "nodes": "a.*"}], "clusters[0].shards[0].name: 'rest' is reserved"),
        ([{"name": "a", "nodes": "x"}, {"name": "a", "nodes": "y"}], "clusters[0].shards[1].name: 'a' is named twice"),
        ([{"name": "a", "nodes": "gpu-(r1"}], "clusters[0].shards[0].nodes: not a regular expression"),
        ([{"name": "a"}], "clusters[0].shards[0].nodes"),
        ([{"name": "a", "nodes": "gpu-(?!b).*"}], "clusters[0].shards[0].nodes: Prometheus's regular expressions"),
    ],
    ids=["reserved", "twice", "bad-regex", "no-pattern", "look-ahead"],
)
def test_a_wrong_shard_names_its_path(shards: list[dict[str, Any]], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_parse({"clusters": [{"name": "big", "shards": shards}]}, known=KNOWN)
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


@pytest.mark.django_db
def test_applying_makes_the_shards_exactly_the_file_s_and_leaving_them_out_keeps_them() -> None:
    Cluster.objects.create(name="big", prometheus_url="http://127.0.0.1:9")
    shards = [{"name": "a", "nodes": "gpu-a.*"}, {"name": "b", "nodes": "gpu-b.*"}]
    document: dict[str, Any] = {"clusters": [{"name": "big", "shards": shards}]}
    config_apply(config=config_parse(document, known=known_names_read()))
    assert dict(ClusterShard.objects.values_list("name", "node_pattern")) == {"a": "gpu-a.*", "b": "gpu-b.*"}
    config_apply(config=config_parse({"clusters": [{"name": "big"}]}, known=known_names_read()))
    assert ClusterShard.objects.count() == 2
    document["clusters"][0]["shards"] = [{"name": "a", "nodes": "gpu-(a|c).*"}]
    config_apply(config=config_parse(document, known=known_names_read()))
    assert dict(ClusterShard.objects.values_list("name", "node_pattern")) == {"a": "gpu-(a|c).*"}
