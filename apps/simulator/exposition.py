"""Writing the simulator's series: OpenMetrics history for promtool, Prometheus text for live scrapes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from .engine import FAMILY_TYPES, HELP, FleetSimulation, Series


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())


def _family_name(name: str) -> str:
    """OpenMetrics names a counter family without its _total suffix."""
    return name[: -len("_total")] if name.endswith("_total") else name


def openmetrics_write(series: Iterable[Series], out: TextIO, *, extra_labels: dict[str, str] | None = None) -> int:
    """Write series grouped by family (OpenMetrics wants each family in one block), samples in time
    order; returns the number of samples written, to compare with what promtool reports."""
    by_family: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        if len(s.times):
            by_family[s.family].append(s)
    written = 0
    extra = extra_labels or {}
    for name in sorted(by_family):
        family = _family_name(name)
        kind = FAMILY_TYPES[name]
        if kind == "counter" and not name.endswith("_total"):
            kind = "unknown"  # dcgm-exporter's energy counter has no _total suffix
        out.write(f"# HELP {family} {HELP[name]}\n# TYPE {family} {kind}\n")
        for s in by_family[name]:
            prefix = f"{name}{{{_labels({**s.labels, **extra})}}} "
            pairs = zip(s.values.tolist(), s.times.tolist(), strict=True)
            out.write("".join(f"{prefix}{v!r} {t:.3f}\n" for v, t in pairs))
            written += len(s.times)
    out.write("# EOF\n")
    return written


MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class WrittenSamples:
    """How many samples a history file holds, and how many on each UTC day (days since the epoch: count)."""

    count: int
    per_day: dict[int, int]


def import_text_write(
    series: Iterable[Series], out: TextIO, *, extra_labels: dict[str, str] | None = None
) -> WrittenSamples:
    """Write series as Prometheus text exposition lines with millisecond timestamps, what VictoriaMetrics's
    /api/v1/import/prometheus reads; returns what was written, to check what the engine holds. The timestamps
    are the OpenMetrics file's own digits (`openmetrics_write`), so both engines hold the very same samples."""
    per_day: Counter[int] = Counter()
    extra = extra_labels or {}
    for s in series:
        if not len(s.times):
            continue
        prefix = f"{s.family}{{{_labels({**s.labels, **extra})}}} "
        stamps = [_milliseconds(t) for t in s.times.tolist()]
        out.write("".join(f"{prefix}{v!r} {ms}\n" for v, ms in zip(s.values.tolist(), stamps, strict=True)))
        per_day.update(int(ms) // MS_PER_DAY for ms in stamps)
    return WrittenSamples(sum(per_day.values()), dict(per_day))


def _milliseconds(t_s: float) -> str:
    """Seconds as whole milliseconds, rounded exactly as `openmetrics_write` prints them (`{t:.3f}`)."""
    return f"{t_s:.3f}".replace(".", "")


def text_exposition(sim: FleetSimulation, at_s: float) -> str:
    """The live /metrics page at one instant (seconds since the scenario's start)."""
    times = np.array([float(at_s)])
    by_family: dict[str, list[str]] = defaultdict(list)
    for s in sim.series(times):
        if len(s.values):
            by_family[s.family].append(f"{s.family}{{{_labels(s.labels)}}} {float(s.values[-1])!r}")
    lines = []
    for name in sorted(by_family):
        kind = FAMILY_TYPES[name] if name.endswith("_total") or FAMILY_TYPES[name] == "gauge" else "untyped"
        lines.append(f"# HELP {name} {HELP[name]}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(by_family[name])
    return "\n".join(lines) + "\n"


def truth_write(sim: FleetSimulation, path: Path) -> None:
    sc = sim.sc
    truth = sim.truth()
    doc = {
        "scenario": sc.name,
        "start": sc.start.isoformat(),
        "duration_s": sc.duration_s,
        "scrape_interval_s": sc.scrape_interval_s,
        "jobs": {
            key: {**asdict(t), "coverage": t.coverage, "attribution": t.attribution} for key, t in sorted(truth.items())
        },
    }
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))
