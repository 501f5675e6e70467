"""The frontier of a recurring workload (apps.jobs.frontier): points per power limit with their spread, the Pareto
front, the advice within a slack and its evidence, the plan for a group that never varied, and the month's saving;
the worked example of docs/arithmetic.md ("The frontier of a recurring workload")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.jobs.frontier import Point, Run, Spread, frontier, pareto_front, plan_caps, saving

STEPS = 1_000.0


def _runs(cap_w: float, pairs: list[tuple[float, float]], first_id: int = 1) -> list[Run]:
    """Runs of 1,000 steps at a limit, each (s per step, J per step)."""
    return [
        Run(job_id=first_id + k, seconds=s * STEPS, units=STEPS, energy_j=j * STEPS, cap_w=cap_w, gpus=8)
        for k, (s, j) in enumerate(pairs)
    ]


def _worked_example() -> list[Run]:
    return [
        *_runs(700, [(2.00, 1200), (2.02, 1212), (1.98, 1188), (2.00, 1200)], first_id=1),
        *_runs(600, [(2.05, 1230)], first_id=10),  # one run: dominated by 700 W, and too few to advise
        *_runs(500, [(2.14, 1070), (2.16, 1075), (2.12, 1065)], first_id=20),
        *_runs(400, [(2.36, 944), (2.38, 950), (2.34, 940)], first_id=30),
    ]


def test_worked_example_of_the_docs() -> None:
    # when
    result = frontier(_worked_example(), unit="step", slack=0.10, min_runs=3, top_w=700)
    # then the points, highest limit first, with their medians, quartiles and runs
    assert [(p.cap_w, p.runs) for p in result.points] == [(700, 4), (600, 1), (500, 3), (400, 3)]
    at_700 = result.points[0]
    assert at_700.s_per_unit == Spread(2.00, 1.995, 2.005)
    assert at_700.j_per_unit == Spread(1200, 1197, 1203)
    # the front: 600 W is beaten on both by 700 W
    assert [p.cap_w for p in result.front] == [700, 500, 400]
    # the current point is the most used; within 10 % more time, 500 W uses least energy
    assert result.current is at_700
    assert result.advice is not None and result.advice.chosen.cap_w == 500
    assert result.advice.energy_change_pct == pytest.approx(-10.833, abs=1e-3)
    assert result.advice.time_change_pct == pytest.approx(7.0)
    assert result.text == (
        "at 500 W instead of 700 W this group's runs used 11 % less energy per step and took 7 % longer "
        "(3 runs at 500 W, 4 at 700 W)"
    )
    assert result.plan is None


def test_a_wider_slack_reaches_the_lower_limit() -> None:
    result = frontier(_worked_example(), unit="step", slack=0.20, min_runs=3)
    assert result.advice is not None and result.advice.chosen.cap_w == 400
    assert result.text.startswith(
        "at 400 W instead of 700 W this group's runs used 21 % less energy per step and took 18 % longer"
    )


def test_a_point_with_too_few_runs_is_shown_but_not_advised() -> None:
    # given 500 W with two runs only
    runs = [r for r in _worked_example() if r.job_id not in (22, 30, 31, 32)]
    # when
    result = frontier(runs, unit="step", slack=0.10, min_runs=3)
    # then 700 W stays: nothing else has three runs
    assert {p.cap_w: p.runs for p in result.points}[500] == 2
    assert result.advice is not None and not result.advice.changes
    assert result.text == (
        "stay at 700 W: no limit with 3 runs or more used less energy per step within 10 % more time (4 runs at 700 W)"
    )


def test_no_advice_while_the_current_limit_has_too_few_runs() -> None:
    runs = _runs(700, [(2.0, 1200), (2.0, 1200)]) + _runs(500, [(2.1, 1070)], first_id=10)
    result = frontier(runs, unit="step", min_runs=3)
    assert result.advice is None and result.plan is None
    assert result.text == "not yet: 2 runs at the most used limit, 700 W; advice needs 3"


def test_a_group_that_never_varied_gets_a_plan_in_zeus_s_manner() -> None:
    # given a group whose runs all ran at 700 W on H100s (TDP 700 W)
    runs = _runs(700, [(2.00, 1200), (2.02, 1212), (1.98, 1188), (2.00, 1200)])
    # when
    result = frontier(runs, unit="step", top_w=700)
    # then: 700, 600, 500, 400 W, 10 + 40 steps each; the 150 steps of the three new limits at 2 s and 1,200 J each
    assert result.advice is None and result.plan is not None
    assert result.plan.caps_w == [700, 600, 500, 400]
    assert (result.plan.warmup_steps, result.plan.profile_steps) == (10, 40)
    assert result.plan.trial_units == 150
    assert result.plan.trial_s == pytest.approx(300.0)
    assert result.plan.trial_j == pytest.approx(180_000.0)
    assert result.text == (
        "every run so far at 700 W: try 700 W, 600 W, 500 W, 400 W, 10 steps to settle and 40 measured at each, in "
        "the group's next run; the 150 steps at the limits not tried yet take about 5.0 min and 0.05 kWh of GPU energy "
        "at the current pace"
    )


def test_plan_limits_go_down_to_half_the_top_rounded_up() -> None:
    assert plan_caps(top_w=700) == [700, 600, 500, 400]
    assert plan_caps(top_w=400) == [400, 300, 200]
    assert plan_caps(top_w=350) == [350, 250]


def test_runs_whose_limit_changed_or_is_unknown_are_counted_apart() -> None:
    runs = [
        *_runs(700, [(2.0, 1200)] * 3),
        Run(job_id=50, seconds=2000, units=1000, energy_j=1.1e6, cap_w=600, varied=True),
        Run(job_id=51, seconds=2000, units=1000, energy_j=1.1e6, cap_w=None),
    ]
    result = frontier(runs, unit="step")
    assert (result.varied_runs, result.unknown_runs) == (1, 1)
    assert [p.cap_w for p in result.points] == [700]


def test_the_month_s_saving_of_the_worked_example() -> None:
    # given the advice of the worked example (500 W) and a month of 20 runs at 700 W of 50,000 steps on 8 GPUs
    advice = frontier(_worked_example(), unit="step", slack=0.10)
    month = [Run(job_id=100 + k, seconds=100_000, units=50_000, energy_j=60e6, cap_w=700, gpus=8) for k in range(20)]
    month.append(Run(job_id=200, seconds=2_140, units=1_000, energy_j=1.07e6, cap_w=500, gpus=8))  # already there
    # when
    found = saving(advice, month)
    # then 1,000,000 steps x (1,200 - 1,070) J = 130 MJ (36.1 GPU kWh), for 0.14 s more a step: 38.9 h, 311 GPU-hours
    assert (found.runs, found.units) == (20, 1_000_000)
    assert found.energy_j == pytest.approx(130e6)
    assert found.energy_j / 3.6e6 == pytest.approx(36.111, abs=1e-3)
    assert found.extra_s == pytest.approx(140_000)
    assert found.extra_gpu_h == pytest.approx(311.111, abs=1e-3)
    # and the docs' footprint of it: node overhead 1.3, PUE 1.2, 0.35 kg/kWh, 0.20 EUR/kWh
    facility_kwh = found.energy_j / 3.6e6 * 1.3 * 1.2
    assert (round(facility_kwh, 1), round(facility_kwh * 0.35, 1), round(facility_kwh * 0.20, 2)) == (56.3, 19.7, 11.27)


def test_no_saving_without_a_change() -> None:
    result = frontier(_runs(700, [(2.0, 1200)] * 3), unit="step")
    assert saving(result, _runs(700, [(2.0, 1200)])).energy_j == 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        frontier([], unit="step", slack=-0.1)
    with pytest.raises(ValueError):
        frontier([], unit="step", min_runs=0)


_pairs = st.tuples(st.floats(0.1, 10.0), st.floats(1.0, 5_000.0))
_caps = st.sampled_from([700.0, 600.0, 500.0, 400.0])


def _point(cap_w: float, s: float, j: float) -> Point:
    return Point(cap_w=cap_w, runs=1, s_per_unit=Spread(s, s, s), j_per_unit=Spread(j, j, j))


@given(st.lists(_pairs, min_size=1, max_size=12))
def test_the_front_is_exactly_the_points_no_other_beats(pairs: list[tuple[float, float]]) -> None:
    points = [
        Point(cap_w=float(k), runs=1, s_per_unit=Spread(s, s, s), j_per_unit=Spread(j, j, j))
        for k, (s, j) in enumerate(pairs)
    ]
    front = pareto_front(points)
    assert front  # never empty
    for p in points:
        beaten = any(
            q.s_per_unit.median <= p.s_per_unit.median
            and q.j_per_unit.median <= p.j_per_unit.median
            and (q.s_per_unit.median, q.j_per_unit.median) != (p.s_per_unit.median, p.j_per_unit.median)
            for q in points
        )
        assert (p.cap_w in front) is not beaten


@given(
    st.lists(st.tuples(st.sampled_from([700.0, 600.0, 500.0, 400.0]), _pairs), min_size=1, max_size=30),
    st.floats(0.0, 0.5),
)
def test_the_advice_never_leaves_the_slack_nor_uses_more_energy(runs_drawn, slack: float) -> None:
    runs = [
        Run(job_id=k, seconds=s * 100, units=100, energy_j=j * 100, cap_w=cap)
        for k, (cap, (s, j)) in enumerate(runs_drawn)
    ]
    result = frontier(runs, unit="step", slack=slack, min_runs=2)
    if result.advice is not None:
        current, chosen = result.advice.current, result.advice.chosen
        assert chosen.s_per_unit.median <= current.s_per_unit.median * (1 + slack) + 1e-12
        assert chosen.j_per_unit.median <= current.j_per_unit.median
        assert chosen.runs >= 2
