"""A scheduler's records checked before they are stored (pure: plain data in, plain data out).

A scheduler's answer is input like a client's: sacct may print bytes that are not UTF-8, slurmrestd or a
Prometheus may answer with a wrong type, a time in 1970 or in 2286, a name of 10,000 characters. What
`record_checked` does with each field (docs/schedulers.md, "Answers that cannot be stored"):

- the job's **name** is its user's free text (`sbatch -J`): kept, made storable (apps.jobs.identity): bytes that
  are not UTF-8 (read as lone surrogates, `surrogateescape`) and control characters become U+FFFD, and a name
  longer than the column is cut (ending in "…"). Each repair is a note naming the record; the record is stored.
- the **job key** and **group key** (`k8s/<namespace>/<pod>` may pass the column's 255 characters) are stored as
  the agent's are (apps.jobs.identity.key_storable), so that the two still meet.
- every other field (ids, user, account, partition, QOS, namespace, pod, group, labels, node names, times,
  GPU counts, exit codes) is the scheduler's own: one that cannot be stored as it is (too long, a control
  character, a byte that is not UTF-8, a time outside 2000 to a day past the read, a count or code out of range)
  raises `SchedulerDataError` naming the record and the field, and the window is refused whole, as any answer
  that is not what the scheduler prints (nothing written, the cluster's `scheduler_status` says why).
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from apps.jobs.identity import TEXT_MAX, key_storable, text_storable

from .slurm import SchedulerDataError, SchedulerJob

LABEL_MAX = 1000  # a pod label's name or value (Kubernetes allows 63 for a value, 317 for a name)
NODE_MAX = 255  # a node's hostname (Node.hostname)
TIME_MIN = datetime(2000, 1, 1, tzinfo=UTC)
TIME_AHEAD = timedelta(days=1)  # a time may be this far past the read (clocks apart), no further
GPUS_MAX = 100_000  # GPUs one job asks for or holds
CODE_MAX = 2**31 - 1  # an exit code or a signal (an integer column)

_IDENTITY = ("job_id", "display_id", "user", "account", "partition", "qos", "namespace", "pod", "cluster",
             "state_raw")  # fmt: skip
_TIMES = ("submit", "start", "end")


def _unstorable(char: str) -> bool:
    """A character Postgres cannot hold (NUL, a lone surrogate: a byte that was not UTF-8) or a control one."""
    return unicodedata.category(char) in ("Cc", "Cs")


def _where(record: SchedulerJob) -> str:
    return f"job {record.job_id or record.job_key!r}"[:80]


def _shown(text: str) -> str:
    return repr(text[:40]) + (f" ({len(text):,} characters)" if len(text) > 40 else "")


def _checked_text(value: str, *, where: str, limit: int) -> None:
    if len(value) > limit:
        raise SchedulerDataError(f"{where} is longer than {limit} characters: {_shown(value)}")
    bad = next((c for c in value if _unstorable(c)), None)
    if bad is not None:
        kind = "a byte that is not UTF-8" if unicodedata.category(bad) == "Cs" else f"the control character {bad!r}"
        raise SchedulerDataError(f"{where} holds {kind}: {_shown(value)}")


def record_checked(record: SchedulerJob, *, now: datetime) -> tuple[SchedulerJob, list[str]]:
    """The record as it can be stored, and notes on what was repaired (its name); SchedulerDataError naming the
    record and the field where a field of the scheduler's own cannot be stored."""
    where = _where(record)
    for name in _IDENTITY:
        _checked_text(getattr(record, name), where=f"{where} {name}", limit=TEXT_MAX)
    for key, value in record.labels.items():
        _checked_text(key, where=f"{where} label name", limit=LABEL_MAX)
        _checked_text(value, where=f"{where} label {key[:40]!r}", limit=LABEL_MAX)
    for node in record.nodes:
        _checked_text(node, where=f"{where} node", limit=NODE_MAX)
    latest = now + TIME_AHEAD
    for name in _TIMES:
        moment = getattr(record, name)
        if moment is not None and not TIME_MIN <= moment <= latest:
            raise SchedulerDataError(
                f"{where} {name} is {moment.isoformat()}: not between {TIME_MIN:%Y-%m-%d} and a day after the read"
            )
    for name in ("gpus_requested", "gpus_allocated"):
        count = getattr(record, name)
        if not 0 <= count <= GPUS_MAX:
            raise SchedulerDataError(f"{where} {name} is {count}: not from 0 to {GPUS_MAX:,}")
    for name in ("exit_code", "signal"):
        code = getattr(record, name)
        if code is not None and not 0 <= code <= CODE_MAX:
            raise SchedulerDataError(f"{where} {name} is {code}: not from 0 to {CODE_MAX:,}")
    name, changes = text_storable(record.name)
    key, group = key_storable(record.job_key), key_storable(record.group_key)
    notes = [f"{where}: its name: {change}" for change in changes]
    for what, before, after in (("key", record.job_key, key), ("group key", record.group_key, group)):
        if after != before:
            notes.append(f"{where}: its {what} {before[:60]!r}... stored as {after!r}")
    if not notes:
        return record, []
    return replace(record, name=name, job_key=key, group_key=group), notes


def records_checked(records: list[SchedulerJob], *, now: datetime) -> tuple[list[SchedulerJob], list[str]]:
    """Every record checked (record_checked); all or nothing: the first that cannot be stored raises."""
    checked: list[SchedulerJob] = []
    notes: list[str] = []
    for record in records:
        fixed, said = record_checked(record, now=now)
        checked.append(fixed)
        notes += said
    return checked, notes
