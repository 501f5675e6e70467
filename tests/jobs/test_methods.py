"""The split methods (apps/jobs/methods.py, pure): each method defined once, with its label, exactness, meaning and
colour, from exact to rough; the models' choices and the pages' legend made from the one list."""

from __future__ import annotations

from apps.jobs.methods import METHOD_CHOICES, METHOD_INFO, METHODS, Method, method_legend

EXACTNESS_ORDER = ("exact", "close", "rough", "estimate")


def test_every_method_is_described_once() -> None:
    assert set(METHOD_INFO) == set(Method)
    assert len({m.info.colour for m in Method}) == len(Method)  # each its own colour on the charts
    assert len({m.label for m in Method}) == len(Method)
    assert all(m.info.meaning.endswith(".") for m in Method)


def test_methods_go_from_exact_to_rough() -> None:
    ranks = [EXACTNESS_ORDER.index(m.info.exactness) for m in Method]
    assert ranks == sorted(ranks)
    assert Method.WHOLE_GPU.info.exactness == "exact" and Method.ESTIMATED.info.exactness == "estimate"


def test_a_label_says_its_exactness_in_brackets() -> None:
    for m in Method:
        assert m.label.endswith(")") and " (" in m.label
    assert Method.SM_TIME.label == "SM time (close)"


def test_the_choices_and_the_legend_come_from_the_one_list_in_its_order() -> None:
    assert METHODS == tuple(m.value for m in Method) == tuple(v for v, _ in METHOD_CHOICES)
    legend = method_legend()
    assert [entry["method"] for entry in legend] == list(METHODS)
    assert legend[0] == {
        "method": "whole_gpu",
        "label": "Whole GPU (exact)",
        "exactness": "exact",
        "meaning": "One job on the GPU: all the sample's energy is the job's.",
        "colour": "#1b6ca8",
    }


def test_a_method_is_its_string() -> None:
    assert Method("sm_time") is Method.SM_TIME and f"{Method.SM_TIME}" == "sm_time"
