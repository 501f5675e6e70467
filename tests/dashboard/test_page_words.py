"""The rules the walks hold each page's words to (page_words.py), each shown to catch what it is for and to let
the pages' own way through; and the page templates write their figures with the `numbers` filters."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .page_words import piece_problems, shown_problems, vocabulary_codes

TEMPLATES = Path(__file__).resolve().parents[2] / "frontend" / "templates"


def _piece(text: str, **more: Any) -> dict[str, Any]:
    return {"text": text, "where": "text", "headers": "", "block": text, "code": False, "name": False, **more}


def _problems(text: str, **more: Any) -> list[str]:
    return piece_problems(_piece(text, **more), vocabulary_codes())


@pytest.mark.parametrize(
    ("text", "more", "caught"),
    [
        ("Split: whole_gpu 100 %", {}, "code value shown: whole_gpu"),
        ("as its failed_run finding does", {"code": True}, "code value shown: failed_run"),  # in <code> too
        ("stacked by sm_time", {}, "code value shown: sm_time"),
        ("see the job_key column", {}, "code identifier shown: job_key"),
        ("(docs/arithmetic.md, The idle line)", {}, "file path shown: docs/arithmetic.md"),
        ("gpu-x01/gpu4", {}, "GPU not named host/index: gpu-x01/gpu4"),
        ("gpu-x01 / GPU 4", {}, "GPU not named host/index: gpu-x01 / GPU 4"),
        ("GPU 4", {}, "GPU not named host/index: GPU 4"),
        ("1234567 GPU-hours", {}, "thousands not grouped: 1234567"),
        ("123.456789 kWh (GPU)", {}, "more than 3 decimals: 123.456789"),
        ("12.3 EUR", {}, "money not to the EUR minor unit: 12.3 EUR"),
        ("1,235.00 JPY", {}, "money not to the JPY minor unit: 1,235.00 JPY"),
        ("2026-11-02 10:00", {}, "a time without its zone"),
        ("12.5 kWh", {}, "kWh without saying which energy"),
        ("Energy (kWh)", {"where": "chart"}, "kWh without saying which energy"),
    ],
)
def test_each_rule_catches_what_it_is_for(text: str, more: dict[str, Any], caught: str) -> None:
    assert caught in _problems(text, **more)


@pytest.mark.parametrize(
    ("text", "more"),
    [
        ("Whole GPU (exact) 100 %", {}),
        ("python manage.py ingest --start …", {"code": True}),  # a command, in <code>
        ("train_resnet_v2", {"name": True}),  # a job's name as its user chose it (<bdi>)
        ("GPU gpu-x01/4 · hour 2026-11-02 04:00 UTC", {}),
        ("1,234,567 GPU-hours, 0.600 kWh (GPU), 7,814.68 EUR, 1,235 JPY, 81 %", {}),
        ("November 2026 as a FOCUS file (CSV)", {}),  # a year is not a figure
        ("agent 1.4.0 on slurm/1042", {}),  # a version, a job's key
        ("2026-11-02 10:00", {"headers": "Start (UTC) | slurm/1"}),  # its column says the zone
        ("Monday 9 Nov 2026, 07:00 (Europe/Berlin)", {}),
        ("0.500", {"headers": "GPU energy (kWh) | slurm/1"}),
        ("12.5 kWh", {"headers": "This week | GPU energy"}),  # its row says which energy
        ("Facility energy per day (kWh)", {"where": "chart"}),
    ],
)
def test_the_pages_own_way_passes(text: str, more: dict[str, Any]) -> None:
    assert _problems(text, **more) == []


def test_each_problem_is_said_once_with_where_it_was() -> None:
    pieces = [_piece("whole_gpu"), _piece("whole_gpu"), _piece("GPU 3", where="title")]
    assert shown_problems(pieces) == [
        "code value shown: whole_gpu [text] 'whole_gpu'",
        "GPU not named host/index: GPU 3 [title] 'GPU 3'",
    ]


def test_the_vocabularies_codes_are_those_with_a_label_of_their_own() -> None:
    codes = vocabulary_codes()
    assert {"whole_gpu", "sm_time", "failed_run", "idle_allocation", "out_of_memory", "slurm_sacct"} <= codes
    assert not any("_" not in code for code in codes)  # a one-word value is a word ("memory", "failed")


def test_the_pages_write_their_figures_with_the_numbers_filters() -> None:
    # Django's floatformat does not group thousands ("12345.6"): the pages use `qty`, `billed` and the rest of the
    # numbers library, so that every figure reads "12,345.6" (the walks' small worlds have few such figures)
    found = {
        str(path.relative_to(TEMPLATES)): len(re.findall(r"\|floatformat\b", path.read_text()))
        for path in TEMPLATES.rglob("*.html")
    }
    assert {name: n for name, n in found.items() if n} == {}
