"""A job's summary from its per-GPU totals (apps.jobs.summary): direct tests, and hypothesis for the
invariants of coverage, energy, attribution, the unwatched time and the job's end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from apps.jobs.methods import METHODS, Method
from apps.jobs.summary import JobGpuTotals, job_summarize, unobserved_s

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
H = timedelta(hours=1)
M = timedelta(minutes=1)
SCRAPE_S = 15


def _summarize(gpus: list[JobGpuTotals], **kwargs):
    args = {"energy_by_method": {}, "scrape_interval_s": SCRAPE_S, "ingested_through": None, "gpu_sampled": {}}
    return job_summarize(gpus=gpus, **{**args, **kwargs})


# unobserved_s


def test_an_hour_with_no_record_counts_whole() -> None:
    assert unobserved_s(gpu_id=1, start=T0, end=T0 + H, gpu_sampled={}) == 3600.0


def test_a_span_fully_watched_has_nothing_unobserved() -> None:
    watched = {(1, T0): 3600.0, (1, T0 + H): 3600.0}
    assert unobserved_s(gpu_id=1, start=T0 + 10 * M, end=T0 + H + 50 * M, gpu_sampled=watched) == 0.0


def test_another_gpus_records_do_not_count() -> None:
    assert unobserved_s(gpu_id=1, start=T0, end=T0 + H, gpu_sampled={(2, T0): 3600.0}) == 3600.0


def test_an_outage_inside_a_whole_hour_counts_exactly() -> None:
    assert unobserved_s(gpu_id=1, start=T0, end=T0 + H, gpu_sampled={(1, T0): 2700.0}) == 900.0


def test_partial_hours_count_only_what_cannot_have_been_watched() -> None:
    # given: 10:15 to 10:45 is 1,800 s; the agent watched 600 s of the hour, maybe all inside the span
    watched = {(1, T0): 600.0}
    # when
    missed = unobserved_s(gpu_id=1, start=T0 + 15 * M, end=T0 + 45 * M, gpu_sampled=watched)
    # then: a lower bound
    assert missed == 1200.0


def test_a_span_over_several_hours_adds_each_hour() -> None:
    # given: 10:30 to 12:30; hour 10 watched, hour 11 not recorded, hour 12 watched half
    watched = {(1, T0): 3600.0, (1, T0 + 2 * H): 1800.0}
    # when
    missed = unobserved_s(gpu_id=1, start=T0 + 30 * M, end=T0 + 2 * H + 30 * M, gpu_sampled=watched)
    # then
    assert missed == 3600.0


def test_an_empty_span_has_nothing_unobserved() -> None:
    assert unobserved_s(gpu_id=1, start=T0 + H, end=T0 + H, gpu_sampled={}) == 0.0
    assert unobserved_s(gpu_id=1, start=T0 + H, end=T0, gpu_sampled={}) == 0.0


# job_summarize


def test_no_gpus_gives_only_the_energy() -> None:
    # when
    s = _summarize([], energy_by_method={Method.WHOLE_GPU: 100.0})
    # then
    assert (s.energy_j, s.attribution, s.gpu_count, s.coverage) == (100.0, "whole_gpu", 0, 0.0)
    assert (s.start, s.end) == (None, None)


def test_attribution_is_the_method_with_most_joules_and_drops_empty_methods() -> None:
    # when
    s = _summarize([], energy_by_method={"whole_gpu": 10.0, "sm_time": 30.0, "memory": 0.0, "equal": -1.0})
    # then
    assert s.attribution == "sm_time"
    assert s.attribution_j == {"sm_time": 30.0, "whole_gpu": 10.0}
    assert s.energy_j == 40.0


def test_a_tie_in_attribution_is_broken_the_same_whatever_the_order() -> None:
    a = _summarize([], energy_by_method={"sm_time": 5.0, "equal": 5.0})
    b = _summarize([], energy_by_method={"equal": 5.0, "sm_time": 5.0})
    assert a.attribution == b.attribution == "equal"


def test_sums_over_gpus() -> None:
    # given
    gpus = [
        JobGpuTotals(gpu_id=1, sampled_s=3600, sm_s=1800, occupancy_s=3600, peak_memory_bytes=5, job_start=T0,
                     first_seen=T0, last_seen=T0 + H),
        JobGpuTotals(gpu_id=2, sampled_s=1800, sm_s=900, occupancy_s=900, peak_memory_bytes=9, job_start=T0,
                     first_seen=T0, last_seen=T0 + 30 * M),
    ]  # fmt: skip
    # when
    s = _summarize(gpus, gpu_sampled={(1, T0): 3600.0, (2, T0): 3600.0})
    # then
    assert (s.sampled_s, s.sm_s, s.gpu_hours, s.peak_memory_bytes, s.gpu_count) == (5400, 2700, 1.25, 9, 2)
    assert (s.start, s.last_seen) == (T0, T0 + H)


def test_coverage_is_sampled_over_sampled_plus_unwatched() -> None:
    # given: the job ran 10:00-11:00 but the agent watched only 45 minutes of the hour
    gpu = JobGpuTotals(gpu_id=1, sampled_s=2700, occupancy_s=2700, job_start=T0, first_seen=T0, last_seen=T0 + H)
    # when
    s = _summarize([gpu], gpu_sampled={(1, T0): 2700.0})
    # then
    assert s.expected_s == 3600.0
    assert s.coverage == 0.75


def test_a_gpu_the_job_reached_late_while_watched_is_not_unseen() -> None:
    # given: the job starts at 10:00 on GPU 1 and reaches GPU 2 at 10:30; the agent watched both all along
    gpus = [
        JobGpuTotals(gpu_id=1, sampled_s=3600, job_start=T0, first_seen=T0, last_seen=T0 + H),
        JobGpuTotals(gpu_id=2, sampled_s=1800, job_start=T0, first_seen=T0 + 30 * M, last_seen=T0 + H),
    ]
    # when
    s = _summarize(gpus, gpu_sampled={(1, T0): 3600.0, (2, T0): 3600.0})
    # then
    assert s.expected_s == 5400.0
    assert s.coverage == 1.0


def test_dcgm_only_expects_first_to_last_sample() -> None:
    # given
    gpu = JobGpuTotals(gpu_id=1, source="dcgm", sampled_s=1800, first_seen=T0, last_seen=T0 + H)
    # when
    s = _summarize([gpu])
    # then
    assert s.expected_s == 3600.0
    assert s.coverage == 0.5
    assert s.start == T0  # no job start reported: the first sample


def test_start_is_the_earliest_job_start_reported() -> None:
    gpus = [
        JobGpuTotals(gpu_id=1, sampled_s=60, job_start=T0 + 5 * M, first_seen=T0 + 6 * M, last_seen=T0 + 7 * M),
        JobGpuTotals(gpu_id=2, sampled_s=60, job_start=T0 + 2 * M, first_seen=T0 + 9 * M, last_seen=T0 + 10 * M),
    ]
    assert _summarize(gpus).start == T0 + 2 * M


def test_coverage_is_one_when_nothing_was_expected_but_something_sampled() -> None:
    # given: no last-seen time exported, so nothing is expected
    gpu = JobGpuTotals(gpu_id=1, sampled_s=60, job_start=T0)
    # then
    assert _summarize([gpu]).coverage == 1.0


def test_end_is_the_last_sample_only_two_scrapes_after_it() -> None:
    gpu = JobGpuTotals(gpu_id=1, source="dcgm", sampled_s=60, first_seen=T0, last_seen=T0 + H)
    exactly = T0 + H + timedelta(seconds=2 * SCRAPE_S)
    assert _summarize([gpu], ingested_through=exactly).end is None
    assert _summarize([gpu], ingested_through=exactly + timedelta(microseconds=1)).end == T0 + H
    assert _summarize([gpu], ingested_through=None).end is None


def test_a_gpu_seen_by_the_agent_and_by_dcgm_counts_once() -> None:
    # given: the services group a job's rows by GPU and source
    gpus = [
        JobGpuTotals(gpu_id=1, source="agent", sampled_s=3600, job_start=T0, first_seen=T0, last_seen=T0 + H),
        JobGpuTotals(gpu_id=1, source="dcgm", sampled_s=3600, first_seen=T0 + H, last_seen=T0 + 2 * H),
    ]
    # then
    assert _summarize(gpus, gpu_sampled={(1, T0): 3600.0}).gpu_count == 1


# Properties

offsets_s = st.integers(min_value=0, max_value=4 * 3600)
hours_watched = st.dictionaries(
    st.integers(min_value=0, max_value=6), st.floats(min_value=0.0, max_value=3600.0), max_size=7
)


@st.composite
def totals(draw: st.DrawFn, gpu_id: int, source: str | None = None) -> JobGpuTotals:
    start = T0 + timedelta(seconds=draw(offsets_s))
    first = start + timedelta(seconds=draw(st.integers(0, 1800)))
    last = first + timedelta(seconds=draw(st.integers(0, 4 * 3600)))
    sampled = draw(st.floats(min_value=0.0, max_value=(last - first).total_seconds() + 60))
    return JobGpuTotals(
        gpu_id=gpu_id,
        source=source or draw(st.sampled_from(["agent", "dcgm"])),
        sampled_s=sampled,
        sm_s=draw(st.floats(min_value=0.0, max_value=1.0)) * sampled,
        occupancy_s=draw(st.floats(min_value=0.0, max_value=1.0)) * sampled,
        peak_memory_bytes=draw(st.integers(0, 2**40)),
        job_start=draw(st.none() | st.just(start)),
        first_seen=first,
        last_seen=draw(st.none() | st.just(last)) if source is None else last,
    )


@st.composite
def jobs(draw: st.DrawFn, source: str | None = None) -> list[JobGpuTotals]:
    n = draw(st.integers(min_value=0, max_value=4))
    return [draw(totals(gpu_id, source)) for gpu_id in range(1, n + 1)]


energies = st.dictionaries(st.sampled_from(METHODS), st.floats(min_value=-1e6, max_value=1e9), max_size=5)


def _sampled(draw_hours: dict[int, float], gpus: int) -> dict[tuple[int, datetime], float]:
    return {(g, T0 + h * H): s for g in range(1, gpus + 1) for h, s in draw_hours.items()}


@settings(max_examples=80)
@given(jobs(), hours_watched)
def test_coverage_is_always_within_0_and_1(gpus: list[JobGpuTotals], watched: dict[int, float]) -> None:
    s = _summarize(gpus, gpu_sampled=_sampled(watched, len(gpus)))
    assert 0.0 <= s.coverage <= 1.0


@settings(max_examples=60)
@given(energies)
def test_energy_is_the_sum_of_positive_attribution_and_attribution_the_largest(energy: dict[str, float]) -> None:
    # when
    s = _summarize([], energy_by_method=energy)
    # then
    positive = {m: j for m, j in energy.items() if j > 0}
    assert s.attribution_j == positive
    assert s.energy_j == pytest.approx(sum(positive.values()))
    if positive:
        assert energy[s.attribution] == max(positive.values())
    else:
        assert s.attribution == ""


@settings(max_examples=80)
@given(offsets_s, st.integers(min_value=0, max_value=6 * 3600), hours_watched)
def test_unobserved_is_never_negative_nor_more_than_the_span(offset: int, span: int, watched: dict[int, float]) -> None:
    # given
    start = T0 + timedelta(seconds=offset)
    end = start + timedelta(seconds=span)
    # when
    missed = unobserved_s(gpu_id=1, start=start, end=end, gpu_sampled=_sampled(watched, 1))
    # then
    assert 0.0 <= missed <= span


@settings(max_examples=60)
@given(offsets_s, st.integers(min_value=0, max_value=6 * 3600))
def test_unobserved_of_a_fully_watched_span_is_zero_and_of_an_unrecorded_one_is_the_span(
    offset: int, span: int
) -> None:
    start = T0 + timedelta(seconds=offset)
    end = start + timedelta(seconds=span)
    full = {(1, T0 + h * H): 3600.0 for h in range(12)}
    assert unobserved_s(gpu_id=1, start=start, end=end, gpu_sampled=full) == 0.0
    assert unobserved_s(gpu_id=1, start=start, end=end, gpu_sampled={}) == pytest.approx(span)


@settings(max_examples=60)
@given(jobs(), st.integers(min_value=-600, max_value=6 * 3600), st.sampled_from([5, 15, 60]))
def test_end_is_set_only_once_the_ingest_is_two_scrapes_past_the_last_sample(
    gpus: list[JobGpuTotals], through_offset: int, scrape_s: int
) -> None:
    # given
    through = T0 + timedelta(seconds=through_offset)
    # when
    s = _summarize(gpus, ingested_through=through, scrape_interval_s=scrape_s)
    # then
    seen = [g.last_seen for g in gpus if g.last_seen]
    finished = bool(seen) and max(seen) < through - timedelta(seconds=2 * scrape_s)
    assert s.end == (max(seen) if finished else None)


@settings(max_examples=60)
@given(jobs(), hours_watched)
def test_gpu_count_gpu_hours_and_peak_memory(gpus: list[JobGpuTotals], watched: dict[int, float]) -> None:
    s = _summarize(gpus, gpu_sampled=_sampled(watched, len(gpus)))
    assert s.gpu_count == len(gpus)
    assert s.gpu_hours == pytest.approx(sum(g.occupancy_s for g in gpus) / 3600)
    assert s.peak_memory_bytes == max((g.peak_memory_bytes for g in gpus), default=0)


@settings(max_examples=60)
@given(jobs(source="dcgm"))
def test_dcgm_only_expects_last_minus_first_seen(gpus: list[JobGpuTotals]) -> None:
    # when
    s = _summarize(gpus)
    # then
    expected = sum((g.last_seen - g.first_seen).total_seconds() for g in gpus)
    assert s.expected_s == pytest.approx(expected)
    sampled = sum(g.sampled_s for g in gpus)
    assert s.coverage == (min(1.0, sampled / expected) if expected > 0 else (1.0 if sampled > 0 else 0.0))


@settings(max_examples=60)
@given(jobs(source="agent"))
def test_an_agent_that_watched_every_hour_covers_what_it_sampled(gpus: list[JobGpuTotals]) -> None:
    # given: the agent watched every hour of every GPU whole
    assume(any(g.sampled_s > 0 for g in gpus))
    full = {(g.gpu_id, T0 + h * H): 3600.0 for g in gpus for h in range(12)}
    # when
    s = _summarize(gpus, gpu_sampled=full)
    # then: nothing went unwatched, so what was expected is what was sampled
    assert s.expected_s == pytest.approx(sum(g.sampled_s for g in gpus))
    assert s.coverage == pytest.approx(1.0)
