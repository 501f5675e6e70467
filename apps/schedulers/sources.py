"""Reading a cluster's scheduler accounting: run `sacct` (or ask slurmrestd) for the jobs of a window and
parse what it says (`apps.schedulers.slurm`), or ask the cluster's Prometheus for kube-state-metrics' pods
(`apps.schedulers.kube`). Anything that goes wrong, from a missing command to output that is not JSON or a
Prometheus that does not answer, raises `SchedulerUnavailable` with one line naming the cluster; nothing
here writes. Every record is then checked (`apps.schedulers.records`): one that cannot be stored fails the
window the same way, naming the record; a name that needed repairs (bytes that are not UTF-8, 10,000
characters) is logged with its record and kept repaired.

The window [start, end) is what sacct's `-S`/`-E` select without `--state`: every job that was eligible
before `end` and had not ended before `start`, so a job that started before the window and ran into it is
in it. Jobs that never became eligible (submitted with a future `--begin` and cancelled) are not
(docs/schedulers.md, "gotchas"). For Kubernetes it is every pod that existed at some time in the window,
as it was last seen in the window."""

from __future__ import annotations

import logging
import math
import os
import shlex
import subprocess
import unicodedata
from datetime import UTC, datetime
from typing import Any

import requests
from django.conf import settings
from django.utils import timezone

from apps.fleet.models import Cluster
from apps.telemetry.prometheus import PrometheusUnavailable, reader_for

from .kube import KubeAnswers, KubeQueries, kube_jobs_parse, kube_window
from .records import records_checked
from .slurm import SchedulerDataError, SchedulerJob, exit_codes_apply, sacct_json_parse, sacct_parsable_exit_codes

log = logging.getLogger(__name__)

SLURMDB_JOBS_PATH = "/slurmdb/v0.0.38/jobs"
_STDERR_CHARS = 300


class SchedulerUnavailable(Exception):
    """The cluster's accounting could not be read; the message is one line that names the cluster."""


def sacct_time(moment: datetime) -> str:
    """A moment as sacct's `-S`/`-E` read it: wall-clock time without a zone, in UTC (sacct runs with
    TZ=UTC: it reads times in its local zone and takes neither epoch seconds nor an offset)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def sacct_arguments(*, start: datetime, end: datetime) -> tuple[list[str], list[str]]:
    """sacct's arguments for the window's jobs as JSON (steps included: the batch step's exit code stands in
    where the job's is missing) and for their exit codes (the job lines alone: 22.05's JSON gets them wrong)."""
    window = ["-a", "-S", sacct_time(start), "-E", sacct_time(end)]
    return (
        ["--json", *window],
        ["--parsable2", "--noheader", "-X", "-o", "JobIDRaw,ExitCode", *window],
    )


def one_line(text: str, *, limit: int = _STDERR_CHARS) -> str:
    """A message as one line the cluster's `scheduler_status` can hold: no control character or byte that is not
    UTF-8 (each a U+FFFD), at most `limit` characters."""
    storable = "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cs") and not c.isspace() else c for c in text)
    line = " ".join(storable.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _decoded(output: bytes) -> str:
    """sacct's or slurmrestd's answer as text: UTF-8, a byte that is not read as a lone surrogate, so that the
    parser reads on and the check of the records names the one that holds it (apps.schedulers.records)."""
    return output.decode("utf-8", errors="surrogateescape")


def _sacct_run(cluster: Cluster, command: list[str], *, timeout_s: float) -> str:
    """sacct's standard output; SchedulerUnavailable on any failure to get it."""
    where = f"cluster {cluster.name}: {shlex.join(command[:2])}"
    try:
        done = subprocess.run(  # a fixed argument list, no shell
            command,
            capture_output=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "TZ": "UTC"},
        )
    except FileNotFoundError:
        raise SchedulerUnavailable(f"{where}: command not found (sacct_command {cluster.sacct_command!r})") from None
    except PermissionError:
        raise SchedulerUnavailable(f"{where}: not executable (sacct_command {cluster.sacct_command!r})") from None
    except subprocess.TimeoutExpired:
        raise SchedulerUnavailable(f"{where}: no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise SchedulerUnavailable(f"{where}: {one_line(str(exc))}") from None
    if done.returncode != 0:
        said = one_line((done.stderr or done.stdout).decode("utf-8", errors="replace")) or "no message"
        raise SchedulerUnavailable(f"{where}: exited {done.returncode}: {said}")
    return _decoded(done.stdout)


def sacct_records_read(*, cluster: Cluster, start: datetime, end: datetime) -> list[SchedulerJob]:
    """The jobs of [start, end) from `sacct` as the worker runs it, with exit codes from its parsable output."""
    try:
        base = shlex.split(cluster.sacct_command or "sacct")
    except ValueError as exc:
        raise SchedulerUnavailable(f"cluster {cluster.name}: sacct_command cannot be read: {exc}") from None
    if not base:
        raise SchedulerUnavailable(f"cluster {cluster.name}: sacct_command is empty")
    json_args, parsable_args = sacct_arguments(start=start, end=end)
    timeout_s = settings.FLEETWATT_SCHEDULER_TIMEOUT_S
    # The JSON first: a job that ends between the two reads then finds its exit code in the second.
    document = _sacct_run(cluster, [*base, *json_args], timeout_s=timeout_s)
    parsable = _sacct_run(cluster, [*base, *parsable_args], timeout_s=timeout_s)
    try:
        return exit_codes_apply(sacct_json_parse(document), sacct_parsable_exit_codes(parsable))
    except SchedulerDataError as exc:
        raise SchedulerUnavailable(f"cluster {cluster.name}: {one_line(str(exc))}") from None


def _slurmrest_time(moment: datetime, now: datetime) -> str:
    """slurmrestd reads a time in its own zone, which the client cannot set; `now-N` (seconds) reads the
    same in every zone, as far off as the two clocks are."""
    seconds = math.floor((now - moment).total_seconds())
    return f"now-{seconds}" if seconds >= 0 else f"now+{-seconds}"


def slurmrest_records_read(*, cluster: Cluster, start: datetime, end: datetime) -> list[SchedulerJob]:
    """The jobs of [start, end) from slurmrestd's accounting endpoint (the same document as `sacct --json`;
    on 22.05 with the same exit-code bug, and no parsable output to correct it: a failed job's code stays
    unknown)."""
    if not cluster.slurmrest_url:
        raise SchedulerUnavailable(f"cluster {cluster.name}: slurmrest_url is empty")
    if not cluster.slurmrest_token_env:
        raise SchedulerUnavailable(f"cluster {cluster.name}: slurmrest_token_env names no environment variable")
    token = os.environ.get(cluster.slurmrest_token_env)
    if not token:
        raise SchedulerUnavailable(
            f"cluster {cluster.name}: environment variable {cluster.slurmrest_token_env} (slurmrestd's JWT) is not set"
        )
    headers = {"X-SLURM-USER-TOKEN": token, "Accept": "application/json"}
    if cluster.slurmrest_user:
        headers["X-SLURM-USER-NAME"] = cluster.slurmrest_user
    now = timezone.now()
    params = {"start_time": _slurmrest_time(start, now), "end_time": _slurmrest_time(end, now)}
    url = cluster.slurmrest_url.rstrip("/") + SLURMDB_JOBS_PATH
    where = f"cluster {cluster.name}: GET {url}"
    try:
        response = requests.get(url, params=params, headers=headers, timeout=settings.FLEETWATT_SCHEDULER_TIMEOUT_S)
    except requests.Timeout:
        raise SchedulerUnavailable(f"{where}: no answer within {settings.FLEETWATT_SCHEDULER_TIMEOUT_S:g} s") from None
    except requests.RequestException as exc:
        raise SchedulerUnavailable(f"{where}: {one_line(str(exc))}") from None
    if response.status_code != 200:
        raise SchedulerUnavailable(f"{where}: HTTP {response.status_code}: {one_line(response.text)}")
    try:
        return sacct_json_parse(_decoded(response.content))
    except SchedulerDataError as exc:
        raise SchedulerUnavailable(f"{where}: {one_line(str(exc))}") from None


def kube_records_read(*, cluster: Cluster, start: datetime, end: datetime) -> list[SchedulerJob]:
    """The pods of [start, end) from kube-state-metrics' series in the cluster's own Prometheus (its
    `prometheus_url`, its `selector` added to every query): a fixed handful of queries over the whole
    cluster, each evaluated at the window's end (apps.schedulers.kube)."""
    at, range_ms = kube_window(start, end)
    queries = KubeQueries(cluster_selector=cluster.selector, range_ms=range_ms)
    try:
        reader = reader_for(cluster)
    except PrometheusUnavailable as exc:  # its connection settings cannot be used: nothing asked
        raise SchedulerUnavailable(f"cluster {cluster.name}: kube-state-metrics: {one_line(exc.detail)}") from None
    answers: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, query in queries.by_answer().items():
            answers[name] = reader.instant(query, at=at)
        return kube_jobs_parse(KubeAnswers(**answers), label_allowlist=settings.FLEETWATT_K8S_POD_LABELS)
    except PrometheusUnavailable as exc:
        raise SchedulerUnavailable(f"cluster {cluster.name}: kube-state-metrics: {one_line(exc.detail)}") from None
    except (KeyError, TypeError) as exc:  # a 200 answer without Prometheus's data.result: another server
        raise SchedulerUnavailable(
            f"cluster {cluster.name}: kube-state-metrics: {reader.url} did not answer as Prometheus does "
            f"({type(exc).__name__}: {one_line(str(exc))})"
        ) from None
    except SchedulerDataError as exc:
        raise SchedulerUnavailable(
            f"cluster {cluster.name}: kube-state-metrics answer from {reader.url} cannot be read: {one_line(str(exc))}"
        ) from None
    finally:
        reader.close()


def _source_records_read(source: str, cluster: Cluster, start: datetime, end: datetime) -> list[SchedulerJob]:
    """The jobs of [start, end) from one of the cluster's sources."""
    match source:
        case Cluster.Scheduler.SLURM_SACCT:
            return sacct_records_read(cluster=cluster, start=start, end=end)
        case Cluster.Scheduler.SLURM_REST:
            return slurmrest_records_read(cluster=cluster, start=start, end=end)
        case Cluster.Scheduler.KUBERNETES:
            return kube_records_read(cluster=cluster, start=start, end=end)
    raise SchedulerUnavailable(f"cluster {cluster.name}: unknown scheduler {source!r}")


def scheduler_records_read(
    *, cluster: Cluster, start: datetime, end: datetime, now: datetime | None = None
) -> list[SchedulerJob]:
    """The jobs of [start, end) from every source the cluster names (`Cluster.scheduler_sources`): its
    scheduler, and kube-state-metrics' pods beside Slurm, each checked as it can be stored (no record's time may
    pass the read, the clock's time or the sync's `now` if later, by more than a day). All or nothing: one source
    that cannot be read, or one record that cannot be stored, fails the window, so that no job is marked missing
    from a window only half read."""
    sources = cluster.scheduler_sources()
    if not sources:
        raise SchedulerUnavailable(f"cluster {cluster.name}: no scheduler configured")
    records = [record for source in sources for record in _source_records_read(source, cluster, start, end)]
    read_at = max(timezone.now(), now or end, end)  # (a sync's `now` may be set: the clock's is the bound)
    try:
        checked, notes = records_checked(records, now=read_at)
    except SchedulerDataError as exc:
        raise SchedulerUnavailable(f"cluster {cluster.name}: {one_line(str(exc))}") from None
    for note in notes:
        log.warning("scheduler sync: cluster %s: %s", cluster.name, note)
    return checked
