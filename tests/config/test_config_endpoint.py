"""The fleet config's connection keys of a cluster (how its endpoint is reached): parsed, refused with their
path (a secret in clear above all, never repeated in the message), applied, and left as stored when left
out."""

from __future__ import annotations

from typing import Any

import pytest

from apps.config import types as cfg
from apps.config.parse import config_parse
from apps.config.selectors import known_names_read
from apps.config.types import ConfigError, KnownNames
from apps.fleet.models import Cluster
from apps.pipeline.inputs import config_apply
from apps.telemetry.prometheus import reader_for

KNOWN = KnownNames(clusters=frozenset({"mimir"}))
CONNECTION = {
    "prometheus_bearer_token_env": "MIMIR_TOKEN",
    "prometheus_headers": {"X-Scope-OrgID": "tenant-a", "X-Api-Key": "${MIMIR_KEY}"},
    "prometheus_ca_file": "/etc/ssl/mimir-ca.pem",
    "prometheus_timeout_s": 20,
}


def test_the_keys_are_the_cluster_fields() -> None:
    fields = {f.name for f in Cluster._meta.get_fields()}
    assert set(cfg.CLUSTER_ENDPOINT_KEYS) <= fields


def test_the_connection_keys_are_read() -> None:
    cluster = config_parse({"clusters": [{"name": "mimir", **CONNECTION}]}, known=KNOWN).clusters[0]
    assert (cluster.prometheus_bearer_token_env, cluster.prometheus_ca_file, cluster.prometheus_timeout_s) == (
        "MIMIR_TOKEN", "/etc/ssl/mimir-ca.pem", 20.0
    )  # fmt: skip
    assert cluster.prometheus_headers == {"X-Scope-OrgID": "tenant-a", "X-Api-Key": "${MIMIR_KEY}"}


def test_left_out_they_stay_as_stored() -> None:
    cluster = config_parse({"clusters": [{"name": "mimir"}]}, known=KNOWN).clusters[0]
    assert all(getattr(cluster, key) is None for key in cfg.CLUSTER_ENDPOINT_KEYS)


@pytest.mark.parametrize(
    ("given", "key", "problem"),
    [
        ({"prometheus_bearer_token_env": "glc_eyJvIjoiMTIzIn0"}, "prometheus_bearer_token_env", "never the secret"),
        ({"prometheus_basic_auth_password_env": "hunter2!"}, "prometheus_basic_auth_password_env", "never the secret"),
        ({"prometheus_headers": {"Authorization": "Bearer glc_eyJvIjoiMTIzIn0"}}, "prometheus_headers",
         "set by prometheus_bearer_token_env"),
        ({"prometheus_headers": {"X-Api-Key": "glc_eyJvIjoiMTIzIn0"}}, "prometheus_headers", "carries a secret"),
        ({"prometheus_headers": "X-Scope-OrgID: a"}, "prometheus_headers", "expected a mapping"),
        ({"prometheus_timeout_s": 0}, "prometheus_timeout_s", "greater than 0"),
        ({"prometheus_timeout_s": 3600}, "prometheus_timeout_s", "at most 600"),
        ({"prometheus_bearer_token_env": "T", "prometheus_basic_auth_user": "ada"}, "prometheus_basic_auth_user",
         "not both"),
    ],
    ids=["token-itself", "password-itself", "authorization-header", "secret-header", "headers-not-a-mapping",
         "no-timeout", "too-long-a-timeout", "token-and-basic"],
)  # fmt: skip
def test_a_wrong_connection_key_names_its_path(given: dict[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_parse({"clusters": [{"name": "mimir", **given}]}, known=KNOWN)
    assert any(p.startswith(f"clusters[0].{key}: ") and problem in p for p in raised.value.problems), (
        raised.value.problems
    )
    assert "glc_eyJvIjoiMTIzIn0" not in str(raised.value) and "hunter2" not in str(raised.value)


@pytest.mark.django_db
def test_applying_sets_them_and_a_later_file_without_them_keeps_them() -> None:
    # given a Mimir tenant's cluster in the file
    document = {"clusters": [{"name": "mimir", "prometheus_url": "http://mimir:8080/prometheus", **CONNECTION}]}
    # when applied
    config_apply(config=config_parse(document, known=known_names_read()))
    # then the cluster reaches its endpoint as the file says
    cluster = Cluster.objects.get(name="mimir")
    assert cluster.prometheus_bearer_token_env == "MIMIR_TOKEN"
    assert cluster.prometheus_headers == {"X-Scope-OrgID": "tenant-a", "X-Api-Key": "${MIMIR_KEY}"}
    assert (cluster.prometheus_ca_file, cluster.prometheus_timeout_s) == ("/etc/ssl/mimir-ca.pem", 20.0)
    # and a later config that leaves them out changes none of them, an empty value clears one
    config_apply(
        config=config_parse({"clusters": [{"name": "mimir", "prometheus_ca_file": ""}]}, known=known_names_read())
    )
    cluster.refresh_from_db()
    assert (cluster.prometheus_bearer_token_env, cluster.prometheus_ca_file) == ("MIMIR_TOKEN", "")


@pytest.mark.django_db
def test_a_null_timeout_clears_the_stored_one(settings, monkeypatch) -> None:
    # given a cluster whose queries wait 20 s, from an earlier file
    settings.FLEETWATT_PROMETHEUS_TIMEOUT_S = 45.0
    monkeypatch.setenv("MIMIR_TOKEN", "t0ken-from-the-environment")
    mimir = {
        "name": "mimir",
        "prometheus_url": "http://mimir:8080/prometheus",
        "prometheus_bearer_token_env": "MIMIR_TOKEN",
    }
    document = {"clusters": [{**mimir, "prometheus_timeout_s": 20}]}
    config_apply(config=config_parse(document, known=known_names_read()))
    assert Cluster.objects.get(name="mimir").prometheus_timeout_s == 20.0
    # when a later file says `prometheus_timeout_s: null`
    config_apply(
        config=config_parse({"clusters": [{"name": "mimir", "prometheus_timeout_s": None}]}, known=known_names_read())
    )
    # then the stored timeout is gone and the setting's is used; the other keys stay
    cluster = Cluster.objects.get(name="mimir")
    assert cluster.prometheus_timeout_s is None and cluster.prometheus_bearer_token_env == "MIMIR_TOKEN"
    assert reader_for(cluster).timeout_s == 45.0
