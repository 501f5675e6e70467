"""A scheduler's records checked before they are stored (apps/schedulers/records.py, pure): a job's name (its user's
free text) repaired and noted, a key stored as the agent's would be, and every other field of the scheduler's own
refused, naming the record and the field, when it cannot be stored as it is; all or nothing over a window. Through
a sync that writes nothing: tests/schedulers/test_bad_answers.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.jobs.identity import TEXT_MAX, key_storable
from apps.schedulers.records import (
    CODE_MAX,
    GPUS_MAX,
    LABEL_MAX,
    NODE_MAX,
    TIME_AHEAD,
    TIME_MIN,
    record_checked,
    records_checked,
)
from apps.schedulers.slurm import JobState, SchedulerDataError, SchedulerJob

NOW = datetime(2026, 11, 2, 10, tzinfo=UTC)


def _record(**fields: Any) -> SchedulerJob:
    base: dict[str, Any] = {
        "job_key": "slurm/42", "job_id": "42", "display_id": "42", "user": "ada", "account": "vision",
        "partition": "gpu", "qos": "normal", "name": "train", "state": JobState.COMPLETED, "state_raw": "COMPLETED",
        "exit_code": 0, "signal": 0, "submit": NOW - timedelta(hours=2), "start": NOW - timedelta(hours=1),
        "end": NOW, "gpus_requested": 2, "gpus_allocated": 2, "nodes": ("gpu01",),
    }  # fmt: skip
    return SchedulerJob(**{**base, **fields})


def test_a_clean_record_is_itself_with_nothing_to_say() -> None:
    record = _record()
    assert record_checked(record, now=NOW) == (record, [])


def test_a_name_is_made_storable_and_the_repair_noted() -> None:
    # given a name with a byte that was not UTF-8 and a control character, and another too long
    broken, _ = record_checked(_record(name="run\udcff\x07"), now=NOW)
    long, notes = record_checked(_record(name="x" * 10_000), now=NOW)
    # then
    assert broken.name == "run\ufffd\ufffd"
    assert len(long.name) == TEXT_MAX and long.name.endswith("…")
    assert notes == ["job '42': its name: cut from 10,000 to 255 characters"]


def test_a_key_too_long_for_its_column_is_stored_as_the_agents_would_be() -> None:
    key = "k8s/" + "n" * 200 + "/" + "p" * 200
    checked, notes = record_checked(_record(job_key=key, group_key=key + "/owner"), now=NOW)
    assert checked.job_key == key_storable(key) and len(checked.job_key) == TEXT_MAX
    assert checked.group_key == key_storable(key + "/owner")
    assert len(notes) == 2 and "its key" in notes[0] and "its group key" in notes[1]


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"user": "ada\x00"}, "job '42' user holds the control character '\\x00'"),
        ({"account": "vi\udcffsion"}, "job '42' account holds a byte that is not UTF-8"),
        ({"partition": "p" * (TEXT_MAX + 1)}, "job '42' partition is longer than 255 characters"),
        ({"labels": {"team": "v" * (LABEL_MAX + 1)}}, "job '42' label 'team' is longer than 1000 characters"),
        ({"labels": {"t\nx": "v"}}, "job '42' label name holds the control character"),
        ({"nodes": ("n" * (NODE_MAX + 1),)}, "job '42' node is longer than 255 characters"),
        (
            {"start": TIME_MIN - timedelta(seconds=1)},
            "job '42' start is 1999-12-31T23:59:59+00:00: not between 2000-01-01",
        ),
        ({"end": NOW + TIME_AHEAD + timedelta(seconds=1)}, "job '42' end is 2026-11-03T10:00:01+00:00"),
        ({"gpus_allocated": GPUS_MAX + 1}, "job '42' gpus_allocated is 100001: not from 0 to 100,000"),
        ({"gpus_requested": -1}, "job '42' gpus_requested is -1"),
        ({"exit_code": CODE_MAX + 1}, "job '42' exit_code is 2147483648"),
        ({"signal": -9}, "job '42' signal is -9"),
    ],
)
def test_a_field_of_the_schedulers_own_that_cannot_be_stored_is_refused_by_name(
    fields: dict[str, Any], said: str
) -> None:
    with pytest.raises(SchedulerDataError) as caught:
        record_checked(_record(**fields), now=NOW)
    assert str(caught.value).startswith(said)
    assert "\n" not in str(caught.value)


def test_the_bounds_themselves_are_storable() -> None:
    edge = _record(submit=TIME_MIN, end=NOW + TIME_AHEAD, gpus_requested=GPUS_MAX, exit_code=CODE_MAX)
    assert record_checked(edge, now=NOW) == (edge, [])


def test_a_window_is_checked_whole_or_refused_whole() -> None:
    good, named = _record(), _record(job_id="43", job_key="slurm/43", name="a\x1b[31m")
    checked, notes = records_checked([good, named], now=NOW)
    assert [r.job_id for r in checked] == ["42", "43"] and checked[1].name == "a\ufffd[31m"
    assert notes == ["job '43': its name: bytes that are not UTF-8 or control characters replaced by U+FFFD"]
    with pytest.raises(SchedulerDataError, match="job '44' user"):
        records_checked([good, replace(named, job_id="44", user="\x00")], now=NOW)


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=400), key=st.text(min_size=1, max_size=400))
def test_whatever_the_name_and_key_what_is_kept_fits_its_column_and_holds_no_control_character(
    name: str, key: str
) -> None:
    checked, _ = record_checked(_record(name=name, job_key=key), now=NOW)
    for text in (checked.name, checked.job_key):
        assert len(text) <= TEXT_MAX
        assert not any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF or c == "\x7f" for c in text)
