"""apps.core.units.glossary (pure): the shared words. Every energy says which one it is, in its label and its unit; a
GPU has one name; a meter and an exactness are named by their words, and what the glossary does not know is shown as
it is. How the pages use them: tests/dashboard/templatetags/test_glossary.py and
tests/dashboard/test_glossary_pages.py."""

from __future__ import annotations

import pytest

from apps.core.units.glossary import (
    ENERGY,
    EXACTNESS,
    FINDING_BASIS,
    METERS,
    SAMPLED_CAP_NOTE,
    EnergyKind,
    energy_label,
    energy_unit,
    exactness_words,
    gpu_name,
    meter_label,
)


def test_every_energy_kind_is_described_once_and_no_kwh_stands_alone() -> None:
    assert set(ENERGY) == set(EnergyKind)
    units = [info.unit for info in ENERGY.values()]
    labels = [info.label for info in ENERGY.values()]
    assert len(set(units)) == len(units) and len(set(labels)) == len(labels)
    for kind in EnergyKind:
        assert energy_unit(kind.value).startswith("kWh (") and energy_unit(kind.value) != "kWh"
        assert energy_label(kind.value) == f"{ENERGY[kind].label} (kWh)"
        assert ENERGY[kind].meaning.endswith(".")


@pytest.mark.parametrize(
    ("kind", "unit"), [("gpu", "kWh (GPU)"), ("server", "kWh (server)"), ("facility", "kWh (facility)")]
)
def test_each_energy_is_named_in_its_unit(kind: str, unit: str) -> None:
    assert energy_unit(kind) == unit


def test_an_energy_the_glossary_does_not_know_is_an_error_not_a_word() -> None:
    # a template asking for a kind nobody defined is a bug: it must not print a made-up heading
    with pytest.raises(ValueError):
        energy_label("kinetic")
    with pytest.raises(ValueError):
        energy_unit("")


def test_the_facility_energy_is_what_carbon_and_cost_come_from() -> None:
    # the chain GPU -> server -> facility, and the one that the grid delivered
    assert "node overhead" in ENERGY[EnergyKind.SERVER].meaning
    assert "PUE" in ENERGY[EnergyKind.FACILITY].meaning and "grid" in ENERGY[EnergyKind.FACILITY].meaning


@pytest.mark.parametrize(("host", "index", "name"), [("gpu-x01", 4, "gpu-x01/4"), ("a", 0, "a/0"), ("", 7, "/7")])
def test_a_gpu_is_its_host_and_its_index(host: str, index: int, name: str) -> None:
    assert gpu_name(host, index) == name


def test_meters_by_their_names_and_an_unknown_one_as_it_is() -> None:
    assert [meter_label(s) for s in ("agent", "dcgm", "estimated")] == ["fleetwatt-agent", "dcgm-exporter", "estimated"]
    assert meter_label("ipmi") == "ipmi" and meter_label("") == ""
    assert set(METERS) == {"agent", "dcgm", "estimated"}


def test_exactness_by_its_words_and_an_unknown_key_as_it_is() -> None:
    assert {k: exactness_words(k) for k in EXACTNESS} == {k: e.words for k, e in EXACTNESS.items()}
    assert exactness_words("scheduler") == "the scheduler's word"
    assert exactness_words("precise") == "precise"
    assert all(e.meaning.endswith((".", ")")) for e in EXACTNESS.values())


def test_every_findings_basis_is_an_exactness_the_glossary_describes() -> None:
    assert set(FINDING_BASIS.values()) <= set(EXACTNESS)
    # what nobody measured says so; what the scheduler's accounting says is its word
    assert FINDING_BASIS["unobserved"] == FINDING_BASIS["estimated_occupancy"] == "estimate"
    assert FINDING_BASIS["failed_run"] == "scheduler"


def test_the_sampled_cap_note_gives_the_hour_and_the_case_that_passes_it() -> None:
    assert "3,600 s" in SAMPLED_CAP_NOTE and "61 samples at 60 s = 3,660 s" in SAMPLED_CAP_NOTE
