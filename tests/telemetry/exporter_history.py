"""An hour of history built from one real dcgm-exporter scrape (tests/fixtures/exporters), backfilled with promtool
into a fresh Prometheus: every series sampled each scrape interval over the hour and the one before it, gauges at the
scrape's value, the energy counter rising from the scrape's value at the scrape's own power."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from apps.simulator.local_prometheus import LocalPrometheus, blocks_create, config_write, free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exporters"
ENERGY_NAMES = ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "dcgm_total_energy_consumption")  # mJ counters
POWER_NAMES = ("DCGM_FI_DEV_POWER_USAGE", "dcgm_power_usage")
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\}\s+(\S+)\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

Series = tuple[str, dict[str, str], float]


def scrape_read(name: str) -> list[Series]:
    """(metric, labels, value) of each sample line of a fixture file."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        if match := _LINE.match(line):
            out.append((match[1], dict(_LABEL.findall(match[2])), float(match[3])))
    return out


def stored(series: list[Series], *, target: dict[str, str], honor_labels: bool) -> list[Series]:
    """The series as Prometheus stores them: the scrape target's labels added; where one clashes with the
    exporter's own, the exporter's wins (honorLabels: true) or is renamed `exported_<name>` (false). An empty
    exporter label is no label."""
    out = []
    for metric, labels, value in series:
        own = {k: v for k, v in labels.items() if v}
        merged = dict(target)
        for key, v in own.items():
            if key in target and not honor_labels:
                merged[f"exported_{key}"] = v
            else:
                merged[key] = v
        out.append((metric, merged, value))
    return out


def openmetrics(series: list[Series], *, hour_start: float, scrape_s: int) -> tuple[str, int]:
    """The hour before `hour_start` and the hour itself, one sample per scrape; returns (text, samples)."""
    power_by_gpu = {
        labels.get("UUID") or labels.get("uuid"): value for metric, labels, value in series if metric in POWER_NAMES
    }
    times = [hour_start - 3600 + i * scrape_s for i in range(2 * 3600 // scrape_s + 1)]
    families: dict[str, list[str]] = {}
    for metric, labels, value in series:
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        power_w = power_by_gpu.get(labels.get("UUID") or labels.get("uuid"), 0.0)
        lines = families.setdefault(metric, [])
        for t in times:
            v = value + power_w * 1000.0 * (t - times[0]) if metric in ENERGY_NAMES else value
            lines.append(f"{metric}{{{text}}} {v!r} {t:.3f}")
    body = "".join(f"# TYPE {m} gauge\n" + "\n".join(lines) + "\n" for m, lines in families.items())
    return body + "# EOF\n", sum(len(lines) for lines in families.values())


@contextmanager
def prometheus_with(series: list[Series], folder: Path, *, hour_start: float, scrape_s: int) -> Iterator[str]:
    """A fresh Prometheus holding the history of `series`; yields its URL."""
    text, samples = openmetrics(series, hour_start=hour_start, scrape_s=scrape_s)
    (folder / "history.om").write_text(text)
    blocks_create(folder / "history.om", folder / "data", expected_samples=samples)
    config_write(folder / "prometheus.yml", targets=[], scrape_interval_s=scrape_s)
    prometheus = LocalPrometheus(folder / "data", folder / "prometheus.yml", free_port())
    prometheus.start(log=folder / "prometheus.log")
    try:
        yield prometheus.url
    finally:
        prometheus.stop()
