"""The Kubernetes scheduler sync end to end: the simulator's kube-state-metrics series -> promtool -> a real
Prometheus -> `scheduler_sync` for a cluster with `scheduler = kube_state_metrics` -> Postgres; and what the
writer now does for Slurm's records too (array groups, missing jobs of its own scheduler only)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.carbon.models import JobGroup
from apps.fleet.models import Cluster, Team, TeamRule
from apps.jobs.models import Job, Source
from apps.jobs.states import JobState
from apps.pipeline.scheduler import scheduler_sync
from apps.schedulers.sources import SchedulerUnavailable, kube_records_read
from apps.simulator.local_prometheus import free_port
from apps.waste.models import Flag
from tests.conftest import LoadedHistory
from tests.factories import ClusterFactory, JobFactory, TeamFactory
from tests.schedulers.test_sync import END as SLURM_END
from tests.schedulers.test_sync import NOW as SLURM_NOW
from tests.schedulers.test_sync import START as SLURM_START
from tests.schedulers.test_sync import recorded_sacct

pytestmark = [pytest.mark.prometheus, pytest.mark.django_db]

T0 = datetime(2026, 11, 3, 0, 0, tzinfo=UTC)
WINDOW_END = T0 + timedelta(hours=2, minutes=30)
NOW = T0 + timedelta(days=1)


def _at(**delta: float) -> datetime:
    return T0 + timedelta(**delta)


def kube_scenario() -> dict[str, Any]:
    """Three hours of one Kubernetes node (fleetwatt-agent and dcgm-exporter on it) and its pods, one of each
    ending: read over [T0, T0 + 2h30m), train-1 succeeded, train-2 failed, embed-oom was OOMKilled, serve-0
    runs, queued-0 waits."""
    return {
        "name": "kube",
        "start": T0.isoformat(),
        "duration": "3h",
        "scrape_interval_s": 30,
        "linger_s": 120,
        "nodes": [{"hostname": "k8s-a", "gpus": 4}],
        "jobs": [
            {"scheduler": "k8s", "namespace": "search", "pod": "train-1-x7k2p", "name": "train-1", "node": "k8s-a",
             "gpus": [0, 1], "start": "10m", "end": "1h", "state": "completed", "owner_kind": "Job",
             "owner_name": "train-1", "labels": {"team": "search", "app": "train"}, "sm": 90, "power_w": 600},
            {"scheduler": "k8s", "namespace": "ads", "pod": "train-2-q9z8w", "name": "train-2", "node": "k8s-a",
             "gpus": [2], "start": "20m", "end": "1h10m", "state": "failed", "owner_kind": "Job",
             "owner_name": "train-2", "labels": {"team": "ads", "app": "train"}},
            {"scheduler": "k8s", "namespace": "search", "pod": "embed-oom", "name": "embed", "node": "k8s-a",
             "gpus": [3], "start": "30m", "end": "50m", "state": "out_of_memory",
             "labels": {"team": "search", "app": "embed"}},
            {"scheduler": "k8s", "namespace": "ads", "pod": "serve-0", "name": "serve", "node": "k8s-a",
             "gpus": [3], "start": "1h", "owner_kind": "StatefulSet", "owner_name": "serve",
             "labels": {"app": "serve"}},
            {"scheduler": "k8s", "namespace": "search", "pod": "queued-0", "name": "queued", "node": "k8s-a",
             "gpus": [2], "submit": "2h", "start": "2h45m", "owner_kind": "Job", "owner_name": "queued"},
        ],
    }  # fmt: skip


@pytest.fixture
def history(history_loader) -> LoadedHistory:
    return history_loader(kube_scenario())


@pytest.fixture
def cluster(history: LoadedHistory, cluster_for) -> Cluster:
    cluster = cluster_for(history, name="k8s")
    cluster.scheduler = Cluster.Scheduler.KUBERNETES
    cluster.save(update_fields=["scheduler"])
    return cluster


@pytest.fixture
def teams() -> dict[str, Team]:
    """search-team by the pod label team=search, ads-team by the namespace ads."""
    search, ads = TeamFactory(name="search-team"), TeamFactory(name="ads-team")
    TeamRule.objects.create(team=search, kind=TeamRule.Kind.K8S_POD_LABEL, value="team=search", priority=10)
    TeamRule.objects.create(team=ads, kind=TeamRule.Kind.K8S_NAMESPACE, value="ads", priority=20)
    return {"search": search, "ads": ads}


def _jobs(cluster: Cluster) -> dict[str, Job]:
    return {j.pod: j for j in Job.objects.filter(cluster=cluster).select_related("team", "job_group")}


def test_each_pod_is_stored_with_its_state_span_gpus_team_and_group(cluster: Cluster, teams: dict[str, Team]) -> None:
    # given the owner group of train-1
    group = JobGroup.objects.create(name="train-1", match_kind="group_key", match_value="k8s/search/Job/train-1")

    # when the window is synced
    report = scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)

    # then one job per pod, known to the scheduler only
    jobs = _jobs(cluster)
    assert set(jobs) == {"train-1-x7k2p", "train-2-q9z8w", "embed-oom", "serve-0", "queued-0"}
    assert report.created == 5 and report.missing == 0 and report.job_ids == {j.pk for j in jobs.values()}
    assert {(j.source, j.scheduler, j.node_list) for j in jobs.values()} == {(Source.SCHEDULER, "k8s", "k8s-a")}

    done = jobs["train-1-x7k2p"]
    assert (done.job_key, done.namespace, done.name) == ("k8s/search/train-1-x7k2p", "search", "train-1-x7k2p")
    assert uuid.UUID(done.job_id)  # the pod's uid
    assert (done.state, done.exit_code, done.signal) == (JobState.COMPLETED, 0, 0)
    assert (done.submitted_at, done.scheduler_start) == (_at(minutes=9), _at(minutes=10))
    assert done.scheduler_end == _at(hours=1)
    assert (done.start, done.end) == (done.scheduler_start, done.scheduler_end)
    assert (done.gpus_requested, done.gpus_allocated, done.gpu_indices) == (2, 2, {})
    assert done.labels == {"team": "search", "app": "train"} and done.group_key == "k8s/search/Job/train-1"
    assert done.team == teams["search"]  # the pod label rule
    assert done.job_group == group  # the sync's derivation assigns groups: this one by its owner

    failed, oom = jobs["train-2-q9z8w"], jobs["embed-oom"]
    assert (failed.state, failed.exit_code, failed.scheduler_end) == (JobState.FAILED, None, _at(hours=1, minutes=10))
    assert failed.team == teams["ads"]  # its label is team=ads: the namespace rule
    assert (oom.state, oom.exit_code, oom.group_key, oom.team) == (JobState.OUT_OF_MEMORY, None, "", teams["search"])
    assert oom.scheduler_end == _at(minutes=50)

    running, queued = jobs["serve-0"], jobs["queued-0"]
    assert (running.state, running.scheduler_start, running.scheduler_end) == (JobState.RUNNING, _at(hours=1), None)
    assert (running.group_key, running.labels, running.team) == ("k8s/ads/StatefulSet/serve", {"app": "serve"},
                                                                 teams["ads"])  # fmt: skip
    assert (queued.state, queued.submitted_at, queued.scheduler_start) == (JobState.PENDING, _at(hours=2), None)
    assert queued.team.name == Team.UNASSIGNED and queued.gpus_requested == 1

    # the window is stored as read: watermark moved, no error
    cluster.refresh_from_db()
    assert (cluster.scheduler_synced_through, cluster.scheduler_status) == (WINDOW_END, "")
    # what follows from the states: failed runs are findings; no other job is in a group
    assert {f.job.pod for f in _failed_runs()} == {"train-2-q9z8w", "embed-oom"}
    assert [j.pod for j in jobs.values() if j.job_group] == ["train-1-x7k2p"]


def _failed_runs() -> list[Flag]:
    return list(Flag.objects.filter(kind="failed_run").select_related("job"))


def test_a_second_sync_of_the_window_writes_the_same(cluster: Cluster, teams: dict[str, Team]) -> None:
    scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    first = list(Job.objects.filter(cluster=cluster).order_by("job_key").values())
    again = scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    assert (again.created, again.updated) == (0, 5)
    assert list(Job.objects.filter(cluster=cluster).order_by("job_key").values()) == first


def test_a_later_window_finds_the_running_pod_still_running_and_the_pending_one_started(cluster: Cluster) -> None:
    scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    report = scheduler_sync(cluster=cluster, start=WINDOW_END, end=T0 + timedelta(hours=3), now=NOW)
    jobs = _jobs(cluster)
    # only the pods of the later window are in it: the ones that ended before it keep what the first said
    assert {j.pod for j in jobs.values() if j.pk in report.job_ids} == {"serve-0", "queued-0"}
    assert (jobs["queued-0"].state, jobs["queued-0"].scheduler_start) == (JobState.RUNNING, _at(hours=2, minutes=45))
    assert jobs["train-1-x7k2p"].state == JobState.COMPLETED


def test_the_cluster_selector_is_added_to_every_query(cluster: Cluster) -> None:
    # the simulator's series carry instance="simulator:9400" (tests/conftest.py)
    Cluster.objects.filter(pk=cluster.pk).update(selector='instance="simulator:9400"')
    cluster.refresh_from_db()
    assert scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW).created == 5
    Job.objects.filter(cluster=cluster).delete()
    Cluster.objects.filter(pk=cluster.pk).update(selector='instance="another-cluster:9400"')
    cluster.refresh_from_db()
    assert scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW).created == 0


def test_only_allow_listed_labels_are_kept_and_matched(cluster: Cluster, teams: dict[str, Team], settings) -> None:
    settings.FLEETWATT_K8S_POD_LABELS = ["app"]
    scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    done = _jobs(cluster)["train-1-x7k2p"]
    assert done.labels == {"app": "train"} and done.team.name == Team.UNASSIGNED


def test_the_agent_s_pods_get_the_scheduler_s_fields_and_only_its_kubernetes_jobs_can_be_missing(
    history: LoadedHistory, cluster: Cluster, teams: dict[str, Team]
) -> None:
    # given the agent's jobs of the first three hours, and two it saw in the window that kube-state-metrics
    # does not name: a pod, and a Slurm job on the same cluster
    call_command("ingest", cluster="k8s", start=T0.isoformat(), end=(T0 + timedelta(hours=3)).isoformat(), verbosity=0)
    agent_team = Job.objects.get(cluster=cluster, pod="train-1-x7k2p").team
    seen = {"start": _at(hours=1), "last_seen": _at(hours=2), "end": _at(hours=2)}
    ghost = JobFactory(cluster=cluster, job_key="k8s/search/ghost", scheduler="k8s", job_id="g", **seen)
    slurm = JobFactory(cluster=cluster, job_key="slurm/77", **seen)

    # when the window is synced
    report = scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)

    # then the agent's jobs keep their identity and team, and take the scheduler's fields
    done = Job.objects.get(cluster=cluster, pod="train-1-x7k2p")
    assert (done.source, done.team) == (Source.AGENT, agent_team)
    assert (done.state, done.scheduler_end, done.gpus_requested) == (JobState.COMPLETED, _at(hours=1), 2)
    assert done.labels == {"team": "search", "app": "train"} and done.group_key == "k8s/search/Job/train-1"
    assert (report.created, report.updated) == (0, 5)  # the agent saw every pod, queued-0 from 2h45m
    # and only the pod is missing from kube-state-metrics: a Slurm job is not its business
    ghost.refresh_from_db()
    slurm.refresh_from_db()
    assert (ghost.scheduler_missing, slurm.scheduler_missing, report.missing) == (True, False, 1)
    # nor is a pod the agent could not name (keyed by its uid) when kube-state-metrics knows that uid
    records = kube_records_read(cluster=cluster, start=T0, end=WINDOW_END)
    uid = next(r.job_id for r in records if r.pod == "train-1-x7k2p")
    unnamed = JobFactory(cluster=cluster, job_key=f"k8s/pod-uid/{uid}", scheduler="k8s", job_id=uid, **seen)
    scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    unnamed.refresh_from_db()
    assert not unnamed.scheduler_missing


# --- Prometheus unreachable or answering nonsense ---------------------------------------------------------------


def test_an_unreachable_prometheus_is_recorded_and_nothing_is_written(cluster: Cluster) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(prometheus_url=f"http://127.0.0.1:{free_port()}")
    cluster.refresh_from_db()
    with pytest.raises(SchedulerUnavailable, match=r"cluster k8s: kube-state-metrics: Prometheus at .* is unreachable"):
        scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    cluster.refresh_from_db()
    assert cluster.scheduler_status.startswith("cluster k8s: ") and "\n" not in cluster.scheduler_status
    assert (cluster.scheduler_synced_through, Job.objects.filter(cluster=cluster).count()) == (None, 0)


@pytest.fixture
def nonsense_server() -> Iterator[tuple[str, list[bytes]]]:
    """An HTTP server on a free port that answers every request with 200 and the body given to it."""
    body: list[bytes] = [b""]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body[0])

        do_GET = do_POST

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", body
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>not Prometheus</html>",
        b'{"status": "success"}',
        b'{"status": "success", "data": {"resultType": "matrix", "result": {}}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"pod": "p"}, '
        b'"value": [1, "1"]}]}}',
    ],
    ids=["not-json", "no-data", "not-a-vector", "no-namespace"],
)
def test_an_answer_that_cannot_be_read_is_recorded_and_nothing_is_written(
    nonsense_server: tuple[str, list[bytes]], answer: bytes
) -> None:
    url, body = nonsense_server
    body[0] = answer
    cluster = Cluster.objects.create(name="k8s-odd", prometheus_url=url, scheduler=Cluster.Scheduler.KUBERNETES)
    with pytest.raises(SchedulerUnavailable, match=r"^cluster k8s-odd: kube-state-metrics"):
        scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    cluster.refresh_from_db()
    assert cluster.scheduler_status.startswith("cluster k8s-odd: kube-state-metrics")
    assert not Job.objects.filter(cluster=cluster).exists() and cluster.scheduler_synced_through is None


# --- the same writer, for Slurm ---------------------------------------------------------------------------------


def test_slurm_array_tasks_get_their_array_s_group_and_pods_are_not_missing_from_sacct(tmp_path: Path) -> None:
    # given a Slurm cluster whose sacct prints the recorded 22.05 jobs (array 6: tasks 6_0, 6_1, 6_2), a group of
    # that array, and a pod the agent saw in the window on the same cluster
    cluster = ClusterFactory(scheduler="slurm_sacct", sacct_command=recorded_sacct(tmp_path))
    group = JobGroup.objects.create(name="sweep-6", match_kind="group_key", match_value="slurm-array/6")
    pod = JobFactory(cluster=cluster, job_key="k8s/ml/p", scheduler="k8s", start=SLURM_START,
                     last_seen=SLURM_START + timedelta(minutes=30))  # fmt: skip

    # when its window is synced
    report = scheduler_sync(cluster=cluster, start=SLURM_START, end=SLURM_END, now=SLURM_NOW)

    # then the array's tasks are grouped by it, the others are not, and the pod is none of sacct's business
    jobs = {j.job_id: j for j in Job.objects.filter(cluster=cluster, scheduler="slurm")}
    assert {i: (j.group_key, j.job_group) for i, j in jobs.items() if j.group_key} == {
        i: ("slurm-array/6", group) for i in ("6", "8", "9")
    }
    assert (jobs["2"].labels, jobs["2"].gpu_indices, jobs["2"].namespace) == ({}, {}, "")
    pod.refresh_from_db()
    assert report.missing == 0 and not pod.scheduler_missing


# --- the admin -----------------------------------------------------------------------------------------------


def _team_form(rule_value: str) -> dict[str, str]:
    """The admin's add-team form with one pod label rule (and the inlines' management forms)."""
    return {
        "name": "search",
        "display_name": "Search",
        "rules-TOTAL_FORMS": "1",
        "rules-INITIAL_FORMS": "0",
        "rules-0-kind": TeamRule.Kind.K8S_POD_LABEL,
        "rules-0-value": rule_value,
        "rules-0-priority": "100",
        "teammembership_set-TOTAL_FORMS": "0",
        "teammembership_set-INITIAL_FORMS": "0",
    }


def test_the_admin_offers_kubernetes_and_checks_pod_label_rules(admin_client) -> None:
    page = admin_client.get("/admin/fleet/cluster/add/")
    assert page.status_code == 200 and b'value="kube_state_metrics"' in page.content
    refused = admin_client.post("/admin/fleet/team/add/", _team_form("team"))
    assert refused.status_code == 200 and b"A pod label rule&#x27;s value is name=value" in refused.content
    assert not Team.objects.filter(name="search").exists()
    assert admin_client.post("/admin/fleet/team/add/", _team_form("team=search")).status_code == 302
    assert TeamRule.objects.get(team__name="search").value == "team=search"


# --- Slurm and Kubernetes side by side on one cluster ------------------------------------------------------


def test_a_cluster_with_slurm_and_pods_reads_both_and_marks_each_one_s_missing_jobs(
    cluster: Cluster, teams: dict[str, Team], tmp_path: Path
) -> None:
    # given a cluster whose Slurm is read by sacct (the recorded jobs) and whose pods by kube-state-metrics,
    # and an agent's Slurm job that sacct has no record of
    cluster.scheduler, cluster.kube_pods = Cluster.Scheduler.SLURM_SACCT, True
    cluster.sacct_command = recorded_sacct(tmp_path)
    cluster.save()
    ghost = JobFactory(cluster=cluster, job_key="slurm/999", scheduler="slurm", start=T0, last_seen=_at(hours=1))
    # when a window is synced
    report = scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    # then both sources' jobs are stored, and the unknown Slurm job is missing from Slurm's accounting
    pods = _jobs(cluster)
    assert pods["train-1-x7k2p"].state == JobState.COMPLETED and pods["embed-oom"].state == JobState.OUT_OF_MEMORY
    assert Job.objects.filter(cluster=cluster, scheduler="slurm", job_id="3").get().state == JobState.FAILED
    ghost.refresh_from_db()
    assert ghost.scheduler_missing and report.missing == 1


def test_one_source_that_cannot_be_read_fails_the_whole_window(cluster: Cluster, tmp_path: Path) -> None:
    # given pods that can be read beside a sacct that fails
    cluster.scheduler, cluster.kube_pods = Cluster.Scheduler.SLURM_SACCT, True
    cluster.sacct_command = str(tmp_path / "no-such-sacct")
    cluster.save()
    # when the window is synced, then nothing is written and the failure is on the cluster
    with pytest.raises(SchedulerUnavailable):
        scheduler_sync(cluster=cluster, start=T0, end=WINDOW_END, now=NOW)
    cluster.refresh_from_db()
    assert "command not found" in cluster.scheduler_status and cluster.scheduler_synced_through is None
    assert not Job.objects.filter(cluster=cluster).exists()
