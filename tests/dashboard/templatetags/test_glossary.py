"""The glossary's template filters (apps/dashboard/templatetags/glossary.py): a split method, a finding and an energy
said one way each, with how exact it is and what it means; a finding's window and evidence in readable parts, each
with its unit; an audit entry's changes. The same words on every page: tests/dashboard/test_glossary_pages.py and
the walks of tests/dashboard/page_words.py."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from django.template import Context, Template

from apps.dashboard.templatetags import glossary as g
from apps.jobs.methods import Method
from apps.waste.kinds import FlagKind

T0 = datetime(2026, 11, 2, 4, tzinfo=UTC)


def _flag(evidence: dict[str, Any] | None = None, **fields: Any) -> SimpleNamespace:
    job = fields.pop("job", None)
    return SimpleNamespace(
        **{"evidence": evidence, "gpu_id": None, "gpu": None, "hour": None, "job": job, "job_id": job and 1,
           "kind": "memory_hog", **fields}
    )  # fmt: skip


# methods and findings


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("whole_gpu", "Whole GPU — exact"),
        ("sm_time", "SM time — close"),
        ("equal", "Equal shares — rough"),
        ("estimated", "Estimated — not measured"),  # not "Estimated — estimated — not measured"
    ],
)
def test_a_method_is_its_name_and_how_exact_it_is(value: str, text: str) -> None:
    assert g.method_text(value) == text
    assert "(" not in g.method_name(value)


def test_every_method_and_finding_has_a_text_and_a_meaning() -> None:
    for method in Method:
        assert g.method_text(method.value).startswith(g.method_name(method.value) + " — ")
    for kind in FlagKind:
        assert g.finding_text(kind.value).startswith(g.finding_label(kind.value) + " — ")
        assert g.finding_meaning(kind.value)


def test_what_is_not_a_method_or_a_finding_is_shown_as_it_is_and_escaped() -> None:
    assert g.method_text("nope") == "nope" and g.finding_text("nope") == "nope" and g.finding_meaning("nope") == ""
    assert g.method_term("<b>") == '<span class="term">&lt;b&gt;</span>'
    assert g.finding_term("<i>") == '<span class="term">&lt;i&gt;</span>'
    assert g.status_label("closed-ish") == "closed-ish"


def test_a_term_carries_its_meaning_as_its_title() -> None:
    term = g.method_term("whole_gpu")
    assert term.startswith('<span class="term" data-method="whole_gpu" title="One job on the GPU')
    assert term.endswith(">Whole GPU — exact</span>")
    finding = g.finding_term("counter_reset")
    assert 'data-kind="counter_reset"' in finding and finding.endswith(">Counter Reset — exact</span>")


def test_the_filters_are_registered_for_the_templates() -> None:
    html = Template('{% load glossary %}{{ "sm_time"|method_text }} / {{ "facility"|energy_label }}').render(Context())
    assert html == "SM time — close / Facility energy (kWh)"


# quantities


def test_quantities_in_their_units_and_nothing_as_zero() -> None:
    assert g.kwh_of(3.6e6) == 1.0 and g.kwh_of(None) == 0.0
    assert g.gpu_hours(5400) == 1.5 and g.gpu_hours("") == 0.0
    assert g.sampled_in_hour(3700) == 3600.0 and g.sampled_in_hour(1800) == 1800.0
    assert g.over_the_hour(3600.5) and not g.over_the_hour(3600)
    assert g.energy_label("facility") == "Facility energy (kWh)" and g.energy_unit("gpu") == "kWh (GPU)"
    assert g.meter_label("dcgm") == "dcgm-exporter"
    assert g.sampled_cap_note()


# waste_window


def test_a_findings_window_ends_at_the_end_of_its_last_hour() -> None:
    flag = _flag({"from": "2026-11-02T04:00:00+00:00", "to": "2026-11-02T06:00:00+00:00"})
    assert g.waste_window(flag) == "2026-11-02 04:00 UTC → 2026-11-02 07:00 UTC"


def test_a_findings_window_falls_back_to_its_hour_then_its_jobs_span() -> None:
    assert g.waste_window(_flag({}, hour=T0)) == "2026-11-02 04:00 UTC"
    running = SimpleNamespace(start=T0, end=None, currency="EUR")
    assert g.waste_window(_flag(None, job=running)) == "2026-11-02 04:00 UTC → running"
    assert g.waste_window(_flag(None)) == ""


# evidence_items


def test_a_gpu_hour_findings_evidence_names_its_gpu_hour_and_its_energies() -> None:
    gpu = SimpleNamespace(node=SimpleNamespace(hostname="gpu-x01"), index=4)
    flag = _flag(
        {"device_energy_j": 3.6e6, "dcgm_energy_j": 3.0e6, "residual_j": 0.6e6, "residual_ratio": 0.2,
         "counter_resets": 1, "contract_gaps": ["gpu_time"], "agent_version": "1.4.0"},
        gpu_id=9, gpu=gpu, hour=T0, kind="conservation",
    )  # fmt: skip
    assert g.evidence_items(flag) == [
        "GPU gpu-x01/4",
        "hour 2026-11-02 04:00 UTC",
        "1 counter reset",
        "1.000 kWh (GPU) metered by the agent",
        "0.833 kWh (GPU) by DCGM",
        "residual 0.167 kWh (GPU) (+20.0 %)",
        "agent without gpu_time",
        "agent 1.4.0",
    ]


def test_a_jobs_evidence_says_each_figure_with_its_unit_and_the_jobs_currency() -> None:
    job = SimpleNamespace(start=T0, end=None, currency="EUR")
    flag = _flag(
        {"gpus": ["a", "b"], "sm_percent": 0.34, "memory_bytes": 10 * 1024**3, "coverage": 0.5, "sampled_s": 3600,
         "expected_s": 7200, "threshold": 0.8, "facility_kwh": 1.234, "co2e_kg": 0.44, "cost": "1.20"},
        job=job,
    )  # fmt: skip
    assert g.evidence_items(flag) == [
        "2 GPUs",
        "SM 0.3 %",
        "10.0\xa0GB held",
        "coverage 50 %",
        "seen 1.0 of 2.0 GPU-h",
        "threshold 80 %",
        "1.23 kWh (facility)",
        "0.4 kg CO2e",
        "1.20 EUR",
    ]


def test_a_failed_runs_evidence_says_how_it_ended() -> None:
    by_signal = _flag({"state": "failed", "signal": 9, "exit_code": 0, "gpu_hours_blocked": 12.25})
    assert g.evidence_items(by_signal)[:3] == ["ended failed", "signal 9", "12.2 GPU-h blocked"]
    by_code = _flag({"state": "not-a-state", "exit_code": 3, "unused_gpus": 1, "unused_gpu_hours": 2})
    assert g.evidence_items(by_code) == ["ended not-a-state", "exit code 3", "1 allocated GPU never used (2.0 GPU-h)"]


def test_an_energy_is_said_once_the_facilitys_first() -> None:
    assert g.evidence_items(_flag({"facility_kwh": 2.0, "energy_kwh": 1.0, "energy_j": 3.6e6})) == [
        "2.00 kWh (facility)"
    ]
    assert g.evidence_items(_flag({"energy_kwh": 1.0, "energy_j": 7.2e6})) == ["1.00 kWh (GPU)"]
    assert g.evidence_items(_flag({"energy_j": 7.2e6})) == ["2.00 kWh (GPU)"]
    # an estimate says its share of the energy instead
    assert g.evidence_items(_flag({"estimated_energy_kwh": 0.5, "energy_kwh": 2.0})) == [
        "0.50 of 2.00 kWh (GPU) estimated"
    ]


def test_no_evidence_is_no_parts() -> None:
    assert g.evidence_items(_flag(None)) == []
    assert g.evidence_items(_flag({"memory_bytes": 0, "counter_resets": 0, "unused_gpus": 0})) == []
    # a GPU-hour finding has no job, so no currency: its cost alone
    assert g.evidence_items(_flag({"cost": "1.00"})) == ["1.00"]


# decisions


def test_a_decision_lists_what_changed_in_words() -> None:
    entry = SimpleNamespace(
        before={"status": "open", "excluded_from_bill": False, "team": "vision", "note": "x"},
        after={"status": "acknowledged", "excluded_from_bill": True, "team": "vision", "job_group": None},
    )
    assert g.decision_changes(entry) == [
        "status: Open → Acknowledged",
        "team's bill: on it → excluded",
        "note: x → none",
    ]


def test_a_decision_that_changed_nothing_lists_what_it_set() -> None:
    entry = SimpleNamespace(before={"team": "vision"}, after={"team": "vision"})
    assert g.decision_changes(entry) == ["team: vision → vision"]
    assert g.decision_changes(SimpleNamespace(before=None, after=None)) == []


def test_a_decisions_action_in_words() -> None:
    assert g.decision_label("exclude") == "excluded from the team's bill"
    assert g.decision_label("reassign_group") == "reassigned to another job group"
    assert g.decision_label("new_action") == "new action"


def test_advice_is_given_in_the_jobs_currency() -> None:
    job = SimpleNamespace(currency="USD")
    flag = _flag({"memory_bytes": 10 * 1024**3, "sm_percent": 0.3, "cost": "1.00"}, job=job)
    assert "(1.00 USD)" in g.advice(flag)
    # without a job there is no currency: the amount is not said bare
    assert "1.00" not in g.advice(_flag({"memory_bytes": 10 * 1024**3, "sm_percent": 0.3, "cost": "1.00"}))
