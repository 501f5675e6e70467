"""Kubernetes pods as fleetwatt jobs, from kube-state-metrics v2 (pure: plain data in, plain data out; DESIGN
section 8, docs/schedulers.md "Kubernetes (kube-state-metrics)").

`KubeQueries` builds the fixed handful of PromQL queries that read a window of a cluster's pods from the
Prometheus its energy comes from, and `kube_jobs_parse` turns their answers (Prometheus instant vectors:
`[{"metric": {...}, "value": [time, "1"]}, ...]`) into one `SchedulerJob` per pod. Nothing here asks
Prometheus or touches the database.

What kube-state-metrics exports (internal/store/pod.go; every pod series carries `namespace`, `pod`, `uid`):

- `kube_pod_info` (1): `node`, `created_by_kind`/`created_by_name` (the controller, `<none>` without one),
  `host_ip`, `pod_ip`, `priority_class`, `host_network`. Its labels change once, when the pod is scheduled
  (`node`, `pod_ip` set), so one pod can have two series: their non-empty values are merged.
- `kube_pod_labels` (1): `label_<name>` for the pod labels its `--metric-labels-allowlist` names, the name
  sanitised (`[^a-zA-Z0-9_]` to `_`, camelCase to snake_case: `app.kubernetes.io/name` is
  `label_app_kubernetes_io_name`).
- `kube_pod_owner` (1): `owner_kind`, `owner_name`, `owner_is_controller`; `<none>` three times without owner.
- `kube_pod_status_phase`: one series per phase (Pending, Running, Succeeded, Failed, Unknown), 1 for the
  current one and 0 for the others.
- `kube_pod_container_status_terminated_reason` (1): `container`, `reason` (Completed, Error, OOMKilled,
  ContainerCannotRun, DeadlineExceeded...), while that container is terminated.
- `kube_pod_created`, `kube_pod_start_time` (status.startTime: the kubelet took the pod), and
  `kube_pod_completion_time` (the last container's finish, once one terminated): Unix seconds.
- `kube_pod_container_resource_requests{resource="nvidia_com_gpu", unit="integer"}`: `container`, `node` (empty
  until scheduled, so again two series for one container: the larger value is taken, never their sum).

Prometheus renames a scraped `namespace`, `pod`, `node` or `container` label that collides with a target
label to `exported_<name>` (kube-state-metrics scraped without `honor_labels`): the `exported_` label wins.

Pods are told apart by (namespace, pod, uid); a name used again in one window (a StatefulSet's pod made
anew) keeps its latest incarnation, as the agent's key `k8s/<namespace>/<pod>` cannot tell them apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apps.telemetry.promql import KSM_GPU_REQUEST, KSM_POD_INFO, KSM_POD_REQUESTS, TAG, selector

from .slurm import FINAL_STATES, JobState, SchedulerDataError, SchedulerJob

POD_INFO = KSM_POD_INFO
POD_LABELS = "kube_pod_labels"
POD_OWNER = "kube_pod_owner"
POD_PHASE = "kube_pod_status_phase"
POD_TERMINATED_REASON = "kube_pod_container_status_terminated_reason"
POD_CREATED = "kube_pod_created"
POD_START_TIME = "kube_pod_start_time"
POD_COMPLETION_TIME = "kube_pod_completion_time"
POD_REQUESTS = KSM_POD_REQUESTS

NONE = "<none>"  # kube-state-metrics' value for a pod without an owner or controller
OOM_KILLED = "OOMKilled"
# Phase to state, the terminal phases first: a pod whose series disagree (a partial scrape) reads as the
# furthest phase it reached. Failed becomes OUT_OF_MEMORY where a container was OOMKilled.
_PHASES = (
    ("Failed", JobState.FAILED),
    ("Succeeded", JobState.COMPLETED),
    ("Running", JobState.RUNNING),
    ("Pending", JobState.PENDING),
    ("Unknown", JobState.UNKNOWN),
)
_INVALID_LABEL_CHAR = re.compile(r"[^a-zA-Z0-9_]")
_CAMEL_HUMP = re.compile(r"([a-z0-9])([A-Z])")

Vector = Sequence[Mapping[str, Any]]


def ksm_label_name(name: str) -> str:
    """The Prometheus label kube-state-metrics gives a pod label: `team` → `label_team`,
    `app.kubernetes.io/name` → `label_app_kubernetes_io_name`, `myTeam` → `label_my_team`."""
    return "label_" + _CAMEL_HUMP.sub(r"\1_\2", _INVALID_LABEL_CHAR.sub("_", name)).lower()


# --- queries -----------------------------------------------------------------------------------------------


def kube_window(start: datetime, end: datetime) -> tuple[float, int]:
    """(evaluation time in Unix seconds, range in milliseconds) that make a range selector cover the window
    [start, end): evaluated a millisecond before `end`, a range as long as the window reaches back to `start`
    (Prometheus 3's ranges are open at the left; Prometheus 2's closed ones add that one millisecond)."""
    if start.tzinfo is None or end.tzinfo is None or start >= end:
        raise ValueError("A window needs times with a zone, its start before its end.")
    range_ms = round((end - start).total_seconds() * 1000)
    return end.timestamp() - 0.001, range_ms


@dataclass(frozen=True)
class KubeQueries:
    """The queries of one cluster's window, each over the whole cluster (their number never grows with pods);
    evaluate each at the time `kube_window` gives."""

    cluster_selector: str
    range_ms: int

    @property
    def _range(self) -> str:
        return f"{self.range_ms // 1000}s" if self.range_ms % 1000 == 0 else f"{self.range_ms}ms"

    def _over(self, function: str, metric: str, extra: str = "") -> str:
        return f"{function}({selector(metric, self.cluster_selector, extra)}[{self._range}])"

    def by_answer(self) -> dict[str, str]:
        """{field of KubeAnswers: query}."""
        times = {
            "created": self._over("last_over_time", POD_CREATED),
            "start": self._over("last_over_time", POD_START_TIME),
            "completion": self._over("last_over_time", POD_COMPLETION_TIME),
        }
        return {
            # Every pod present at some time in the window, with its node and controller.
            "pods": self._over("max_over_time", POD_INFO),
            "labels": self._over("max_over_time", POD_LABELS),
            "owners": self._over("max_over_time", POD_OWNER),
            # The phase each pod was last seen in during the window, and why its containers last terminated.
            "phases": self._over("last_over_time", POD_PHASE) + " == 1",
            "terminated": self._over("last_over_time", POD_TERMINATED_REASON) + " == 1",
            "times": " or ".join(f'label_replace({q}, "{TAG}", "{tag}", "", "")' for tag, q in times.items()),
            "gpu_requests": self._over("max_over_time", POD_REQUESTS, KSM_GPU_REQUEST),
        }


@dataclass(frozen=True)
class KubeAnswers:
    """What each query of `KubeQueries.by_answer` answered: an instant vector each."""

    pods: Vector
    labels: Vector = ()
    owners: Vector = ()
    phases: Vector = ()
    terminated: Vector = ()
    times: Vector = ()
    gpu_requests: Vector = ()


# --- answers to jobs ---------------------------------------------------------------------------------------

PodKey = tuple[str, str, str]  # (namespace, pod, uid)


@dataclass
class _Pod:
    """What the answers say of one pod (one uid), gathered before it becomes a SchedulerJob."""

    namespace: str
    name: str
    uid: str
    node: str = ""
    created_by: tuple[str, str] | None = None
    owners: set[tuple[str, str, bool]] = field(default_factory=set)  # (kind, name, is controller)
    labels: dict[str, str] = field(default_factory=dict)
    phases: set[str] = field(default_factory=set)
    reasons: set[str] = field(default_factory=set)
    times: dict[str, float] = field(default_factory=dict)  # created, start, completion: Unix seconds
    gpus_by_container: dict[str, int] = field(default_factory=dict)


def _sample(item: Any, family: str, position: int) -> tuple[dict[str, str], float]:
    """(labels, value) of one element of an instant vector; SchedulerDataError where it is not one."""
    where = f"{family} answer [{position}]"
    if not isinstance(item, Mapping):
        raise SchedulerDataError(f"{where} is a {type(item).__name__}, not an object")
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, Mapping) or not all(isinstance(v, str) for v in metric.values()):
        raise SchedulerDataError(f"{where} has no labels (metric): {item!r}")
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise SchedulerDataError(f"{where} has no [time, value] pair: {item!r}")
    try:
        number = float(value[1])
    except (TypeError, ValueError):
        raise SchedulerDataError(f"{where} value is not a number: {value[1]!r}") from None
    return {str(k): v for k, v in metric.items()}, number


def _label(labels: Mapping[str, str], name: str) -> str:
    """A label kube-state-metrics set, under the name Prometheus kept it (`exported_<name>` on a collision)."""
    return labels.get(f"exported_{name}") or labels.get(name) or ""


def _pod_key(labels: Mapping[str, str], family: str, position: int) -> PodKey:
    namespace, pod = _label(labels, "namespace"), _label(labels, "pod")
    if not namespace or not pod:
        raise SchedulerDataError(f"{family} answer [{position}] names no namespace and pod: {dict(labels)!r}")
    return namespace, pod, _label(labels, "uid")


def _samples(vector: Vector, family: str) -> Iterable[tuple[PodKey, dict[str, str], float]]:
    if not isinstance(vector, Sequence) or isinstance(vector, str | bytes):
        raise SchedulerDataError(f"{family} answer is a {type(vector).__name__}, not a list")
    for position, item in enumerate(vector):
        labels, value = _sample(item, family, position)
        if math.isnan(value):
            continue
        yield _pod_key(labels, family, position), labels, value


def _pods_gather(answers: KubeAnswers, label_allowlist: Sequence[str]) -> dict[PodKey, _Pod]:
    pods: dict[PodKey, _Pod] = {}
    for key, labels, _ in _samples(answers.pods, POD_INFO):
        pod = pods.setdefault(key, _Pod(*key))
        pod.node = pod.node or _label(labels, "node")
        kind, name = labels.get("created_by_kind", ""), labels.get("created_by_name", "")
        if kind and name and NONE not in (kind, name):
            pod.created_by = (kind, name)
    # The other families describe the pods found above; a series of a pod that kube_pod_info does not list
    # in the window (a scrape that caught one family and not the other) adds nothing.
    wanted = {name: ksm_label_name(name) for name in label_allowlist}
    for key, labels, _ in _samples(answers.labels, POD_LABELS):
        if key in pods:
            found = {name: labels[label] for name, label in wanted.items() if labels.get(label)}
            pods[key].labels.update(sorted(found.items()))
    for key, labels, _ in _samples(answers.owners, POD_OWNER):
        kind, name = labels.get("owner_kind", ""), labels.get("owner_name", "")
        if key in pods and kind and name and NONE not in (kind, name):
            pods[key].owners.add((kind, name, labels.get("owner_is_controller") == "true"))
    for key, labels, value in _samples(answers.phases, POD_PHASE):
        if key in pods and value == 1 and labels.get("phase"):
            pods[key].phases.add(labels["phase"])
    for key, labels, value in _samples(answers.terminated, POD_TERMINATED_REASON):
        if key in pods and value == 1 and labels.get("reason"):
            pods[key].reasons.add(labels["reason"])
    for key, labels, value in _samples(answers.times, "times"):
        tag = labels.get(TAG, "")
        if tag not in ("created", "start", "completion"):
            raise SchedulerDataError(f"times answer has a series without its {TAG} tag: {labels!r}")
        if key in pods and value > 0:
            pods[key].times[tag] = max(value, pods[key].times.get(tag, 0.0))
    for key, labels, value in _samples(answers.gpu_requests, POD_REQUESTS):
        if key not in pods or value < 0:
            continue
        if not math.isfinite(value):
            raise SchedulerDataError(f"{POD_REQUESTS} of pod {key[0]}/{key[1]} is not a number of GPUs: {value!r}")
        container = _label(labels, "container")
        # One container's request before and after scheduling is two series (its `node` label): the same GPUs.
        by_container = pods[key].gpus_by_container
        by_container[container] = max(by_container.get(container, 0), round(value))
    return pods


def _state(pod: _Pod) -> tuple[JobState, str]:
    """The pod's state and its words for it: the phase, with the containers' terminated reasons."""
    for phase, state in _PHASES:
        if phase in pod.phases:
            if state is JobState.FAILED and OOM_KILLED in pod.reasons:
                state = JobState.OUT_OF_MEMORY
            reasons = f" ({', '.join(sorted(pod.reasons))})" if pod.reasons and state in FINAL_STATES else ""
            return state, phase + reasons
    return JobState.UNKNOWN, ""


def _group_key(pod: _Pod) -> str:
    """k8s/<namespace>/<kind>/<name> of the pod's controller (kube_pod_owner's controller, else its first
    owner, else kube_pod_info's created_by); "" for a pod nobody owns."""
    owners = sorted(pod.owners, key=lambda o: (not o[2], o[0], o[1]))
    owner = (owners[0][0], owners[0][1]) if owners else pod.created_by
    return f"k8s/{pod.namespace}/{owner[0]}/{owner[1]}" if owner else ""


def _time(seconds: float | None, where: str) -> datetime | None:
    if not seconds:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):  # inf, 1e20: no calendar holds it
        raise SchedulerDataError(f"{where} is out of range: {seconds!r}") from None


def _job(pod: _Pod) -> SchedulerJob:
    state, state_raw = _state(pod)
    final = state in FINAL_STATES
    gpus = sum(pod.gpus_by_container.values())
    return SchedulerJob(
        job_key=f"k8s/{pod.namespace}/{pod.name}",
        job_id=pod.uid,
        display_id=pod.name,
        user="",  # kube-state-metrics does not say who made a pod
        account="",
        partition="",
        qos="",
        name=pod.name,
        state=state,
        state_raw=state_raw,
        # Succeeded means every container exited 0; kube-state-metrics exports no exit code of a container's
        # current termination (only of the one before a restart), so a failed pod's stays unknown.
        exit_code=0 if state is JobState.COMPLETED else None,
        signal=0 if state is JobState.COMPLETED else None,
        submit=_time(pod.times.get("created"), f"pod {pod.namespace}/{pod.name} created"),
        start=_time(pod.times.get("start"), f"pod {pod.namespace}/{pod.name} start time"),
        end=_time(pod.times.get("completion"), f"pod {pod.namespace}/{pod.name} completion time") if final else None,
        gpus_requested=gpus,
        gpus_allocated=gpus if pod.node else 0,  # a pod's GPUs are its node's once it is scheduled there
        nodes=(pod.node,) if pod.node else (),
        scheduler="k8s",
        group_key=_group_key(pod),
        labels=pod.labels,
        namespace=pod.namespace,
        pod=pod.name,
    )


def kube_jobs_parse(answers: KubeAnswers, *, label_allowlist: Sequence[str]) -> list[SchedulerJob]:
    """One job per pod that `answers.pods` lists (per namespace and name: its latest incarnation), in job key
    order; `label_allowlist` names the pod labels kept (as Kubernetes names them). An answer that is not an
    instant vector of kube-state-metrics' series raises SchedulerDataError: no partial list."""
    pods = _pods_gather(answers, [name.strip() for name in label_allowlist if name.strip()])
    latest: dict[tuple[str, str], _Pod] = {}
    for pod in pods.values():
        key = (pod.namespace, pod.name)
        if key not in latest or _incarnation(pod) > _incarnation(latest[key]):
            latest[key] = pod
    return [_job(latest[key]) for key in sorted(latest)]


def _incarnation(pod: _Pod) -> tuple[float, str]:
    return pod.times.get("created") or pod.times.get("start") or 0.0, pod.uid
