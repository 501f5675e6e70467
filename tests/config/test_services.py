"""The fleet config written (apps/config/services.py): everything a file names created or updated in one transaction,
the same file twice changing nothing, lists that the file owns (hostname rules, shards, the SSO mapping) becoming
exactly the file's, and the clusters and job groups a change reaches. Through `apply_config` and the pipeline:
tests/config/test_config.py."""

from __future__ import annotations

from typing import Any

import pytest

from apps.carbon.models import JobGroup, ServerTypeRule, Site
from apps.config.parse import config_load
from apps.config.selectors import known_names_read
from apps.config.services import ApplyReport, Counts, config_write
from apps.fleet.models import Cluster, Team, TeamRule
from apps.sso.models import SsoGroupRule, SsoSettings
from apps.telemetry.models import ClusterShard
from tests.factories import NodeFactory

pytestmark = pytest.mark.django_db

FILE = """
sites:
  - {name: dc-a, grid_zone: DE, pue: 1.2, electricity_price_per_kwh: 0.18, timezone: Europe/Berlin}
server_types:
  - {name: hgx, embodied_kg_per_server: 3000, service_life_h: 43800, gpus_per_server: 8}
  - {name: dgx, embodied_kg_per_server: 2500, service_life_h: 43800, gpus_per_server: 8}
gpu_models:
  - {name: NVIDIA H200, hourly_rate: 2.8, tdp_w: 700}
clusters:
  - name: c1
    prometheus_url: http://prometheus:9090
    site: dc-a
    prometheus_timeout_s: 30
    nodes: [{match: "gpu-d*", server_type: dgx}, {match: "gpu-*", server_type: hgx}]
    shards: [{name: a, nodes: "gpu-a.*"}, {name: b, nodes: "gpu-b.*"}]
teams:
  - {name: vision, display_name: Vision, rules: [{kind: slurm_account, value: vision}]}
job_groups:
  - {name: sweeps, match_kind: name_prefix, match_value: sweep-}
sso:
  groups_claim: roles
  map: [{group: ml, role: member, team: vision}, {group: money, role: finance}]
"""


def _write(text: str = FILE, **replace: str) -> ApplyReport:
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return config_write(config=config_load(text, known=known_names_read()))


def _counts(report: ApplyReport) -> dict[str, tuple[int, int, int, int]]:
    return {k: (c.created, c.updated, c.unchanged, c.deleted) for k, c in report.counts.items()}


def test_the_first_write_creates_everything_and_the_second_changes_nothing() -> None:
    # when
    first = _write()
    # then
    assert _counts(first) == {
        "sites": (1, 0, 0, 0), "server_types": (2, 0, 0, 0), "gpu_models": (1, 0, 0, 0), "clusters": (1, 0, 0, 0),
        "server_type_rules": (2, 0, 0, 0), "shards": (2, 0, 0, 0), "teams": (1, 0, 0, 0), "team_rules": (1, 0, 0, 0),
        "job_groups": (1, 0, 0, 0), "sso": (3, 0, 0, 0),
    }  # fmt: skip
    cluster = Cluster.objects.get(name="c1")
    assert (cluster.site.name, cluster.prometheus_timeout_s) == ("dc-a", 30.0)
    assert first.typed_cluster_ids == [cluster.pk] and first.changed
    # a new cluster has no footprints yet: none to recompute
    assert first.affected_cluster_ids == []
    # when the same file again
    second = _write()
    # then
    assert not second.changed
    assert all(c.created == c.updated == c.deleted == 0 for c in second.counts.values())
    assert second.affected_cluster_ids == [] and second.changed_group_ids == []


def test_a_site_change_reaches_its_clusters_unless_it_is_its_time_zone() -> None:
    _write()
    cluster = Cluster.objects.get(name="c1")
    zone = _write(**{"timezone: Europe/Berlin": "timezone: UTC"})
    assert zone.counts["sites"].updated == 1 and zone.affected_cluster_ids == []
    pue = _write(**{"pue: 1.2": "pue: 1.3"})
    assert pue.affected_cluster_ids == [cluster.pk]
    assert Site.objects.get().pue == 1.3


def test_a_server_type_or_gpu_model_change_reaches_the_clusters_of_its_nodes_and_gpus() -> None:
    _write()
    cluster = Cluster.objects.get(name="c1")
    NodeFactory(cluster=cluster, hostname="gpu-d1", server_type=None)
    assert _write(**{"embodied_kg_per_server: 2500": "embodied_kg_per_server: 2600"}).affected_cluster_ids == []
    NodeFactory(cluster=cluster, hostname="gpu-d2", server_type=cluster.server_type_rules.get(priority=10).server_type)
    assert _write(**{"embodied_kg_per_server: 2500": "embodied_kg_per_server: 2700"}).affected_cluster_ids == [
        cluster.pk
    ]


def test_a_clusters_hostname_rules_and_shards_become_exactly_the_files() -> None:
    _write()
    cluster = Cluster.objects.get(name="c1")
    # when the rules are reordered with one gone, and one shard left
    report = _write(
        **{
            '[{match: "gpu-d*", server_type: dgx}, {match: "gpu-*", server_type: hgx}]': '[{match: "gpu-*", server_type: hgx}]',  # noqa: E501
            '[{name: a, nodes: "gpu-a.*"}, {name: b, nodes: "gpu-b.*"}]': '[{name: b, nodes: "gpu-[bc].*"}]',
        }
    )
    # then
    rules = list(ServerTypeRule.objects.filter(cluster=cluster).values_list("hostname_glob", "priority"))
    assert rules == [("gpu-*", 10)]
    assert list(ClusterShard.objects.filter(cluster=cluster).values_list("name", "node_pattern")) == [
        ("b", "gpu-[bc].*")
    ]
    assert _counts(report)["server_type_rules"] == (0, 1, 0, 1)  # gpu-* moved from 20 to 10
    assert _counts(report)["shards"] == (0, 1, 0, 1)


def test_what_a_file_leaves_out_stays_as_stored() -> None:
    _write()
    # a file naming the cluster without its url, rules, shards or timeout, and without an sso section
    _write("clusters:\n  - {name: c1}\n")
    cluster = Cluster.objects.get(name="c1")
    assert (cluster.prometheus_url, cluster.prometheus_timeout_s) == ("http://prometheus:9090", 30.0)
    assert cluster.server_type_rules.count() == 2 and ClusterShard.objects.count() == 2
    assert SsoGroupRule.objects.count() == 2 and SsoSettings.objects.get().groups_claim == "roles"


def test_a_null_timeout_clears_the_stored_one() -> None:
    _write()
    _write("clusters:\n  - {name: c1, prometheus_timeout_s: null}\n")
    assert Cluster.objects.get(name="c1").prometheus_timeout_s is None


def test_a_new_cluster_without_a_url_takes_the_settings(settings: Any) -> None:
    settings.FLEETWATT_CLUSTER = "default"
    settings.FLEETWATT_PROMETHEUS_URL = "http://victoria:8428"
    settings.FLEETWATT_SCRAPE_INTERVAL_S = 30
    _write("clusters:\n  - {name: default}\n")
    cluster = Cluster.objects.get(name="default")
    assert (cluster.prometheus_url, cluster.scrape_interval_s) == ("http://victoria:8428", 30)


def test_the_sso_mapping_becomes_exactly_the_files_in_its_order() -> None:
    _write()
    report = _write(**{"map: [{group: ml, role: member, team: vision}, {group: money, role: finance}]":
                       "map: [{group: admins, role: admin}, {group: ml, role: lead, team: vision}]"})  # fmt: skip
    rules = list(SsoGroupRule.objects.order_by("position").values_list("group", "role", "team__name"))
    assert rules == [("admins", "admin", None), ("ml", "lead", "vision")]
    assert report.counts["sso"].deleted == 2


def test_a_rule_given_to_another_team_moves_to_it() -> None:
    _write()
    _write(**{"{name: vision, display_name: Vision, rules: [{kind: slurm_account, value: vision}]}":
              "{name: nlp, rules: [{kind: slurm_account, value: vision, priority: 5}]}"})  # fmt: skip
    rule = TeamRule.objects.get()
    assert (rule.team.name, rule.priority) == ("nlp", 5)
    assert set(Team.objects.values_list("name", flat=True)) == {"vision", "nlp"}  # deletes no team


def test_a_changed_job_group_is_named_for_the_regrouping() -> None:
    _write()
    group = JobGroup.objects.get()
    report = _write(**{"match_value: sweep-": "match_value: sweep"})
    assert report.changed_group_ids == [group.pk]


def test_the_report_lines() -> None:
    report = ApplyReport(counts={"sites": Counts(created=1), "shards": Counts(unchanged=2, deleted=1)})
    assert report.lines() == [
        "sites             1 created, 0 updated, 0 unchanged",
        "shards            0 created, 0 updated, 2 unchanged, 1 deleted",
        "nodes             0 given a server type, 0 unchanged, 0 unmatched",
    ]
    report.jobs_regrouped, report.gpu_hours_refreshed, report.affected_cluster_ids = 3, 40, [1, 2]
    assert report.lines()[-2:] == [
        "job groups        3 jobs regrouped",
        "footprints        40 GPU-hours recomputed on 2 cluster(s)",
    ]
    assert report.changed and not ApplyReport().changed
