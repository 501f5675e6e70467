"""A scheduler's answer is input too (issue: no input breaks it). The recorded 22.05 answer
(tests/fixtures/slurm/sacct-json-22.05.json) spoiled one way at a time, as a broken slurmdbd, a hostile user or a
wrong server would spoil it: bytes that are not UTF-8, a wrong type, a time in 1970 or 2286, a name of 10,000
characters, a job id that is not a number; and kube-state-metrics answering an infinite or absurd time.

Before: sacct printing bytes that are not UTF-8 raised UnicodeDecodeError out of the sync (no cluster named, its
status not recorded, the clusters after it not synced); a 10,000-character name failed the window's write in the
database, and stopped the others the same way; kube-state-metrics' `+Inf` start time raised OverflowError.
Now: the user's own free text (the name) is kept, made storable, and the repair logged with the cluster and the
job; anything else the scheduler says that cannot be stored refuses the window whole, naming the cluster and the
record (docs/schedulers.md, "Answers that cannot be stored"); one cluster's fault never stops the others."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apps.fleet.models import Cluster
from apps.jobs.identity import key_storable
from apps.jobs.models import Job
from apps.pipeline import scheduler as pipeline_scheduler
from apps.pipeline.scheduler import scheduler_sync, schedulers_catch_up
from apps.schedulers.kube import kube_jobs_parse
from apps.schedulers.records import record_checked
from apps.schedulers.slurm import SchedulerDataError, sacct_json_parse
from apps.schedulers.sources import SchedulerUnavailable
from tests.factories import ClusterFactory
from tests.schedulers.test_kube_parse import ALLOW, Pod, answers, sample
from tests.schedulers.test_sync import END, FIXTURES, NOW, START, fake_sacct

pytestmark = pytest.mark.django_db

RECORDED = FIXTURES / "sacct-json-22.05.json"
PARSABLE = FIXTURES / "sacct-parsable-22.05.txt"


def spoiled_sacct(tmp_path: Path, spoil: Callable[[dict[str, Any]], None] | None = None, *, raw: bytes = b"") -> str:
    """A sacct that prints the recorded answer spoiled by `spoil` (its job 2 is `jobs[1]`), or the bytes `raw`
    in place of the JSON, and the recorded parsable table."""
    document = json.loads(RECORDED.read_text())
    if spoil is not None:
        spoil(document)
    answer = tmp_path / "answer.json"
    answer.write_bytes(raw or json.dumps(document).encode())
    return fake_sacct(tmp_path, f'case "$*" in *--json*) cat {answer};; *) cat {PARSABLE};; esac')


def _with_bad_bytes(field: str) -> bytes:
    """The recorded answer with job 2's `field` holding Latin-1 bytes (not UTF-8): `r\xe9sum\xe9`."""
    document = json.loads(RECORDED.read_text())
    document["jobs"][1][field] = "@@BAD@@"
    return json.dumps(document).encode().replace(b"@@BAD@@", b"r\xe9sum\xe9")


def _cluster(tmp_path: Path, name: str, sacct: str) -> Cluster:
    return ClusterFactory(name=name, scheduler="slurm_sacct", sacct_command=sacct)


def test_a_name_with_bytes_that_are_not_utf8_is_kept_readable_and_the_repair_logged(tmp_path: Path, caplog) -> None:
    # given sacct printing job 2's name in Latin-1
    cluster = _cluster(tmp_path, "gpu-a", spoiled_sacct(tmp_path, raw=_with_bad_bytes("name")))
    # when the window is synced
    with caplog.at_level(logging.WARNING):
        report = scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    # then every job is stored, job 2's name with U+FFFD for each byte, and the log names the cluster and the job
    assert report.created == 9
    assert Job.objects.get(cluster=cluster, job_id="2").name == "r\ufffdsum\ufffd"
    assert any("gpu-a" in r.getMessage() and "job '2'" in r.getMessage() for r in caplog.records)
    cluster.refresh_from_db()
    assert cluster.scheduler_status == "" and cluster.scheduler_synced_through == END


def test_a_name_of_ten_thousand_characters_is_cut_to_its_column(tmp_path: Path, caplog) -> None:
    def long_name(document: dict[str, Any]) -> None:
        document["jobs"][1]["name"] = "x" * 10_000

    cluster = _cluster(tmp_path, "gpu-a", spoiled_sacct(tmp_path, long_name))
    with caplog.at_level(logging.WARNING):
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    name = Job.objects.get(cluster=cluster, job_id="2").name
    assert len(name) == 255 and name.endswith("…") and name.startswith("x" * 254)
    assert any("cut from 10,000 to 255 characters" in r.getMessage() for r in caplog.records)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Sets job 2's field at `path` ("time.start") to `value`."""

    def spoil(document: dict[str, Any]) -> None:
        target = document["jobs"][1]
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        target[last] = value

    return spoil


REFUSED = [
    ("user-not-utf8", None, _with_bad_bytes("user"), "job '2' user holds a byte that is not UTF-8"),
    ("account-nul", _set("account", "fw\x00team"), b"", "job '2' account holds the control character '\\x00'"),
    ("partition-long", _set("partition", "p" * 300), b"", "job '2' partition is longer than 255 characters"),
    ("start-a-string", _set("time.start", "yesterday"), b"", "job 2 time.start is not a number"),
    ("start-in-1970", _set("time.start", 1), b"", "job '2' start is 1970-01-01T00:00:01+00:00"),
    ("start-in-2286", _set("time.start", 10_000_000_000), b"", "job '2' start is 2286-11-20"),
    ("start-beyond-calendars", _set("time.start", 10**20), b"", "job 2 time.start is out of range"),
    ("job-id-not-a-number", _set("job_id", "abc"), b"", "jobs[1].job_id is not a number: 'abc'"),
    ("job-id-arabic-digits", _set("job_id", "\u0661\u0662"), b"", "jobs[1].job_id is not a number"),
    ("gpus-absurd", _set("tres.allocated", [{"type": "gres", "name": "gpu", "count": 10**12}]), b"", "gpus_allocated"),
    ("nodes-a-number", _set("nodes", 7), b"", "job 2 nodes is a int, not a string"),
    ("not-json-at-all", None, b"\xff\xfe{", "not JSON"),
]


@pytest.mark.parametrize(("spoil", "raw", "said"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_record_that_cannot_be_stored_refuses_the_window_naming_the_cluster_and_the_record(
    tmp_path: Path, spoil: Callable[[dict[str, Any]], None] | None, raw: bytes, said: str
) -> None:
    # given a cluster synced before, whose sacct now answers with one record spoiled
    mark = START - timedelta(hours=1)
    cluster = ClusterFactory(
        name="gpu-a", scheduler="slurm_sacct", sacct_command=spoiled_sacct(tmp_path, spoil, raw=raw),
        scheduler_synced_through=mark,
    )  # fmt: skip
    # when its window is synced
    with pytest.raises(SchedulerUnavailable) as refused:
        scheduler_sync(cluster=cluster, start=START, end=END, now=NOW)
    # then nothing is written, and the cluster's status names it and the record, on one line
    message = str(refused.value)
    assert message.startswith("cluster gpu-a: ") and said in message and "\n" not in message, message
    assert not Job.objects.filter(cluster=cluster).exists()
    cluster.refresh_from_db()
    assert cluster.scheduler_status == message and cluster.scheduler_synced_through == mark


def test_one_cluster_s_bad_answer_never_stops_the_others(tmp_path: Path, monkeypatch) -> None:
    # given three clusters in name order: one answers bytes that are not UTF-8 where its users are, one fails in a
    # way nobody foresaw, and one answers well
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    bad = _cluster(tmp_path, "a-bad-bytes", spoiled_sacct(tmp_path / "a", raw=_with_bad_bytes("user")))
    broken = _cluster(tmp_path, "b-broken", spoiled_sacct(tmp_path / "b"))
    good = _cluster(tmp_path, "c-good", spoiled_sacct(tmp_path / "c"))
    for cluster in (bad, broken, good):
        cluster.scheduler_synced_through = START
        cluster.save()
    real_write = pipeline_scheduler.schedulers.scheduler_records_write

    def write(*, cluster: Cluster, **kwargs: Any) -> Any:
        if cluster.name == "b-broken":
            raise RuntimeError("a fault of b-broken's\x00 own")
        return real_write(cluster=cluster, **kwargs)

    monkeypatch.setattr(pipeline_scheduler.schedulers, "scheduler_records_write", write)
    # when beat's catch-up runs
    reports = schedulers_catch_up(now=START + timedelta(hours=2))
    # then the good cluster is synced, and each of the others says why it is not, having written nothing
    assert {r.cluster for r in reports} == {"c-good"}
    assert Job.objects.filter(cluster=good).count() == 9
    assert not Job.objects.filter(cluster__in=[bad, broken]).exists()
    bad.refresh_from_db(), broken.refresh_from_db()
    assert bad.scheduler_status.startswith("cluster a-bad-bytes: job '2' user holds a byte that is not UTF-8")
    assert broken.scheduler_status.startswith("cluster b-broken: the sync failed: RuntimeError: a fault of b-broken")
    assert bad.scheduler_synced_through == broken.scheduler_synced_through == START


# --- kube-state-metrics, and the check itself (no database) ---------------------------------------------------


@pytest.mark.parametrize("value", [float("inf"), 1e20])
def test_kube_state_metrics_times_no_calendar_holds_are_refused_naming_the_pod(value: float) -> None:
    pod = Pod("search", "train-0", "uid-0")
    times = [sample({**pod.pod, "fw_q": "start"}, value)]
    with pytest.raises(SchedulerDataError, match=r"pod search/train-0 start time is out of range"):
        kube_jobs_parse(answers(pod, times=times), label_allowlist=ALLOW)


def test_kube_state_metrics_gpu_requests_that_are_not_numbers_are_refused() -> None:
    pod = Pod("search", "train-0", "uid-0", gpus_by_container={"main": 2})
    requests = [sample({**pod.pod, "container": "side", "resource": "nvidia_com_gpu", "unit": "integer"}, float("inf"))]
    with pytest.raises(SchedulerDataError, match=r"train-0 is not a number of GPUs"):
        kube_jobs_parse(answers(pod, gpu_requests=requests), label_allowlist=ALLOW)


def test_a_pod_whose_key_is_longer_than_its_column_is_stored_under_the_agent_s_key() -> None:
    name = "p" * 250  # Kubernetes allows 253: k8s/<namespace>/<pod> passes 255
    record = kube_jobs_parse(answers(Pod("search", name, "uid-0")), label_allowlist=ALLOW)[0]
    checked, notes = record_checked(record, now=datetime(2026, 11, 3, tzinfo=UTC))
    assert checked.job_key == key_storable(f"k8s/search/{name}") and len(checked.job_key) == 255
    assert checked.job_key != key_storable(f"k8s/search/{name[:-1]}q") and notes


def test_the_recorded_answer_passes_the_check_unchanged() -> None:
    for record in sacct_json_parse(RECORDED.read_text()):
        assert record_checked(record, now=NOW) == (record, [])
