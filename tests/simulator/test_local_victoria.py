"""A VictoriaMetrics of our own and vmauth in front of it (apps/simulator/local_victoria.py): the auth config of one
user by token or by name and password, quoted; a certificate for 127.0.0.1; a server on a free port that counts the
samples it holds, behind a vmauth over TLS that lets only its user through. The ingest through them:
tests/telemetry/test_endpoint_connection.py; loaded with whole scenarios: tests/conftest.py's victoria loader."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from apps.simulator.local_victoria import (
    VICTORIA_QUERY_FLAGS,
    LocalVictoria,
    LocalVmauth,
    local_tls_certificate,
    vmauth_config_write,
)

T_MS = 1_793_613_600_000  # 2026-11-02 10:00 UTC


def test_the_auth_config_of_one_user_by_token_or_by_name(tmp_path: Path) -> None:
    vmauth_config_write(tmp_path / "t.yml", upstream="http://127.0.0.1:8428", bearer_token='to"k\\en')
    assert yaml.safe_load((tmp_path / "t.yml").read_text()) == {
        "users": [{"bearer_token": 'to"k\\en', "url_prefix": "http://127.0.0.1:8428"}]
    }
    vmauth_config_write(tmp_path / "b.yml", upstream="http://u", username="fleet", password="p w")
    assert yaml.safe_load((tmp_path / "b.yml").read_text())["users"] == [
        {"username": "fleet", "password": "p w", "url_prefix": "http://u"}
    ]
    with pytest.raises(ValueError, match="a bearer token or a username"):
        vmauth_config_write(tmp_path / "n.yml", upstream="http://u")


def test_the_certificate_is_for_127_0_0_1(tmp_path: Path) -> None:
    cert, key = local_tls_certificate(tmp_path / "tls")
    text = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert "IP Address:127.0.0.1" in text and key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    ssl.create_default_context(cafile=str(cert))  # a bundle the client can trust


@pytest.fixture(scope="module")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalVictoria]:
    folder = tmp_path_factory.mktemp("victoria")
    server = LocalVictoria(folder / "data")
    server.start(log=folder / "victoria.log")
    yield server
    server.stop()


def test_the_server_answers_as_prometheus_does_and_counts_its_samples(victoria: LocalVictoria) -> None:
    assert "-search.latencyOffset=0s" in VICTORIA_QUERY_FLAGS
    lines = "".join(f'x_total{{gpu="{g}"}} {v} {T_MS + 15_000 * v}\n' for g in (0, 1) for v in range(3))
    requests.post(f"{victoria.url}/api/v1/import/prometheus", data=lines, timeout=30).raise_for_status()
    requests.get(f"{victoria.url}/internal/force_flush", timeout=30).raise_for_status()
    assert victoria.samples_count() == 6
    answer = requests.get(f"{victoria.url}/api/v1/query", params={"query": "sum(x_total)", "time": T_MS / 1000 + 31},
                          timeout=10).json()  # fmt: skip
    assert answer["data"]["result"][0]["value"][1] == "4"


def test_vmauth_over_tls_lets_only_its_user_through(victoria: LocalVictoria, tmp_path: Path) -> None:
    cert, key = local_tls_certificate(tmp_path / "tls")
    vmauth_config_write(tmp_path / "auth.yml", upstream=victoria.url, bearer_token="s3cret")
    proxy = LocalVmauth(tmp_path / "auth.yml", victoria.url, tls_cert=cert, tls_key=key)
    proxy.start(log=tmp_path / "vmauth.log")
    try:
        assert proxy.url.startswith("https://127.0.0.1:")
        query = f"{proxy.url}/api/v1/query"
        refused = requests.get(query, params={"query": "1"}, verify=str(cert), timeout=10)
        allowed = requests.get(query, params={"query": "1"}, verify=str(cert), timeout=10,
                               headers={"Authorization": "Bearer s3cret"})  # fmt: skip
        assert refused.status_code in (401, 403) and allowed.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(query, timeout=10)  # not trusted without its certificate
    finally:
        proxy.stop()
    assert proxy.process is None


def test_a_port_another_server_took_is_left_for_a_free_one(victoria: LocalVictoria, tmp_path: Path) -> None:
    # when a second starts on the port the first holds (as another test process's server may take one found free)
    second = LocalVictoria(tmp_path / "second", port=victoria.port)
    try:
        second.start(log=tmp_path / "second.log")
        # then it runs on another port, and the one answering at its URL is itself
        assert second.port != victoria.port
        assert f'-storageDataPath="{tmp_path / "second"}"' in requests.get(f"{second.url}/flags", timeout=5).text
    finally:
        second.stop()
