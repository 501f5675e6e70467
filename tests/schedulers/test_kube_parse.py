"""kube-state-metrics' pod series into SchedulerJob records (apps/schedulers/kube.py): the queries, and the
answers Prometheus gives to them, shaped as kube-state-metrics v2 exports its series (internal/store/pod.go:
every pod series labelled namespace, pod, uid; `<none>` for a pod without owner); and the team rule that
reads a pod's labels. No Prometheus and no database needed; tests/schedulers/test_kube_sync.py goes through
a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apps.fleet.models import Cluster, Team, TeamRule
from apps.fleet.selectors import JobIdentity, TeamResolver
from apps.schedulers.kube import (
    KubeAnswers,
    KubeQueries,
    ksm_label_name,
    kube_jobs_parse,
    kube_window,
)
from apps.schedulers.slurm import JobState, SchedulerDataError, SchedulerJob, sacct_json_parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
EVAL = [T0.timestamp() + 86400 - 0.001]  # the answers' evaluation time (not read by the parser)
TARGET = {"job": "kube-state-metrics", "instance": "10.0.0.9:8080", "cluster": "a"}
ALLOW = ["team", "app"]


def _s(seconds: float) -> float:
    return T0.timestamp() + seconds


def sample(labels: dict[str, str], value: float = 1.0) -> dict[str, Any]:
    """One element of an instant vector, as Prometheus's API writes it (the value a string)."""
    return {"metric": {**TARGET, **labels}, "value": [EVAL[0], repr(float(value))]}


class Pod:
    """The series kube-state-metrics exports for one pod, answered as the queries of KubeQueries ask."""

    def __init__(
        self,
        namespace: str,
        name: str,
        uid: str,
        *,
        node: str = "gpu-k01",
        phase: str = "Succeeded",
        reasons: Iterable[str] = ("Completed",),
        owner: tuple[str, str] | None = ("Job", "train-1"),
        labels: dict[str, str] | None = None,
        created_s: float = 600,
        start_s: float | None = 660,
        completion_s: float | None = 3600,
        gpus_by_container: dict[str, int] | None = None,
    ) -> None:
        self.pod = {"namespace": namespace, "pod": name, "uid": uid}
        self.node, self.phase, self.reasons, self.owner = node, phase, list(reasons), owner
        self.labels = {"team": "search", "app": "train"} if labels is None else labels
        self.created_s, self.start_s, self.completion_s = created_s, start_s, completion_s
        self.gpus_by_container = {"main": 2} if gpus_by_container is None else gpus_by_container

    def answers(self) -> dict[str, list[dict[str, Any]]]:
        kind, name = self.owner or ("<none>", "<none>")
        controller = "true" if self.owner else "<none>"
        info = {**self.pod, "host_ip": "10.0.0.1", "created_by_kind": kind, "created_by_name": name}
        info |= {"priority_class": "", "host_network": "false"}
        times = [sample({**self.pod, "fw_q": "created"}, _s(self.created_s))]
        if self.start_s is not None:
            times.append(sample({**self.pod, "fw_q": "start"}, _s(self.start_s)))
        if self.completion_s is not None:
            times.append(sample({**self.pod, "fw_q": "completion"}, _s(self.completion_s)))
        return {
            "pods": [sample({k: v for k, v in {**info, "node": self.node, "pod_ip": "10.244.0.7"}.items() if v})],
            "labels": [sample({**self.pod, **{ksm_label_name(k): v for k, v in self.labels.items()}})],
            "owners": [sample({**self.pod, "owner_kind": kind, "owner_name": name, "owner_is_controller": controller})],
            "phases": [sample({**self.pod, "phase": self.phase})],
            "terminated": [sample({**self.pod, "container": "main", "reason": r}) for r in self.reasons],
            "times": times,
            "gpu_requests": [
                sample(
                    {**self.pod, "container": c, "node": self.node, "resource": "nvidia_com_gpu", "unit": "integer"}, n
                )
                for c, n in self.gpus_by_container.items()
            ],
        }


def answers(*pods: Pod, **extra: list[dict[str, Any]]) -> KubeAnswers:
    merged: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        for name, vector in pod.answers().items():
            merged.setdefault(name, []).extend(vector)
    for name, vector in extra.items():
        merged.setdefault(name, []).extend(vector)
    return KubeAnswers(**merged)


def parse_one(*pods: Pod, allow: list[str] = ALLOW, **extra: list[dict[str, Any]]) -> SchedulerJob:
    jobs = kube_jobs_parse(answers(*pods, **extra), label_allowlist=allow)
    assert len(jobs) == 1
    return jobs[0]


# --- the queries -------------------------------------------------------------------------------------------


def test_the_queries_read_the_whole_cluster_over_the_window_with_its_selector() -> None:
    # given a day's window of a cluster selected by cluster="a"
    at, range_ms = kube_window(T0, T0 + timedelta(days=1))
    queries = KubeQueries(cluster_selector='cluster="a"', range_ms=range_ms).by_answer()

    # then a fixed handful of queries, evaluated a millisecond before the end, each over the whole window
    assert at == pytest.approx(T0.timestamp() + 86400 - 0.001, abs=1e-6) and range_ms == 86_400_000
    assert set(queries) == {"pods", "labels", "owners", "phases", "terminated", "times", "gpu_requests"}
    assert queries["pods"] == 'max_over_time(kube_pod_info{cluster="a"}[86400s])'
    assert queries["phases"] == 'last_over_time(kube_pod_status_phase{cluster="a"}[86400s]) == 1'
    assert queries["terminated"] == (
        'last_over_time(kube_pod_container_status_terminated_reason{cluster="a"}[86400s]) == 1'
    )
    assert queries["gpu_requests"] == (
        'max_over_time(kube_pod_container_resource_requests{cluster="a",resource="nvidia_com_gpu",unit="integer"}'
        "[86400s])"
    )
    for metric in ("kube_pod_created", "kube_pod_start_time", "kube_pod_completion_time"):
        assert f'last_over_time({metric}{{cluster="a"}}[86400s])' in queries["times"]
    assert all('cluster="a"' in q and "pod=" not in q and "uid=" not in q for q in queries.values())


def test_a_window_that_is_not_whole_seconds_keeps_its_milliseconds() -> None:
    _, range_ms = kube_window(T0, T0 + timedelta(minutes=90, milliseconds=250))
    assert KubeQueries(cluster_selector="", range_ms=range_ms).by_answer()["pods"] == (
        "max_over_time(kube_pod_info{}[5400250ms])"
    )
    with pytest.raises(ValueError):
        kube_window(T0, T0)


@pytest.mark.parametrize(
    ("label", "prometheus"),
    [
        ("team", "label_team"),
        ("app.kubernetes.io/name", "label_app_kubernetes_io_name"),
        ("myTeam", "label_my_team"),
        ("batch.kubernetes.io/job-name", "label_batch_kubernetes_io_job_name"),
    ],
)
def test_pod_labels_are_named_as_kube_state_metrics_names_them(label: str, prometheus: str) -> None:
    assert ksm_label_name(label) == prometheus


# --- one pod -----------------------------------------------------------------------------------------------


def test_a_succeeded_pod_is_a_completed_job_with_its_span_gpus_owner_and_labels() -> None:
    # given a pod of Job train-1 that ran on gpu-k01 with two containers asking for a GPU each
    pod = Pod("search", "train-1-x7k2p", "7d2a", gpus_by_container={"main": 1, "sidecar": 1})

    # when its answers are read, keeping the team label only
    job = parse_one(pod, allow=["team"])

    # then
    assert (job.job_key, job.job_id, job.display_id, job.name) == ("k8s/search/train-1-x7k2p", "7d2a", "train-1-x7k2p",
                                                                   "train-1-x7k2p")  # fmt: skip
    assert (job.scheduler, job.namespace, job.pod) == ("k8s", "search", "train-1-x7k2p")
    assert (job.state, job.state_raw, job.exit_code, job.signal) == (JobState.COMPLETED, "Succeeded (Completed)", 0, 0)
    assert (job.submit, job.start, job.end) == (T0 + timedelta(seconds=600), T0 + timedelta(seconds=660),
                                                T0 + timedelta(hours=1))  # fmt: skip
    assert (job.gpus_requested, job.gpus_allocated, job.nodes) == (2, 2, ("gpu-k01",))
    assert job.group_key == "k8s/search/Job/train-1"
    assert dict(job.labels) == {"team": "search"}
    assert (job.user, job.account, job.partition, dict(job.gpu_indices)) == ("", "", "", {})
    assert job.is_final and not job.is_stand_in


@pytest.mark.parametrize(
    ("phase", "reasons", "state", "state_raw"),
    [
        ("Failed", ["OOMKilled"], JobState.OUT_OF_MEMORY, "Failed (OOMKilled)"),
        ("Failed", ["Error"], JobState.FAILED, "Failed (Error)"),
        ("Failed", ["Error", "OOMKilled"], JobState.OUT_OF_MEMORY, "Failed (Error, OOMKilled)"),  # main and sidecar
        ("Failed", [], JobState.FAILED, "Failed"),  # evicted: no container terminated on its own
        ("Succeeded", ["Completed"], JobState.COMPLETED, "Succeeded (Completed)"),
        ("Unknown", [], JobState.UNKNOWN, "Unknown"),
    ],
)
def test_the_state_comes_from_the_phase_and_the_containers_terminated_reasons(
    phase: str, reasons: list[str], state: JobState, state_raw: str
) -> None:
    job = parse_one(Pod("ml", "p", "u1", phase=phase, reasons=reasons))
    assert (job.state, job.state_raw) == (state, state_raw)
    # kube-state-metrics exports no exit code of a container's current termination: only success is known
    expected_exit = (0, 0) if state is JobState.COMPLETED else (None, None)
    assert (job.exit_code, job.signal) == expected_exit


def test_a_running_pod_has_no_end_even_when_a_container_terminated_before_a_restart() -> None:
    pod = Pod("ml", "serve-0", "u2", phase="Running", reasons=["OOMKilled"], completion_s=1800)
    job = parse_one(pod)
    assert (job.state, job.state_raw, job.end, job.exit_code) == (JobState.RUNNING, "Running", None, None)
    assert job.start == T0 + timedelta(seconds=660)


def test_a_pending_pod_not_yet_scheduled_has_asked_for_gpus_and_holds_none() -> None:
    pod = Pod("ml", "queued", "u3", node="", phase="Pending", reasons=[], start_s=None, completion_s=None)
    job = parse_one(pod)
    assert (job.state, job.start, job.end, job.nodes) == (JobState.PENDING, None, None, ())
    assert (job.gpus_requested, job.gpus_allocated) == (2, 0)


def test_a_pod_without_a_phase_or_gpus_is_unknown_and_asks_for_none() -> None:
    pod = Pod("ml", "p", "u4", gpus_by_container={})
    as_answered = pod.answers()
    job = kube_jobs_parse(KubeAnswers(**{**as_answered, "phases": []}), label_allowlist=ALLOW)[0]
    assert (job.state, job.gpus_requested, job.gpus_allocated) == (JobState.UNKNOWN, 0, 0)


# --- what kube-state-metrics' series do over a pod's life ----------------------------------------------------


def test_a_pod_scheduled_during_the_window_is_one_job_with_its_node_and_gpus_counted_once() -> None:
    # given the series of before its scheduling (no node, no IP) beside those of after
    pod = Pod("ml", "train", "u5", gpus_by_container={"main": 4})
    before = {"namespace": "ml", "pod": "train", "uid": "u5", "created_by_kind": "Job", "created_by_name": "train"}
    unscheduled_request = {"namespace": "ml", "pod": "train", "uid": "u5", "container": "main"}
    job = parse_one(
        pod,
        pods=[sample(before)],
        gpu_requests=[sample({**unscheduled_request, "resource": "nvidia_com_gpu", "unit": "integer"}, 4)],
    )
    # then the node comes from the scheduled series, and the container's 4 GPUs are not counted twice
    assert (job.nodes, job.gpus_requested, job.gpus_allocated) == (("gpu-k01",), 4, 4)


def test_the_controller_is_the_group_else_kube_pod_info_s_creator_else_none() -> None:
    # a pod with two owners: the controller wins
    pod = Pod("ml", "a", "u6", owner=("ReplicaSet", "web-5d8f"))
    extra_owner = sample({"namespace": "ml", "pod": "a", "uid": "u6", "owner_kind": "Node", "owner_name": "x",
                          "owner_is_controller": "false"})  # fmt: skip
    assert parse_one(pod, owners=[extra_owner]).group_key == "k8s/ml/ReplicaSet/web-5d8f"
    # kube_pod_owner not exported: kube_pod_info's created_by
    job = kube_jobs_parse(KubeAnswers(**{**pod.answers(), "owners": []}), label_allowlist=ALLOW)[0]
    assert job.group_key == "k8s/ml/ReplicaSet/web-5d8f"
    # a bare pod: `<none>` everywhere, no group
    assert parse_one(Pod("ml", "bare", "u7", owner=None)).group_key == ""


def test_labels_not_allow_listed_or_not_exported_are_not_kept() -> None:
    pod = Pod("ml", "p", "u8", labels={"team": "vision", "owner": "ada", "app.kubernetes.io/name": "vit"})
    job = parse_one(pod, allow=[" team ", "app.kubernetes.io/name", "tier", ""])
    assert dict(job.labels) == {"team": "vision", "app.kubernetes.io/name": "vit"}


def test_a_name_used_again_in_the_window_keeps_its_latest_pod() -> None:
    # given a StatefulSet's pod deleted and made anew under the same name
    old = Pod("db", "web-0", "old-uid", phase="Failed", reasons=["Error"], created_s=60, start_s=90,
              completion_s=1200, owner=("StatefulSet", "web"))  # fmt: skip
    new = Pod("db", "web-0", "new-uid", phase="Running", reasons=[], created_s=1300, start_s=1320,
              completion_s=None, owner=("StatefulSet", "web"))  # fmt: skip
    # when both are in the answers
    job = parse_one(old, new)
    # then the job is the new pod, and nothing of the old one leaks into it
    assert (job.job_id, job.state, job.end) == ("new-uid", JobState.RUNNING, None)
    assert job.start == T0 + timedelta(seconds=1320)


def test_pods_are_returned_in_key_order_and_series_of_pods_not_listed_add_nothing() -> None:
    stray = sample({"namespace": "ml", "pod": "ghost", "uid": "g", "phase": "Running"})
    jobs = kube_jobs_parse(answers(Pod("b", "p", "1"), Pod("a", "q", "2"), phases=[stray]), label_allowlist=ALLOW)
    assert [j.job_key for j in jobs] == ["k8s/a/q", "k8s/b/p"]


def test_exported_labels_are_kube_state_metrics_own_when_prometheus_renamed_them() -> None:
    # given kube-state-metrics scraped without honor_labels by a job that sets namespace and pod target labels
    pod = Pod("search", "train-1", "u9")

    def renamed(item: dict[str, Any]) -> dict[str, Any]:
        own = {"exported_namespace": item["metric"]["namespace"], "exported_pod": item["metric"]["pod"]}
        return {**item, "metric": {**item["metric"], "namespace": "monitoring", "pod": "ksm-0", **own}}

    as_scraped = {name: [renamed(item) for item in vector] for name, vector in pod.answers().items()}
    job = kube_jobs_parse(KubeAnswers(**as_scraped), label_allowlist=ALLOW)[0]
    assert job.job_key == "k8s/search/train-1" and job.state is JobState.COMPLETED


def test_no_answer_is_no_job() -> None:
    assert kube_jobs_parse(KubeAnswers(pods=[]), label_allowlist=ALLOW) == []


# --- malformed answers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pods": {"resultType": "matrix"}}, "kube_pod_info answer is a dict, not a list"),
        ({"pods": ["x"]}, r"kube_pod_info answer \[0\] is a str, not an object"),
        ({"pods": [{"value": [0, "1"]}]}, "no labels"),
        ({"phases": [{"metric": {"namespace": "a", "pod": "b"}, "value": [0]}]}, r"no \[time, value\] pair"),
        (
            {"times": [{"metric": {"namespace": "a", "pod": "b", "fw_q": "start"}, "value": [0, "soon"]}]},
            "not a number",
        ),
        ({"pods": [sample({"pod": "p", "uid": "u"})]}, "names no namespace and pod"),
        ({"times": [sample({"namespace": "a", "pod": "b"}, 5)]}, "without its fw_q tag"),
    ],
)
def test_an_answer_that_is_not_kube_state_metrics_series_is_refused_whole(change: dict[str, Any], message: str) -> None:
    base = Pod("a", "b", "u").answers()
    with pytest.raises(SchedulerDataError, match=message):
        kube_jobs_parse(KubeAnswers(**{**base, **change}), label_allowlist=ALLOW)


def test_not_a_number_samples_are_left_out() -> None:
    pod = Pod("a", "b", "u", gpus_by_container={})
    nan = sample({"namespace": "a", "pod": "b", "uid": "u", "container": "c"}, float("nan"))
    assert parse_one(pod, gpu_requests=[nan]).gpus_requested == 0


# --- Slurm's records keep their shape ------------------------------------------------------------------------


def test_slurm_array_tasks_are_grouped_by_their_array_and_other_jobs_are_not() -> None:
    jobs = {j.job_id: j for j in sacct_json_parse((FIXTURES / "sacct-json-22.05.json").read_text())}
    assert {jobs[i].group_key for i in ("6", "8", "9")} == {"slurm-array/6"}
    assert jobs["2"].group_key == "" and jobs["2"].scheduler == "slurm"
    assert dict(jobs["2"].labels) == {} and (jobs["2"].namespace, jobs["2"].pod) == ("", "")


def test_only_slurm_has_stand_in_records() -> None:
    pod = parse_one(Pod("ml", "allocation", "u"))
    assert pod.name == "allocation" and pod.partition == "" and not pod.is_stand_in


# --- the team rule of a pod label (apps.fleet.selectors) ------------------------------------------------------


@pytest.mark.parametrize(
    ("rule_value", "identity", "matches"),
    [
        ("team=search", JobIdentity("k8s", "", "", "ml", labels={"team": "search"}), True),
        ("team = search", JobIdentity("k8s", "", "", "ml", labels={"team": "search"}), True),
        ("team=search", JobIdentity("k8s", "", "", "ml", labels={"team": "ads"}), False),
        ("team=search", JobIdentity("k8s", "", "", "search"), False),  # the agent's identity: no labels
        ("team=search", JobIdentity("slurm", "", "", "", labels={"team": "search"}), False),
        ("team", JobIdentity("k8s", "", "", "ml", labels={"team": ""}), False),
        (
            "app.kubernetes.io/name=a=b",
            JobIdentity("k8s", "", "", "ml", labels={"app.kubernetes.io/name": "a=b"}),
            True,
        ),
    ],
)
def test_a_pod_label_rule_matches_the_label_it_names(rule_value: str, identity: JobIdentity, matches: bool) -> None:
    team, unassigned = Team(name="search"), Team(name=Team.UNASSIGNED)
    rule = TeamRule(team=team, kind=TeamRule.Kind.K8S_POD_LABEL, value=rule_value, priority=1, id=1)
    resolver = TeamResolver(cluster=Cluster(name="k8s"), unassigned=unassigned, rules=[rule])
    assert (resolver.team_for(identity) is team) == matches
