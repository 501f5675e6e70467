"""A Prometheus of our own (apps/simulator/local_prometheus.py): history backfilled by promtool with every sample
kept (a sample it drops is an error, not silence), a config with or without targets, a server that starts on a free
port, answers what was backfilled, and stops. Loaded with whole scenarios: tests/conftest.py's history_loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import yaml

from apps.simulator.local_prometheus import (
    LocalPrometheus,
    LocalPrometheusError,
    blocks_create,
    config_write,
    free_port,
)

T = 1_793_613_600  # 2026-11-02 10:00 UTC


def _history(path: Path, *stamps: int) -> Path:
    samples = "".join(f'x_total{{gpu="0"}} {n + 1} {t}.000\n' for n, t in enumerate(stamps))
    path.write_text(f"# HELP x_total a counter\n# TYPE x_total counter\n{samples}# EOF\n")
    return path


def test_a_free_port_can_be_bound() -> None:
    port = free_port()
    assert 1024 < port < 65536


def test_a_config_with_targets_scrapes_them_and_one_without_scrapes_nothing(tmp_path: Path) -> None:
    config_write(tmp_path / "a.yml", targets=["127.0.0.1:9100", "n2:9877"], scrape_interval_s=30, job="fleet")
    scraping = yaml.safe_load((tmp_path / "a.yml").read_text())
    assert scraping["global"]["scrape_interval"] == "30s"
    targets = [{"targets": ["127.0.0.1:9100", "n2:9877"]}]
    assert scraping["scrape_configs"] == [{"job_name": "fleet", "scrape_interval": "30s", "static_configs": targets}]
    config_write(tmp_path / "b.yml", targets=[], scrape_interval_s=30)
    assert yaml.safe_load((tmp_path / "b.yml").read_text())["scrape_configs"] == []


def test_promtool_keeps_every_sample_or_the_backfill_fails(tmp_path: Path) -> None:
    out = blocks_create(_history(tmp_path / "h.om", T, T + 15, T + 30), tmp_path / "data", expected_samples=3)
    assert "NUM SAMPLES" in out
    with pytest.raises(LocalPrometheusError, match="promtool kept 2 of 5 samples"):
        blocks_create(_history(tmp_path / "g.om", T, T + 15), tmp_path / "data2", expected_samples=5)
    (tmp_path / "bad.om").write_text("not openmetrics\n")
    with pytest.raises(LocalPrometheusError, match="promtool failed"):
        blocks_create(tmp_path / "bad.om", tmp_path / "data3")


def test_the_server_answers_what_was_backfilled_and_stops(tmp_path: Path) -> None:
    blocks_create(_history(tmp_path / "h.om", T, T + 15), tmp_path / "data", expected_samples=2)
    config_write(tmp_path / "p.yml", targets=[], scrape_interval_s=15)
    server = LocalPrometheus(tmp_path / "data", tmp_path / "p.yml", free_port())
    server.start(log=tmp_path / "prometheus.log")
    try:
        answer = requests.get(f"{server.url}/api/v1/query", params={"query": "x_total", "time": T + 20}, timeout=10)
        [series] = answer.json()["data"]["result"]
        assert (series["metric"]["gpu"], series["value"][1]) == ("0", "2")
    finally:
        server.stop()
    assert server.process is None
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.url}/-/ready", timeout=2)


def test_a_server_that_cannot_start_says_so(tmp_path: Path) -> None:
    (tmp_path / "p.yml").write_text("global: [not, a, mapping\n")
    server = LocalPrometheus(tmp_path / "data", tmp_path / "p.yml", free_port())
    with pytest.raises(LocalPrometheusError, match="prometheus exited with"):
        server.start(log=tmp_path / "prometheus.log", timeout_s=10)
    server.stop()


def test_a_port_another_server_took_is_left_for_a_free_one(tmp_path: Path) -> None:
    # given a server on a port, as another test process's server may take the port one found free
    config_write(tmp_path / "p.yml", targets=[], scrape_interval_s=15)
    first = LocalPrometheus(tmp_path / "first", tmp_path / "p.yml", free_port())
    first.start(log=tmp_path / "first.log")
    second = LocalPrometheus(tmp_path / "second", tmp_path / "p.yml", first.port)
    try:
        # when a second starts on the same port
        second.start(log=tmp_path / "second.log")
        # then it runs on another, and the one answering at its URL is itself, not the first
        assert second.port != first.port
        flags = requests.get(f"{second.url}/api/v1/status/flags", timeout=5).json()["data"]
        assert flags["storage.tsdb.path"] == str(tmp_path / "second")
    finally:
        second.stop()
        first.stop()


@pytest.mark.parametrize(("worker", "first"), [("gw0", 20000), ("gw1", 22000), ("gw2", 24000)])
def test_each_test_process_takes_its_ports_from_a_range_of_its_own(monkeypatch, worker: str, first: int) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    ports = {free_port() for _ in range(20)}
    assert all(first <= p < first + 2000 for p in ports)


def test_outside_a_test_process_of_several_the_kernel_picks(monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert 0 < free_port() < 65536
