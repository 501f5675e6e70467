"""/api/when-to-run/ (apps/carbon/api/views.py): anonymous refused, another team's hints not found and its groups
nowhere in a member's answer, the owner's hint as the pages give it, its hints of record checked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.carbon.models import JobGroup
from apps.carbon.services import job_groups_assign
from apps.carbon.when_selectors import hour_floor
from apps.carbon.when_services import hints_record
from apps.fleet.models import Team, TeamMembership
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from tests.carbon.fleet_builder import HOUR, Fleet, fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db


def _world() -> tuple[Fleet, Team, User]:
    """Vision runs the flexible group "sweeps", nlp runs "nlp-secret-batch"; four weeks of intensity to now."""
    now = hour_floor(timezone.now())
    fleet = fleet_build(servers=1)
    nlp = Team.objects.create(name="nlp")
    start = now - 28 * 24 * HOUR
    intensity_set("TEST", [0.2 if (start + k * HOUR).hour in (3, 4) else 0.5 for k in range(28 * 24)], start=start)
    JobGroup.objects.create(name="sweeps", match_kind="name_prefix", match_value="sweep-", flexible=True)
    JobGroup.objects.create(name="nlp-secret-batch", match_kind="name_prefix", match_value="secret-", flexible=True)
    for k, (team, name) in enumerate([(fleet.team, "sweep-1"), (nlp, "secret-1")]):
        begin = now - (k + 2) * 24 * HOUR
        job = job_run(fleet, key=f"slurm/{k}", gpus=fleet.gpus[k : k + 1], hours=2, power_w=500, start=begin)
        Job.objects.filter(pk=job.pk).update(name=name, team=team, end=begin + 2 * HOUR, last_seen=begin + 2 * HOUR)
    job_groups_assign()
    footprints_recompute()
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=fleet.team)
    return fleet, nlp, member


def test_anonymous_is_refused() -> None:
    fleet, nlp, member = _world()
    client = APIClient()
    assert client.get("/api/when-to-run/").status_code == 401
    assert client.get(f"/api/when-to-run/{fleet.team.pk}/").status_code == 401


def test_a_member_sees_their_teams_hints_and_nobody_elses_groups() -> None:
    fleet, nlp, member = _world()
    hints_record(now=timezone.now())
    client = APIClient()
    client.force_authenticate(member)
    # another team: not found
    assert client.get(f"/api/when-to-run/{nlp.pk}/").status_code == 404
    # the list: their team only, and the other team's group nowhere in it
    listed = client.get("/api/when-to-run/")
    assert listed.status_code == 200
    assert [d["team"] for d in listed.json()] == ["vision"]
    assert "nlp-secret-batch" not in listed.content.decode()
    # their team: the hint as the pages write it, with its typical run and forecast
    doc = client.get(f"/api/when-to-run/{fleet.team.pk}/").json()
    [hint] = doc["hints"]
    assert hint["job_group"] == "sweeps" and hint["zone"] == "TEST" and doc["deadline_h"] == 24
    assert hint["typical_run"]["runs"] == 1 and hint["typical_run"]["length_h"] == 2
    assert hint["forecast"]["kind"] == "profile"
    assert hint["forecast"]["source"].startswith("profile of the last 4 weeks")
    assert len(hint["forecast"]["kg_per_kwh"]) == 24 and hint["text"].startswith(("start after", "start now"))
    assert hint["saving_kg"] == pytest.approx(hint["now_kg"] - hint["best_kg"])
    # the hint kept this hour, in the hints of record of the last 7 days, its check not known yet (null)
    [past] = doc["past_hints"]
    assert past["job_group"] == "sweeps" and past["best_start"] is not None
    assert past["claimed_kg"] == pytest.approx(hint["saving_kg"]) and past["real_kg"] is None
    [line] = doc["summary"]
    assert (line["hints"], line["checked"], line["runs"]) == (1, 0, 1) and line["measured_shift_kg"] >= 0


def test_an_admin_sees_every_team() -> None:
    fleet, nlp, member = _world()
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True, is_superuser=True))
    docs = {d["team"]: d for d in client.get("/api/when-to-run/").json()}
    assert [h["job_group"] for h in docs["nlp"]["hints"]] == ["nlp-secret-batch"]
    assert [h["job_group"] for h in docs["vision"]["hints"]] == ["sweeps"]


def test_the_period_is_checked() -> None:
    fleet, nlp, member = _world()
    client = APIClient()
    client.force_authenticate(member)
    url = f"/api/when-to-run/{fleet.team.pk}/"
    assert client.get(url, {"start": "2026-11-03", "end": "2026-11-02"}).status_code == 400
    assert client.get(url, {"start": "2026-01-01", "end": "2026-12-01"}).status_code == 400
    assert client.get(url, {"start": "nope"}).status_code == 400
    later = (timezone.now() + timedelta(days=2)).date().isoformat()
    assert client.get(url, {"start": later}).status_code == 400
    assert client.get(url, {"start": "2026-11-02", "end": "2026-11-09"}).json()["past_start"] == "2026-11-02T00:00:00Z"
