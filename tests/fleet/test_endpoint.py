"""A cluster's connection settings (apps.fleet.endpoint): checked without repeating a secret, resolved from
the environment, refused in clear by the model (and so by the admin), which shows names, never values."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from apps.fleet.endpoint import (
    EndpointSettings,
    EndpointSettingsError,
    endpoint_resolve,
    env_name_problem,
    headers_problems,
)
from apps.fleet.models import Cluster


def _resolve(environ: dict[str, str] | None = None, **given: Any):
    settings = EndpointSettings(cluster="a", url="http://prom:9090", **given)
    return endpoint_resolve(settings, environ=environ or {}, default_timeout_s=60.0)


def test_nothing_set_sends_nothing_and_waits_the_default_timeout() -> None:
    connection = _resolve()
    assert (dict(connection.headers), connection.basic_auth, connection.ca_file, connection.timeout_s) == (
        {}, None, None, 60.0
    )  # fmt: skip


def test_the_secrets_are_read_from_the_environment() -> None:
    connection = _resolve(
        {"PROM_TOKEN": "tok", "TENANT_KEY": "k"},
        bearer_token_env="PROM_TOKEN",
        headers={"X-Scope-OrgID": "tenant-a", "X-Api-Key": "${TENANT_KEY}"},
        ca_file="/etc/ssl/prom.pem",
        timeout_s=5.0,
    )
    assert dict(connection.headers) == {"X-Scope-OrgID": "tenant-a", "X-Api-Key": "k", "Authorization": "Bearer tok"}
    assert (connection.ca_file, connection.timeout_s) == ("/etc/ssl/prom.pem", 5.0)
    assert "tok" not in repr(connection)  # logged connections hide what they send


def test_basic_auth_takes_its_password_from_the_environment() -> None:
    connection = _resolve({"PROM_PASSWORD": "pw"}, basic_auth_user="ada", basic_auth_password_env="PROM_PASSWORD")
    assert connection.basic_auth == ("ada", "pw")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"bearer_token_env": "PROM_TOKEN"},
            "environment variable PROM_TOKEN (prometheus_bearer_token_env) is not set",
        ),
        ({"basic_auth_user": "ada", "basic_auth_password_env": "PROM_PASSWORD"}, "PROM_PASSWORD"),
        ({"headers": {"X-Api-Key": "${KEY}"}}, "environment variable KEY (header X-Api-Key) is not set"),
        ({"bearer_token_env": "T", "basic_auth_user": "ada"}, "not both"),
        ({"basic_auth_password_env": "PROM_PASSWORD"}, "without prometheus_basic_auth_user"),
        ({"timeout_s": 0.0}, "prometheus_timeout_s"),
    ],
    ids=["token-unset", "password-unset", "header-unset", "token-and-basic", "password-without-user", "timeout"],
)
def test_unusable_settings_are_an_error_naming_the_cluster(given: dict[str, Any], message: str) -> None:
    with pytest.raises(EndpointSettingsError) as raised:
        _resolve({"T": "x"}, **given)
    assert str(raised.value).startswith("cluster a: ") and message in str(raised.value)


def test_an_empty_variable_counts_as_unset() -> None:
    with pytest.raises(EndpointSettingsError, match="PROM_TOKEN"):
        _resolve({"PROM_TOKEN": ""}, bearer_token_env="PROM_TOKEN")


@pytest.mark.parametrize("value", ["eyJhbGciOiJIUzI1NiJ9.e30.abc", "glc_abcdef0123456789", "Bearer x", "prom_token"])
def test_a_secret_where_a_variable_name_belongs_is_refused_without_repeating_it(value: str) -> None:
    problem = env_name_problem(value, example="PROM_TOKEN")
    assert problem is not None and value not in problem


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Authorization": "${X}"}, "set by prometheus_bearer_token_env or basic auth"),
        ({"Cookie": "session=abc"}, "Cookie carries a secret"),
        ({"X-Api-Key": "abc"}, "X-Api-Key carries a secret"),
        ({"Bad Name": "x"}, "is not an HTTP header name"),
        ({"X-Scope-OrgID": "a\nb"}, "one-line string"),
        (["X-Scope-OrgID"], "expected a mapping"),
    ],
)
def test_wrong_headers_are_named(headers: Any, problem: str) -> None:
    problems = headers_problems(headers)
    assert any(problem in p for p in problems), problems
    assert "abc" not in " ".join(problems)


@pytest.mark.django_db
def test_the_model_refuses_a_secret_in_clear() -> None:
    cluster = Cluster(
        name="a",
        prometheus_url="http://prometheus.example:9090",
        prometheus_bearer_token_env="glc_eyJvIjoiMTIzNCJ9",
        prometheus_headers={"X-Api-Key": "abc"},
    )
    with pytest.raises(ValidationError) as raised:
        cluster.full_clean()
    assert set(raised.value.message_dict) == {"prometheus_bearer_token_env", "prometheus_headers"}


@pytest.mark.django_db
def test_the_admin_shows_the_settings_never_a_secret(admin_client, monkeypatch) -> None:
    monkeypatch.setenv("FW_ADMIN_TOKEN", "the-secret-value")
    cluster = Cluster.objects.create(
        name="a",
        prometheus_url="http://prom:9090",
        prometheus_bearer_token_env="FW_ADMIN_TOKEN",
        prometheus_headers={"X-Scope-OrgID": "tenant-a"},
        prometheus_ca_file="/etc/ssl/prom.pem",
    )
    page = admin_client.get(f"/admin/fleet/cluster/{cluster.pk}/change/").content.decode()
    for shown in ("FW_ADMIN_TOKEN", "tenant-a", "/etc/ssl/prom.pem", "prometheus_timeout_s"):
        assert shown in page
    assert "the-secret-value" not in page
