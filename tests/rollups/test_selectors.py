"""The rollup documents (apps/rollups/selectors.py): a cluster's rollup is its jobs plus its idle line to the joule and
the cent; a team's holds its billed jobs only, and its own waste; whole UTC days are read from the daily sums (no hour
row read) to the figures the rows give; the idle line a team sees and its share of it, the teams' shares adding up to
the fleet's line; the documents kept in the cache are the documents; two intensity bases are never added up."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

from apps.core.units.footprint import Footprint
from apps.fleet.models import Cluster
from apps.jobs.models import JobGpuHour
from apps.rollups.models import ClusterDay, TeamWasteDay
from apps.rollups.selectors import (
    CLUSTER_DAY_IDLE_COLUMNS,
    IdleLine,
    MixedBasisError,
    Period,
    cluster_day_idle_line,
    cluster_rollup,
    cluster_rollup_cache_key,
    cluster_rollup_cached,
    clusters_basis,
    job_group_rollup,
    period_figures,
    team_idle,
    team_rollup,
    team_rollup_cache_key,
    team_rollup_cached,
    teams_with_waste_on,
)
from apps.telemetry.models import GpuHour
from tests.factories import ClusterFactory, SiteFactory, TeamDayFactory
from tests.rollups.day_world import DAY1, DAY2, END, IDLE_J, ROW_J, START, UNSEEN_COST, DayWorld, day_world_build

pytestmark = pytest.mark.django_db

FROM_ROWS = END - timedelta(seconds=1)  # not a midnight: the same hours, read from the rows


@pytest.fixture
def world() -> DayWorld:
    return day_world_build()


def _close(doc: Any) -> Any:
    """A document with its floats compared to their last bits or so (days added up, not rows)."""
    if isinstance(doc, float):
        return pytest.approx(doc, rel=1e-12, abs=1e-9)
    if isinstance(doc, dict):
        return {k: _close(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_close(v) for v in doc]
    return doc


def _total(doc: dict[str, Any], key: str, line: str | None = None) -> Any:
    parts = [(p[line] or {}).get(key, 0) if line else p[key] for p in doc["periods"]]
    return sum(parts, Decimal(0) if key == "cost" else 0.0)


def test_a_clusters_rollup_is_its_jobs_plus_its_idle_line_to_the_joule_and_the_cent(world: DayWorld) -> None:
    # when the cluster's two days are rolled up
    doc = cluster_rollup(cluster=world.cluster, start=START, end=END, granularity="day")
    # then its jobs and its idle line add up to what its GPUs drew and what its rows and GPU-hours cost
    hours = GpuHour.objects.filter(gpu__node__cluster=world.cluster)
    drawn = hours.aggregate(j=Sum("device_energy_j"))["j"]
    cost = JobGpuHour.objects.aggregate(c=Sum("cost"))["c"] + hours.aggregate(c=Sum("idle_cost"))["c"]
    assert _total(doc, "energy_j") + _total(doc, "energy_j", "idle") == pytest.approx(drawn, rel=1e-12)
    assert _total(doc, "cost") + _total(doc, "cost", "idle") == cost
    # each day's idle line: its GPU-hours with no job, the part nobody saw within it
    day1, day2 = doc["periods"]
    assert (day1["period"], day2["period"]) == (DAY1.isoformat(), DAY2.isoformat())
    assert (day1["idle"]["energy_j"], day1["idle"]["gpu_hours"]) == (pytest.approx(2 * IDLE_J), pytest.approx(2.0))
    assert (day1["unobserved"]["energy_j"], day1["unobserved"]["cost"]) == (pytest.approx(IDLE_J / 2), UNSEEN_COST)
    assert (day2["idle"]["gpu_hours"], day2["unobserved"]["energy_j"]) == (pytest.approx(1.0), 0.0)
    # and its embodied CO2e per useful GPU-hour counts the idle line's against the jobs' hours
    useful = _total(doc, "gpu_hours")
    embodied = _total(doc, "embodied_kg") + _total(doc, "embodied_kg", "idle")
    assert useful == pytest.approx(9.0) and doc["embodied_kg_per_useful_gpu_hour"] == pytest.approx(embodied / 9.0)
    assert (doc["intensity_basis"], doc["intensity_zones"], doc["currency"]) == ("location", ["DE"], "EUR")


def test_a_teams_rollup_holds_its_billed_jobs_and_no_other_teams(world: DayWorld) -> None:
    # when each team's days are rolled up, by day and by week
    vision = team_rollup(team=world.vision, start=START, end=END, granularity="day")
    nlp = team_rollup(team=world.nlp, start=START, end=END, granularity="day")
    week = team_rollup(team=world.vision, start=START, end=END, granularity="week")
    # then vision's are its billed jobs' rows (its excluded job's are on nobody's bill), nlp's its own
    assert [p["energy_j"] for p in vision["periods"]] == [pytest.approx(5 * ROW_J), pytest.approx(2 * ROW_J)]
    assert _total(vision, "cost") == Decimal("0.333333") * 7
    assert [p["energy_j"] for p in nlp["periods"]] == [pytest.approx(ROW_J)]
    assert _total(nlp, "cost") == Decimal("0.125")
    # and the cluster's jobs are the two teams' and the excluded job
    cluster = cluster_rollup(cluster=world.cluster, start=START, end=END, granularity="day")
    assert _total(cluster, "cost") == _total(vision, "cost") + _total(nlp, "cost") + Decimal(1)
    # a week is its days added up; every row whole-GPU, so the energy's interval is the energy
    (period,) = week["periods"]
    assert period["period"] == "2026-11-02"
    assert period["energy_j"] == pytest.approx(7 * ROW_J) and period["cost"] == _total(vision, "cost")
    assert period["energy_by_method_j"] == {"whole_gpu": pytest.approx(7 * ROW_J)}
    assert period["energy_low_j"] == period["energy_high_j"] == pytest.approx(period["energy_j"])
    # no idle line on a team's bill unless the site shares it
    assert all(p["idle"] is None for p in vision["periods"])


@pytest.mark.parametrize("granularity", ["day", "week", "month"])
def test_whole_days_are_read_from_the_daily_sums_to_the_figures_of_the_rows(world: DayWorld, granularity: str) -> None:
    rollups = [
        (team_rollup, {"team": world.vision}),
        (cluster_rollup, {"cluster": world.cluster}),
        (job_group_rollup, {"group": world.group}),
    ]
    for rollup, subject in rollups:
        # when a rollup of whole UTC days is read
        with CaptureQueriesContext(connection) as read:
            from_days = rollup(**subject, start=START, end=END, granularity=granularity)
        # then no hour row was read, and the rows of the same hours give the same figures
        assert not [q["sql"] for q in read.captured_queries if "jobs_jobgpuhour" in q["sql"]], rollup.__name__
        from_rows = rollup(**subject, start=START, end=FROM_ROWS, granularity=granularity)
        assert from_days == _close(from_rows), rollup.__name__


def test_a_rollup_over_sites_on_two_intensity_bases_is_refused(world: DayWorld) -> None:
    # given a day of vision's on a cluster whose site reports market-based intensity
    market = ClusterFactory(name="c2", site=SiteFactory(name="site-m", grid_zone="FR", intensity_basis="market"))
    TeamDayFactory(team=world.vision, cluster=market, day=DAY1)
    # then its rollup is refused, the other team's is not
    with pytest.raises(MixedBasisError):
        team_rollup(team=world.vision, start=START, end=END, granularity="day")
    assert team_rollup(team=world.nlp, start=START, end=END, granularity="day")["intensity_basis"] == "location"
    # and one cluster's basis, zones and currency are its site's; a cluster without a site has none
    assert clusters_basis(Cluster.objects.filter(pk=market.pk)) == ("market", ["FR"], "EUR")
    assert clusters_basis(Cluster.objects.filter(pk=ClusterFactory().pk)) == ("", [], "")


def test_a_teams_waste_is_its_own_stored_days_in_its_periods(world: DayWorld) -> None:
    # given vision's waste stored on both its days, and nlp's on its second (where it ran no job)
    for team, day, cost in ((world.vision, DAY1, "0.20"), (world.vision, DAY2, "0.50"), (world.nlp, DAY2, "0.25")):
        TeamWasteDay.objects.create(team=team, day=day, energy_j=ROW_J, gpu_hours=1.0, cost=Decimal(cost))
    # when
    vision = team_rollup(team=world.vision, start=START, end=END, granularity="day")
    month = team_rollup(team=world.vision, start=START, end=END, granularity="month")
    nlp = team_rollup(team=world.nlp, start=START, end=END, granularity="day")
    # then each period holds its own days' waste, added up, and never the other team's; zero where none
    assert [p["waste"]["cost"] for p in vision["periods"]] == [Decimal("0.20"), Decimal("0.50")]
    assert month["periods"][0]["waste"]["cost"] == Decimal("0.70")
    assert [(p["period"], p["cost"], p["waste"]["cost"]) for p in nlp["periods"]] == [
        ("2026-11-02", Decimal("0.125"), Decimal(0)),
        ("2026-11-03", Decimal(0), Decimal("0.25")),
    ]
    # and no waste line in a cluster's rollup
    cluster = cluster_rollup(cluster=world.cluster, start=START, end=END, granularity="day")
    assert all(p["waste"] is None for p in cluster["periods"])
    # the teams with waste on given days
    assert teams_with_waste_on(days=[DAY1]) == {world.vision.pk}
    assert teams_with_waste_on(days={DAY1, DAY2}) == {world.nlp.pk, world.vision.pk}
    assert teams_with_waste_on(days=[DAY2 + timedelta(days=1)]) == set() == teams_with_waste_on(days=[])


def test_a_cluster_days_idle_line_is_the_one_its_daily_rollup_shows(world: DayWorld) -> None:
    # given the cluster's first day as stored
    day = ClusterDay.objects.filter(cluster=world.cluster, day=DAY1).values(*CLUSTER_DAY_IDLE_COLUMNS).get()
    # when its idle line is worked out from it
    line = cluster_day_idle_line(day)
    # then it is the rollup's for that day
    doc = cluster_rollup(cluster=world.cluster, start=START, end=END, granularity="day")
    assert line is not None
    assert period_figures(line.idle) == _close(doc["periods"][0]["idle"])
    assert period_figures(line.unseen) == _close(doc["periods"][0]["unobserved"])
    # and a day without a GPU-hour has none
    assert cluster_day_idle_line({**day, "gpu_hours_total": 0}) is None


@pytest.mark.parametrize("shared", [False, True])
def test_the_teams_shares_of_the_idle_line_add_up_to_the_fleets(world: DayWorld, settings: Any, shared: bool) -> None:
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = shared
    # when each team reads the idle line beside its figures
    vision = team_idle(team=world.vision, start=START, end=END)
    nlp = team_idle(team=world.nlp, start=START, end=END)
    # then both see the fleet's whole line, seen and unseen apart
    assert vision["fleet"] == nlp["fleet"] and vision["clusters"] == nlp["clusters"] == ["c1"]
    fleet = vision["fleet"]
    assert fleet["energy_j"] == pytest.approx(3 * IDLE_J) and fleet["cost"] == Decimal("0.045")
    assert fleet["unseen"]["energy_j"] == pytest.approx(IDLE_J / 2)
    assert fleet["seen"]["energy_j"] + fleet["unseen"]["energy_j"] == pytest.approx(fleet["energy_j"])
    # each team's share by its GPU-hours there (vision: 6 of day 1's 7, its excluded job's too, and all of day 2),
    # the shares adding up to the fleet's line (every day with idle had a job)
    day1, day2 = 2 * IDLE_J, IDLE_J
    assert vision["share"]["energy_j"] == pytest.approx(day1 * 6 / 7 + day2)
    assert nlp["share"]["energy_j"] == pytest.approx(day1 / 7)
    for key in ("energy_j", "gpu_hours", "facility_kwh", "embodied_kg"):
        assert vision["share"][key] + nlp["share"][key] == pytest.approx(fleet[key])
    assert float(vision["share"]["cost"] + nlp["share"]["cost"]) == pytest.approx(float(fleet["cost"]))
    # and the line a team reads is its share where the site shares idle, else the fleet's
    assert vision["shared"] is shared
    assert vision["energy_j"] == (vision["share"] if shared else fleet)["energy_j"]


def test_a_teams_share_is_the_same_from_its_rollup_as_from_the_daily_sums(world: DayWorld, settings: Any) -> None:
    # given the share each way: booked on the team's rollup (shared), and as sharing would book it (not)
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = True
    booked = team_idle(team=world.vision, start=START, end=END)["share"]
    settings.FLEETWATT_IDLE_SHARED_TO_TEAMS = False
    by_days = team_idle(team=world.vision, start=START, end=END)["share"]
    # then the page and the API agree
    assert booked == _close(by_days)


def test_a_kept_rollup_is_the_rollup_and_is_answered_without_the_database(
    world: DayWorld, django_assert_num_queries: Any
) -> None:
    # when a team's and a cluster's rollups are asked for twice
    team = team_rollup_cached(team=world.vision, start=START, end=END, granularity="day")
    cluster = cluster_rollup_cached(cluster=world.cluster, start=START, end=END, granularity="day")
    with django_assert_num_queries(0):
        again = team_rollup_cached(team=world.vision, start=START, end=END, granularity="day")
        cluster_again = cluster_rollup_cached(cluster=world.cluster, start=START, end=END, granularity="day")
    # then each is the rollup, the second time from the cache
    assert team == again == team_rollup(team=world.vision, start=START, end=END, granularity="day")
    assert cluster == cluster_again == cluster_rollup(cluster=world.cluster, start=START, end=END, granularity="day")
    # under keys of their own: per subject, kind, period and granularity
    keys = {
        team_rollup_cache_key(team=world.vision, start=START, end=END, granularity="day"),
        team_rollup_cache_key(team=world.nlp, start=START, end=END, granularity="day"),
        team_rollup_cache_key(team=world.vision, start=START, end=END, granularity="week"),
        team_rollup_cache_key(team=world.vision, start=START, end=FROM_ROWS, granularity="day"),
        cluster_rollup_cache_key(cluster=world.cluster, start=START, end=END, granularity="day"),
    }
    assert len(keys) == 5


def test_an_idle_lines_shares_add_up_to_it_and_a_period_adds_the_lines_it_is_given() -> None:
    # given an idle line with a part nobody saw
    line = IdleLine(
        idle=Footprint(energy_j=4000.0, gpu_hours=2.0, cost=Decimal("0.40")),
        unseen=Footprint(energy_j=1000.0, gpu_hours=0.5, cost=Decimal("0.10")),
    )
    # when it is shared out and the shares added up, and a period is given two lines
    shares = [line.scaled(0.25), line.scaled(0.75)]
    total = IdleLine.total(shares)
    period = Period(period="2026-11-02")
    for share in shares:
        period.idle_add(share)
    # then the shares are the line, in the period as in the total
    assert (total.idle.energy_j, total.unseen.gpu_hours, total.idle.cost) == (4000.0, 0.5, Decimal("0.40"))
    assert period.idle == total.idle and period.unobserved == total.unseen
    assert Period(period="x").idle is None  # no line until one is added
