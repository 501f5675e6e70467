"""apps.core.web.renderers: the API's CSV for finance tools. What a spreadsheet opens is shown and never run (a cell
that would start a formula gets a quote, a money amount stays a number), nested fields become `parent.child`
columns, lines end in CRLF so a carriage return inside a cell stays in it, and the streamed CSV of a long list is the
same text as the rendered one, whatever the size of its chunks. Read back with Python's csv module, as a tool would."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.core.web.renderers import FORMULA_STARTS, UnitCSVRenderer, csv_stream


def _read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _render(data: Any) -> str:
    return UnitCSVRenderer().render(data).decode("utf-8")


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-1.50", "-1.50"),  # a money amount stays a number
        ("+3", "+3"),
        ("-.5e3", "-.5e3"),
        ("-1.5.0", "'-1.5.0"),  # not a number: quoted
        ("plain", "plain"),
        ("a=b", "a=b"),  # only the first character matters
    ],
)
def test_a_cell_a_spreadsheet_would_evaluate_is_quoted_and_a_number_is_not(value: str, cell: str) -> None:
    (row,) = _read(_render([{"name": value}]))
    assert row["name"] == cell


def test_nested_fields_become_dotted_columns_and_lists_are_joined() -> None:
    data = {
        "results": [
            {"job": 1, "footprint": {"facility_kwh": 1.5, "cost": {"amount": "0.30", "currency": "EUR"}},
             "gpus": ["GPU-a", "GPU-b"], "flags": [], "periods": [{"day": "2026-11-02"}], "end": None},
        ],
        "next": None,
    }  # fmt: skip
    text = _render(data)
    header = text.split("\r\n", 1)[0]
    assert header == "job,footprint.facility_kwh,footprint.cost.amount,footprint.cost.currency,gpus,flags,periods,end"
    (row,) = _read(text)
    assert row["footprint.cost.amount"] == "0.30" and row["gpus"] == "GPU-a;GPU-b" and row["flags"] == ""
    assert row["periods"] == '[{"day": "2026-11-02"}]'  # lists of objects as JSON
    assert row["end"] == ""  # null is an empty cell, never "None"


def test_a_list_item_that_would_start_a_formula_is_quoted_too() -> None:
    (row,) = _read(_render([{"tags": ["=1+1", "ok"]}]))
    assert row["tags"] == "'=1+1;ok"


def test_rows_with_different_fields_share_one_header_in_first_seen_order() -> None:
    text = _render([{"a": 1}, {"b": 2, "a": 3}, {"c": None}])
    assert text.split("\r\n")[0] == "a,b,c"
    assert _read(text) == [{"a": "1", "b": "", "c": ""}, {"a": "3", "b": "2", "c": ""}, {"a": "", "b": "", "c": ""}]


def test_one_object_is_one_row_and_nothing_is_a_header_alone() -> None:
    assert _read(_render({"team": "vision", "cost": "1.00"})) == [{"team": "vision", "cost": "1.00"}]
    assert _render([]) == "\r\n"
    assert _render(None) == "\r\n"


def test_lines_end_in_crlf_and_a_carriage_return_in_a_cell_stays_in_it() -> None:
    text = _render([{"reason": "line one\r\nline two", "n": 1}, {"reason": "x", "n": 2}])
    assert text.endswith("\r\n") and text.count('"line one\r\nline two"') == 1
    assert [r["reason"] for r in _read(text)] == ["line one\r\nline two", "x"]


ROWS = st.lists(
    st.builds(
        lambda i, name, cost: {"id": i, "name": name, "cost": cost},
        st.integers(),
        st.text(max_size=8),
        st.sampled_from(["1.00", "-2.50", "=1", None]),
    ),
    min_size=1,
    max_size=700,  # past a chunk's 500 rows
)


@settings(max_examples=40, deadline=None)
@given(rows=ROWS)
def test_the_streamed_csv_is_the_rendered_csv_whatever_the_chunks(rows: list[dict[str, Any]]) -> None:
    assert "".join(csv_stream(iter(rows), ["id", "name", "cost"])) == _render(rows)


def test_a_long_list_is_streamed_in_chunks_of_500_rows() -> None:
    rows = [{"id": i} for i in range(1234)]
    chunks = list(csv_stream(iter(rows), ["id"]))
    assert len(chunks) == 3  # 500 (with the header), 500, 234
    assert [c.count("\r\n") for c in chunks] == [501, 500, 234]
    assert "".join(csv_stream(iter([]), ["id"])) == "id\r\n"  # an empty list: its header


def test_every_formula_start_is_quoted() -> None:
    for start in FORMULA_STARTS:
        (row,) = _read(_render([{"x": start + "x"}]))
        assert row["x"] == "'" + start + "x"


def test_a_streamed_row_keeps_only_the_columns_asked_for() -> None:
    (row,) = _read("".join(csv_stream(iter([{"id": 1, "secret": "x", "name": "=evil"}]), ["id", "name"])))
    assert row == {"id": "1", "name": "'=evil"}
