"""The error bars' calibration (apps/jobs/uncertainty.py) on the accuracy runs kept in
tests/agent/fixtures/accuracy (H200 and H100: Hopper both): per split method, the half-width in use and how
often a width fitted to the other runs held each run's measurements. Each run's shares are the agent's as it
is now: its replay.json where the agent changed since the run, else its results.json.
`.venv/bin/python scripts/error_bands.py` (docs/accuracy.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apps.jobs.uncertainty import WIDTH_QUANTILE, calibrate, share_errors  # noqa: E402

RUNS = ROOT / "tests" / "agent" / "fixtures" / "accuracy"


def current_results(run: Path) -> dict[str, object]:
    """What the agent as it is now makes of a kept run (accuracy_analysis.py: replay.json, else results.json)."""
    replayed = run / "replay.json"
    doc: dict[str, object] = json.loads((replayed if replayed.exists() else run / "results.json").read_text())
    return doc


def main() -> None:
    errors = [e for run in sorted(RUNS.iterdir()) for e in share_errors(run.name, current_results(run))]
    print(f"| method | runs | measurements | half-width (points, q{WIDTH_QUANTILE:.2f}) | held out: coverage | held out: mean half-width |")
    print("| --- | --- | --- | --- | --- | --- |")
    for method, c in calibrate(errors).items():
        coverage = f"{100 * c.held_out_coverage:.1f} %" if c.held_out_coverage is not None else "n/a (fewer than 3 runs)"
        width = f"{100 * c.held_out_mean_half_width:.2f}" if c.held_out_mean_half_width is not None else "n/a"
        print(f"| {method} | {c.runs} | {c.measurements} | {100 * c.half_width:.2f} | {coverage} | {width} |")


if __name__ == "__main__":
    main()
