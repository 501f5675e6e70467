"""python manage.py simulate history|serve --scenario NAME_OR_FILE [--start ISO] ..."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.simulator.engine import FleetSimulation
from apps.simulator.exposition import openmetrics_write, truth_write
from apps.simulator.scenario import ScenarioError, scenario_load
from apps.simulator.server import serve


class Command(BaseCommand):
    help = "Simulate a GPU fleet: write its history as OpenMetrics (for promtool) and its truth, or serve it live."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("history", "serve"):
            p = sub.add_parser(name)
            p.add_argument("--scenario", default="demo", help="a shipped scenario name or a YAML file")
            p.add_argument("--start", help="override the scenario's start (ISO 8601), e.g. to resume it live")
        history = sub.choices["history"]
        history.add_argument("--out", required=True, type=Path, help="OpenMetrics file to write")
        history.add_argument("--truth", type=Path, help="JSON file for the true answer of every job")
        history.add_argument("--until", help="stop the history at this time (ISO 8601; default: the end)")
        history.add_argument("--label", action="append", default=[], help="extra label k=v on every series")
        history.add_argument(
            "--chunk-hours",
            type=int,
            default=0,
            help="write one file per this many hours (OUT.0000.om, ...): promtool reads a file once per 2-hour "
            "block it writes, so a week goes much faster in day-sized files",
        )
        serve_p = sub.choices["serve"]
        serve_p.add_argument("--listen", default="127.0.0.1:9400")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            now = datetime.fromisoformat(str(options["start"]).replace("Z", "+00:00")) if options["start"] else None
            scenario = scenario_load(str(options["scenario"]), now=now)
            if now is not None:
                scenario.start = now
        except (ScenarioError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        sim = FleetSimulation(scenario)
        if options["action"] == "serve":
            host, _, port = str(options["listen"]).rpartition(":")
            self.stdout.write(
                f"Serving {scenario.name} on http://{host}:{port}/metrics (start {scenario.start.isoformat()})"
            )
            serve(sim, host, int(port))
            return
        times = sim.scrapes
        if options["until"]:
            until = datetime.fromisoformat(str(options["until"]).replace("Z", "+00:00")).timestamp() - scenario.t0
            times = times[times < until]
        labels = dict(item.split("=", 1) for item in options["label"])
        started = time.perf_counter()
        out: Path = options["out"]
        out.parent.mkdir(parents=True, exist_ok=True)
        chunk_s = int(options["chunk_hours"]) * 3600
        if chunk_s:
            written = 0
            for k, first in enumerate(range(0, int(times[-1]) + 1, chunk_s)):
                part = times[(times >= first) & (times < first + chunk_s)]
                with out.with_name(f"{out.name}.{k:04d}.om").open("w") as f:
                    written += openmetrics_write(sim.series(np.asarray(part)), f, extra_labels=labels)
        else:
            with out.open("w") as f:
                written = openmetrics_write(sim.series(np.asarray(times)), f, extra_labels=labels)
        if options["truth"]:
            truth_write(sim, options["truth"])
        self.stdout.write(
            f"{scenario.name}: {len(scenario.nodes)} nodes, {sum(n.gpus for n in scenario.nodes)} GPUs, "
            f"{len(scenario.jobs)} jobs; {written} samples in {time.perf_counter() - started:.1f}s -> {out}"
        )
        self.stdout.write(f"samples={written}")
