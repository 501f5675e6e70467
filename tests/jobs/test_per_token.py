"""apps.jobs.per_token: energy, carbon and money per token served, per model, team or cluster (pure)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.core.units.footprint import Footprint
from apps.jobs.per_token import Served, ServingJob, model_shares, per_token

# docs/arithmetic.md, "Per token served": one H200 serving one model for 10 h at 400 W on average, 1,000 output
# tokens a second; PUE 1.2, 0.35 kg/kWh, 3,000 kg embodied per 8-GPU server over 43,800 h; 2.50 EUR a GPU-hour and
# 0.20 EUR a kWh.
EMBODIED_KG = 10 * 3000 / 43800 / 8
WORKED = ServingJob(
    job_id=1,
    team="search",
    cluster="c1",
    currency="EUR",
    footprint=Footprint(
        energy_j=10 * 3600 * 400.0,
        gpu_hours=10.0,
        facility_kwh=4.8,
        operational_kg=4.8 * 0.35,
        embodied_kg=EMBODIED_KG,
        cost=Decimal("25.960000"),
    ),
    by_model={"llama": Served(output_tokens=36_000_000, prompt_tokens=108_000_000, requests=144_000)},
)


def test_the_worked_example() -> None:
    (line,) = per_token([WORKED], group_by="model")
    assert line.energy_j_per_1k_tokens == pytest.approx(400.0)
    assert line.energy_wh_per_1k_tokens == pytest.approx(0.1111, abs=1e-4)
    assert line.co2e_g_per_1k_tokens == pytest.approx(0.04905, abs=1e-5)
    assert line.cost_per_million_tokens == Decimal("0.7211")
    assert (line.served.requests, line.jobs, line.billed_cost) == (144_000, 1, Decimal("25.96"))


def test_a_job_serving_two_models_shares_its_bill_by_output_tokens_rounded_first() -> None:
    # given 1.005 EUR (1.00 billed, half-even) over 1.2 M llama and 0.3 M mistral tokens
    job = ServingJob(
        job_id=2, team="ads", cluster="c1", currency="EUR",
        footprint=Footprint(energy_j=1_000_000.0, operational_kg=0.1, cost=Decimal("1.005")),
        by_model={"llama": Served(output_tokens=1_200_000), "mistral": Served(output_tokens=300_000)},
    )  # fmt: skip
    # when
    lines = {line.group: line for line in per_token([job], group_by="model")}
    # then the parts add up to the job's bill, and the energy splits 4:1
    assert (lines["llama"].cost, lines["mistral"].cost) == (Decimal("0.80"), Decimal("0.20"))
    assert lines["llama"].energy_j == pytest.approx(800_000.0)
    assert lines["mistral"].energy_j_per_1k_tokens == pytest.approx(200_000 / 300_000 * 1000)
    # grouped by team, the same job is one line with its whole bill
    (team,) = per_token([job], group_by="team")
    assert team.cost == Decimal("1.00") and team.served.output_tokens == 1_500_000 and team.jobs == 1


def test_groups_add_their_jobs_and_order_by_output() -> None:
    other = ServingJob(
        job_id=3, team="search", cluster="c2", currency="EUR",
        footprint=Footprint(energy_j=3_600_000.0, operational_kg=0.5, embodied_kg=0.1, cost=Decimal("3.333")),
        by_model={"llama": Served(output_tokens=9_000_000)},
    )  # fmt: skip
    (team,) = per_token([WORKED, other], group_by="team")
    assert team.energy_j == pytest.approx(14_400_000 + 3_600_000)
    assert team.served.output_tokens == 45_000_000 and team.cost == Decimal("25.96") + Decimal("3.33")
    assert [c.group for c in per_token([other, WORKED], group_by="cluster")] == ["c1", "c2"]


def test_unknown_stays_unknown() -> None:
    # a site without a grid zone: no CO2e figure, not 0
    no_zone = ServingJob(4, "t", "c", "EUR", Footprint(energy_j=1e6, embodied_kg=0.2), {"m": Served(1_000_000)})
    (line,) = per_token([no_zone], group_by="model")
    assert line.co2e_kg is None and line.co2e_g_per_1k_tokens is None and line.energy_j_per_1k_tokens == 1000.0
    # prompt tokens only (an embedding model): no figure per output token
    (embed,) = per_token([ServingJob(5, "t", "c", "EUR", Footprint(energy_j=1e6), {"e": Served(0, 5e6, 10)})],
                         group_by="model")  # fmt: skip
    assert embed.energy_j_per_1k_tokens is None and embed.cost_per_million_tokens is None
    # two currencies: their amounts are never added
    usd = ServingJob(6, "t", "c", "USD", Footprint(energy_j=1e6, cost=Decimal(1)), {"m": Served(1_000_000)})
    (mixed,) = per_token([no_zone, usd], group_by="model")
    assert mixed.billed_cost is None and mixed.cost_per_million_tokens is None and mixed.currency == "EUR,USD"


def test_a_job_with_no_measured_hour_is_counted_apart_never_at_0_j() -> None:
    unseen = ServingJob(7, "search", "c1", "EUR", None, {"llama": Served(output_tokens=5_000_000)})
    (line,) = per_token([WORKED, unseen], group_by="model")
    assert line.served.output_tokens == 36_000_000 and line.unmetered.output_tokens == 5_000_000
    assert line.energy_j_per_1k_tokens == pytest.approx(400.0) and line.jobs == 2
    (alone,) = per_token([unseen], group_by="model")
    assert alone.energy_j_per_1k_tokens is None


def test_model_shares_fall_back_from_output_to_prompt_to_requests_to_equal() -> None:
    assert model_shares({"a": Served(3, 0, 0), "b": Served(1, 9, 9)}) == {"a": 0.75, "b": 0.25}
    assert model_shares({"a": Served(0, 1, 0), "b": Served(0, 3, 0)}) == {"a": 0.25, "b": 0.75}
    assert model_shares({"a": Served(0, 0, 2), "b": Served(0, 0, 2)}) == {"a": 0.5, "b": 0.5}
    assert model_shares({"a": Served(), "b": Served()}) == {"a": 0.5, "b": 0.5}
    with pytest.raises(ValueError):
        per_token([], group_by="user")
