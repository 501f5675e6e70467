"""What to do about a finding, in one line with the job's own figures (pure: a finding's kind and evidence in,
words out). Shown on the job page, in the audit queue and in the weekly e-mail.

The lines follow what the field's job e-mails say (Princeton's jobstats: the figure that shows the problem, then
the change that fixes it): a memory hog frees or shares its GPU; an idle allocation asks for the GPUs it uses; a
failed run changes what made it fail (memory, time limit) and checkpoints, so that the next failure costs an hour
rather than the whole run. Kinds about the measurement (a counter reset, a conservation residual, unseen time)
are the admins' to look at, and say so."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .kinds import FlagKind

GIB = 1024**3
# Checkpoint at least this often: the longest a failure should cost (h).
CHECKPOINT_EVERY_H = 1.0


def _hours(value: Any) -> str:
    h = float(value or 0.0)
    return f"{h:,.1f} GPU-hours" if h >= 0.95 else f"{h * 60:,.0f} GPU-minutes"


def _money(evidence: Mapping[str, Any], currency: str) -> str:
    try:
        cost = Decimal(str(evidence.get("cost", "0")))
    except InvalidOperation:
        return ""
    return f" ({cost:,.2f} {currency})" if cost > 0 and currency else ""


def finding_advice(kind: str, evidence: Mapping[str, Any] | None, *, currency: str = "") -> str:
    """The line of what to do about a finding of `kind` with `evidence` (its flag's), '' for a kind with none."""
    e = evidence or {}
    money = _money(e, currency)
    match kind:
        case FlagKind.MEMORY_HOG:
            memory = float(e.get("memory_bytes") or 0) / GIB
            return (
                f"It held {memory:,.1f} GiB of GPU memory at {float(e.get('sm_percent') or 0):.1f} % SM for "
                f"{_hours(e.get('gpu_hours_blocked'))}{money}: end the notebook or server when it waits, or run it "
                "on a GPU slice (MIG) or a shared GPU (MPS) so that the GPU computes for someone."
            )
        case FlagKind.IDLE_ALLOCATION:
            unused = int(e.get("unused_gpus") or 0)
            if unused:
                used = len(e.get("gpus") or [])
                return (
                    f"It was given {used + unused} GPUs and ran on {used}: ask for {max(used, 1)} next time; the "
                    f"{unused} it never used held {_hours(e.get('unused_gpu_hours'))}{money} from other jobs."
                )
            return (
                f"Its GPU computed at {float(e.get('sm_percent') or 0):.1f} % SM for "
                f"{_hours(e.get('gpu_hours_blocked'))}{money}: ask for fewer GPUs, or none for the stages that do "
                "not compute (data preparation, waiting on input)."
            )
        case FlagKind.FAILED_RUN:
            return _failed_run_advice(e, money)
        case FlagKind.LOW_COVERAGE | FlagKind.UNOBSERVED:
            return "Nothing to change in the job: an admin checks the agent on its nodes (its energy is part estimate)."
        case FlagKind.COUNTER_RESET | FlagKind.CONSERVATION | FlagKind.ESTIMATED_OCCUPANCY:
            return "For the admins: check the node's driver and agent for that hour; no job needs to change."
        case FlagKind.ESTIMATED_INTENSITY:
            return "For the admins: import the grid's intensity for the hours that were filled in."
    return ""


def _failed_run_advice(e: Mapping[str, Any], money: str) -> str:
    held = float(e.get("gpu_hours_blocked") or 0.0)
    lost = f"{_hours(held)}{money}"
    checkpoint = (
        f" Checkpoint at least every {CHECKPOINT_EVERY_H:g} h so that a failure costs that, not the whole run."
        if held > CHECKPOINT_EVERY_H
        else ""
    )
    match e.get("state"):
        case "out_of_memory":
            return (
                f"It ran out of memory after {lost}: ask for more memory (compare the request with the job's "
                f"peak, sacct's MaxRSS) or lower the batch size, and try the change on a short run first.{checkpoint}"
            )
        case "timeout":
            return (
                f"It reached its time limit after {lost}: ask for a longer limit, or resume from a checkpoint "
                f"in a second job.{checkpoint}"
            )
        case "node_fail":
            return f"Its node failed after {lost}: nothing in the job caused it; resubmit it.{checkpoint}"
        case _:
            return (
                f"It failed after {lost}: run it on a small input or for a few steps first, so that an error "
                f"shows in minutes.{checkpoint}"
            )
