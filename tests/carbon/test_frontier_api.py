"""The frontier of recurring workloads through the database and the API (apps.carbon.frontier_selectors,
apps.carbon.api.frontier_views): a run's power limit from its GPU-hours and its units from its own counter, the worked
example of docs/arithmetic.md with its month's saving in kWh, kg and money, the plan of a group that never varied, who
sees what, and parameters refused with a 400."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.carbon.frontier_selectors import group_runs
from apps.carbon.models import JobGroup
from apps.fleet.models import Gpu, Team, TeamMembership
from apps.jobs.models import Job, JobGpuHour, JobWorkHour
from apps.telemetry.models import GpuHour

from .fleet_builder import HOUR, T0, Fleet, fleet_build

pytestmark = pytest.mark.django_db

STEPS = 1_000.0
# (limit W, s per step, J per step) of the worked example's runs (docs/arithmetic.md)
WORKED = [
    *[(700, s, j) for s, j in [(2.00, 1200), (2.02, 1212), (1.98, 1188), (2.00, 1200)]],
    (600, 2.05, 1230),
    *[(500, s, j) for s, j in [(2.14, 1070), (2.16, 1075), (2.12, 1065)]],
    *[(400, s, j) for s, j in [(2.36, 944), (2.38, 950), (2.34, 940)]],
]


def _run(fleet: Fleet, group: JobGroup, *, key: str, gpu: Gpu, start: datetime, cap_w: float | None, s: float,
         j: float, least_w: float | None = None, team: Team | None = None) -> Job:  # fmt: skip
    """A finished run alone on one GPU within one hour: 1,000 steps of its own counter, at a limit."""
    seconds = s * STEPS
    gpu_kwh = j * STEPS / 3.6e6
    job = Job.objects.create(
        cluster=fleet.cluster, job_key=key, team=team or fleet.team, start=start,
        end=start + timedelta(seconds=seconds), energy_j=j * STEPS, gpu_count=1, job_group=group,
        facility_kwh=gpu_kwh * 1.56, operational_kg=gpu_kwh * 1.56 * 0.35, currency="EUR",
    )  # fmt: skip
    hour = start.replace(minute=0, second=0, microsecond=0)
    JobGpuHour.objects.create(job=job, gpu=gpu, hour=hour, source="agent", energy_j=j * STEPS, sampled_s=seconds)
    GpuHour.objects.update_or_create(
        gpu=gpu, hour=hour,
        defaults={"source": "agent", "device_energy_j": j * STEPS, "power_limit_w": cap_w,
                  "power_limit_min_w": least_w if least_w is not None else cap_w, "power_limit_max_w": cap_w},
    )  # fmt: skip
    JobWorkHour.objects.create(job=job, hour=hour, engine="fleetwatt", unit="step", units=STEPS)
    return job


def _worked(fleet: Fleet, group: JobGroup) -> list[Job]:
    return [
        _run(fleet, group, key=f"slurm/{k}", gpu=fleet.gpus[0], start=T0 + k * HOUR, cap_w=cap, s=s, j=j)
        for k, (cap, s, j) in enumerate(WORKED)
    ]


def _client(user: User | None = None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def _admin() -> APIClient:
    return _client(User.objects.create_user("root", is_staff=True, is_superuser=True))


@pytest.fixture
def world() -> tuple[Fleet, JobGroup]:
    fleet = fleet_build(servers=1)
    group = JobGroup.objects.create(name="pretrain", match_kind="name_prefix", match_value="pretrain-")
    _worked(fleet, group)
    return fleet, group


def test_a_run_s_limit_is_its_gpu_hours_weighted_by_its_time_and_a_changed_limit_sets_it_apart(world) -> None:
    fleet, group = world
    # given a run whose limit changed within its hour (least 500 W, most 700 W)
    _run(fleet, group, key="slurm/99", gpu=fleet.gpus[1], start=T0, cap_w=650, s=2.1, j=1100, least_w=500)
    # when
    unit, runs, other = group_runs(group=group, jobs=Job.objects.all())
    # then
    assert (unit, other) == ("step", 0)
    by_job = {r.job_id: r for r in runs}
    changed = by_job[Job.objects.get(job_key="slurm/99").pk]
    assert changed.varied and changed.cap_w == pytest.approx(650)
    first = by_job[Job.objects.get(job_key="slurm/0").pk]
    assert (first.cap_w, first.varied, first.units, first.seconds) == (700, False, STEPS, 2000)


def test_the_worked_example_through_the_api(world) -> None:
    _, group = world
    # when
    answer = _admin().get(f"/api/job-groups/{group.pk}/frontier/", {"slack": "0.1"})
    # then
    assert answer.status_code == 200, answer.content
    doc = answer.json()
    assert (doc["unit"], doc["runs"], doc["current_cap_w"], doc["tdp_w"]) == ("step", 11, 700, 700)
    assert [(p["cap_w"], p["runs"], p["on_front"]) for p in doc["points"]] == [
        (700, 4, True), (600, 1, False), (500, 3, True), (400, 3, True)
    ]  # fmt: skip
    first = doc["points"][0]
    assert first["s_per_unit"] == pytest.approx(2.0) and first["j_per_unit"] == pytest.approx(1200)
    assert doc["advice"]["cap_w"] == 500 and doc["advice"]["energy_change_pct"] == pytest.approx(-10.833, abs=1e-3)
    assert doc["text"] == (
        "at 500 W instead of 700 W this group's runs used 11 % less energy per step and took 7 % longer "
        "(3 runs at 500 W, 4 at 700 W)"
    )
    assert doc["plan"] is None


def test_the_month_s_saving_in_kwh_kg_and_money(world) -> None:
    # when
    answer = _admin().get("/api/frontier/", {"month": "2026-11"})
    # then the month's runs moved to 500 W: 4,000 steps x 130 J + 1,000 x 160 J - 3,000 x 126 J = 302,000 J
    assert answer.status_code == 200, answer.content
    doc = answer.json()
    (line,) = doc["groups"]
    saving = line["saving"]
    assert (saving["runs"], saving["units"]) == (8, 8_000)
    assert saving["gpu_kwh"] == pytest.approx(302_000 / 3.6e6)
    assert saving["facility_kwh"] == pytest.approx(302_000 / 3.6e6 * 1.56)
    assert saving["co2e_kg"] == pytest.approx(302_000 / 3.6e6 * 1.56 * 0.35)
    # 302 kJ of GPU energy, PUE 1.56, 0.20 EUR a kWh: 0.02617 EUR, in the currency's minor unit
    assert saving["cost"] == "0.03"
    assert saving["currency"] == "EUR"
    # 4,000 x 0.14 s + 1,000 x 0.09 s - 3,000 x 0.22 s = -10 s
    assert saving["extra_h"] == pytest.approx(-10 / 3600)
    assert doc["totals"]["gpu_kwh"] == pytest.approx(saving["gpu_kwh"])
    # a month before the runs: no group (nothing had ended)
    assert _admin_again().get("/api/frontier/", {"month": "2026-10"}).json()["groups"] == []


def _admin_again() -> APIClient:
    return _client(User.objects.get(username="root"))


def test_a_group_that_never_varied_gets_a_plan(world) -> None:
    fleet, _ = world
    steady = JobGroup.objects.create(name="finetune", match_kind="name_prefix", match_value="ft-")
    for k in range(3):
        _run(fleet, steady, key=f"slurm/ft{k}", gpu=fleet.gpus[2], start=T0 + k * HOUR, cap_w=700, s=2.0, j=1200)
    doc = _admin().get(f"/api/job-groups/{steady.pk}/frontier/").json()
    assert doc["advice"] is None and doc["plan"]["caps_w"] == [700, 600, 500, 400]
    assert doc["plan"]["trial_units"] == 150 and doc["plan"]["trial_kwh"] == pytest.approx(0.05)
    assert doc["text"].startswith("every run so far at 700 W: try 700 W, 600 W, 500 W, 400 W")


def test_who_sees_what(world) -> None:
    fleet, group = world
    # anonymous: refused
    assert _client().get(f"/api/job-groups/{group.pk}/frontier/").status_code in (401, 403)
    assert _client().get("/api/frontier/", {"month": "2026-11"}).status_code in (401, 403)
    # a member of another team: the group is not found, and the fleet's list names nothing
    other = User.objects.create_user("eve")
    TeamMembership.objects.create(user=other, team=Team.objects.create(name="nlp"))
    assert _client(other).get(f"/api/job-groups/{group.pk}/frontier/").status_code == 404
    assert _client(other).get("/api/frontier/", {"month": "2026-11"}).json()["groups"] == []
    # the team's member sees it
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    assert _client(member).get(f"/api/job-groups/{group.pk}/frontier/").json()["advice"]["cap_w"] == 500
    assert [g["job_group"] for g in _client(member).get("/api/frontier/", {"month": "2026-11"}).json()["groups"]] == [
        "pretrain"
    ]


@pytest.mark.parametrize(
    ("path", "query", "named"),
    [
        ("group", {"slack": "abc"}, "slack"),
        ("group", {"slack": "1.5"}, "slack"),
        ("group", {"slack": "-0.1"}, "slack"),
        ("group", {"min_runs": "0"}, "min_runs"),
        ("group", {"min_runs": "\uff13"}, "min_runs"),
        ("group", {"sort": "x"}, "detail"),
        ("fleet", {}, "month"),
        ("fleet", {"month": "2026-13"}, "month"),
        ("fleet", {"month": "2026-11", "slack": "0.1\n"}, "slack"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(world, path: str, query: dict, named: str) -> None:
    _, group = world
    url = f"/api/job-groups/{group.pk}/frontier/" if path == "group" else "/api/frontier/"
    answer = _admin().get(url, query)
    assert answer.status_code == 400, answer.content
    assert named in answer.json()


def test_a_group_with_no_visible_run_and_an_unknown_group_are_not_found(world) -> None:
    empty = JobGroup.objects.create(name="empty", match_kind="user", match_value="nobody")
    assert _admin().get(f"/api/job-groups/{empty.pk}/frontier/").status_code == 404
    assert _admin_again().get("/api/job-groups/999999/frontier/").status_code == 404
