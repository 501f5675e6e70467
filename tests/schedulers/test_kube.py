"""Kubernetes pods from kube-state-metrics as fleetwatt jobs (apps/schedulers/kube.py, pure): the window a range
selector covers, and, for any answers, jobs that keep their promises (one per namespace and pod, in key order, an
end only once final, never more GPUs held than asked) or a SchedulerDataError, never another error (property tests).
Each family of series and each state by example: tests/schedulers/test_kube_parse.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.schedulers.kube import KubeAnswers, KubeQueries, ksm_label_name, kube_jobs_parse, kube_window
from apps.schedulers.slurm import FINAL_STATES, JobState, SchedulerDataError

T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)


def _series(pod: str, value: float = 1, uid: str = "u1", **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": "ml", "pod": pod, "uid": uid, **labels}, "value": [T0.timestamp(), str(value)]}


# the window


def test_a_window_is_evaluated_a_millisecond_before_its_end_over_its_length() -> None:
    at, range_ms = kube_window(T0, T0 + timedelta(hours=1))
    assert at == pytest.approx((T0 + timedelta(hours=1)).timestamp() - 0.001)
    assert range_ms == 3_600_000
    # any zone: the same instants
    berlin = timezone(timedelta(hours=1))
    assert kube_window(T0.astimezone(berlin), (T0 + timedelta(hours=1)).astimezone(berlin)) == (at, range_ms)


@pytest.mark.parametrize(
    ("start", "end"),
    [(T0, T0), (T0 + timedelta(hours=1), T0), (T0.replace(tzinfo=None), T0 + timedelta(hours=1))],
)
def test_a_window_without_zones_or_of_no_length_is_refused(start: datetime, end: datetime) -> None:
    with pytest.raises(ValueError, match="A window needs times with a zone"):
        kube_window(start, end)


def test_the_queries_are_a_fixed_handful_whatever_the_cluster() -> None:
    queries = KubeQueries(cluster_selector='cluster="a"', range_ms=3_600_500).by_answer()
    assert set(queries) == {"pods", "labels", "owners", "phases", "terminated", "times", "gpu_requests"}
    assert all('cluster="a"' in q and "[3600500ms]" in q for q in queries.values())
    assert set(queries) == set(KubeAnswers.__dataclass_fields__)


def test_a_label_name_as_kube_state_metrics_writes_it() -> None:
    assert ksm_label_name("nvidia.com/gpu.product") == "label_nvidia_com_gpu_product"
    assert ksm_label_name("teamName") == "label_team_name"


# GPUs per container and per series


def test_gpus_are_summed_over_containers_and_a_containers_two_series_counted_once() -> None:
    answers = KubeAnswers(
        pods=[_series("p", node="n1")],
        gpu_requests=[
            _series("p", 2, container="a", node=""),  # before it was scheduled
            _series("p", 2, container="a", node="n1"),  # after: the same request
            _series("p", 1, container="b", node="n1"),
        ],
    )
    [job] = kube_jobs_parse(answers, label_allowlist=[])
    assert (job.gpus_requested, job.gpus_allocated) == (3, 3)


# any answers: jobs that keep their promises, or SchedulerDataError

PODS = st.sampled_from(["a", "b", "c"])
UIDS = st.sampled_from(["u1", "u2"])
VALUES = st.one_of(
    st.sampled_from(["0", "1", "2", "NaN", "+Inf", "-1", "1e20", "x", "1793613600"]),
    st.floats(allow_nan=True).map(str),
)
PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""])


def _vector(extra: st.SearchStrategy[dict[str, str]]) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(
        st.builds(
            lambda pod, uid, value, labels: {
                "metric": {"namespace": "ml", "pod": pod, "uid": uid, **labels},
                "value": [T0.timestamp(), value],
            },
            PODS,
            UIDS,
            VALUES,
            extra,
        ),
        max_size=4,
    )


ANSWERS = st.builds(
    KubeAnswers,
    pods=_vector(st.fixed_dictionaries({}, optional={"node": st.sampled_from(["", "n1"])})),
    phases=_vector(st.fixed_dictionaries({"phase": PHASES})),
    terminated=_vector(st.fixed_dictionaries({"reason": st.sampled_from(["OOMKilled", "Error", "Completed"])})),
    times=_vector(st.fixed_dictionaries({"fw_q": st.sampled_from(["created", "start", "completion", "other"])})),
    gpu_requests=_vector(st.fixed_dictionaries({"container": st.sampled_from(["x", "y"])})),
    owners=st.one_of(_vector(st.fixed_dictionaries({})), st.just([{"metric": {"pod": "a"}}]), st.just({"not": 1})),
)


@settings(max_examples=300, deadline=None)
@given(ANSWERS)
def test_any_answers_give_jobs_that_keep_their_promises_or_are_refused(answers: KubeAnswers) -> None:
    try:
        jobs = kube_jobs_parse(answers, label_allowlist=["team"])
    except SchedulerDataError as exc:
        assert "\n" not in str(exc)
        return
    keys = [j.job_key for j in jobs]
    assert keys == sorted(set(keys))
    for job in jobs:
        assert job.scheduler == "k8s" and job.job_key == f"k8s/ml/{job.pod}"
        assert 0 <= job.gpus_allocated <= job.gpus_requested
        assert job.end is None or job.state in FINAL_STATES
        assert (job.exit_code == 0) is (job.state is JobState.COMPLETED)
        assert job.nodes in ((), ("n1",))
