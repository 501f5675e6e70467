"""The jobs and GPUs API over an ingested scenario: auth, team scoping, fields and units, CSV, schema."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.fleet.models import Team, TeamMembership, TeamRule
from apps.jobs.models import Job
from tests.scenarios import spine_scenario

pytestmark = [pytest.mark.django_db, pytest.mark.prometheus]

FIELDS = {
    "cluster",
    "job_key",
    "scheduler",
    "job_id",
    "user",
    "team",
    "start",
    "end",
    "gpu_hours",
    "energy_j",
    "facility_kwh",
    "attribution",
    "attribution_j",
    "coverage",
    "operational_kg",
    "embodied_kg",
    "cost",
    "currency",
    "flags",
}


@pytest.fixture
def ingested(history_loader, cluster_for):
    history = history_loader(spine_scenario())
    cluster_for(history)
    vision = Team.objects.create(name="vision")
    nlp = Team.objects.create(name="nlp")
    TeamRule.objects.create(team=vision, kind="slurm_account", value="vision")
    TeamRule.objects.create(team=nlp, kind="slurm_account", value="nlp")
    call_command("ingest", start="2026-11-02T00:00:00Z", end="2026-11-02T07:00:00Z", verbosity=0)
    member = User.objects.create_user("ada", password="pw")
    TeamMembership.objects.create(user=member, team=vision)
    return history


def _client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_anonymous_is_refused(ingested) -> None:
    assert APIClient().get("/api/jobs/").status_code in (401, 403)
    assert APIClient().get("/api/gpus/").status_code in (401, 403)


def test_member_sees_only_the_team_jobs_and_gets_404_on_others(ingested) -> None:
    client = _client(User.objects.get(username="ada"))
    listed = client.get("/api/jobs/").json()["results"]
    assert {j["job_key"] for j in listed} == {"slurm/101", "slurm/104"}
    other = Job.objects.get(job_key="slurm/102")
    assert client.get(f"/api/jobs/{other.pk}/").status_code == 404
    mine = Job.objects.get(job_key="slurm/101")
    assert client.get(f"/api/jobs/{mine.pk}/").status_code == 200


def test_unmatched_jobs_go_to_unassigned_that_admins_see(ingested) -> None:
    admin = User.objects.create_user("root", is_staff=True)
    listed = _client(admin).get("/api/jobs/", {"team": "unassigned", "page_size": 100}).json()["results"]
    assert {"proc/4242-1793580000", "slurm/105", "k8s/search/ranker-0"} <= {j["job_key"] for j in listed}


def test_fields_and_units(ingested) -> None:
    finance = User.objects.create_user("fin")
    finance.groups.add(Group.objects.create(name="finance"))
    client = _client(finance)
    jobs = client.get("/api/jobs/", {"page_size": 100}).json()["results"]
    assert len(jobs) == len(ingested.truth)
    for job in jobs:
        assert job.keys() >= FIELDS
    heavy = next(j for j in jobs if j["job_key"] == "slurm/101")
    truth = ingested.truth["slurm/101"]
    assert heavy["energy_j"] == pytest.approx(truth.energy_j, rel=1e-4)
    assert heavy["facility_kwh"] == pytest.approx(truth.energy_j / 3.6e6, rel=1e-4)
    assert heavy["attribution"] == "whole_gpu" and set(heavy["attribution_j"]) == {"whole_gpu"}
    assert 0 <= heavy["coverage"] <= 1
    assert heavy["gpu_hours"] == pytest.approx((truth.end - truth.start) * 2 / 3600, rel=1e-3)

    detail = client.get(f"/api/jobs/{heavy['id']}/").json()
    assert len(detail["gpus"]) == 2
    assert sum(h["energy_j"] for h in detail["hours"]) == pytest.approx(heavy["energy_j"], rel=1e-9)
    assert {h["hour"][:13] for h in detail["hours"]} == {f"2026-11-02T0{h}" for h in range(4)}


def test_filters_flagged_and_cluster(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    flagged = client.get("/api/jobs/", {"flagged": "true"}).json()["results"]
    assert {"slurm/105"} <= {j["job_key"] for j in flagged}
    assert all(j["flags"] for j in flagged)
    low = client.get("/api/jobs/", {"flag": "low_coverage"}).json()["results"]
    assert [j["job_key"] for j in low] == ["slurm/105"]
    assert client.get("/api/jobs/", {"cluster": "nope"}).status_code == 400
    window = client.get("/api/jobs/", {"start": "2026-11-02T04:30:00Z"}).json()["results"]
    assert "slurm/101" not in {j["job_key"] for j in window}  # ended 03:41


def test_csv(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    response = client.get("/api/jobs/", {"format": "csv", "page_size": 100})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == len(ingested.truth)
    assert {"energy_j", "coverage", "attribution", "gpu_hours"} <= rows[0].keys()
    gpus = client.get("/api/gpus/", {"format": "csv"})
    assert gpus.status_code == 200 and b"idle_energy_j" in gpus.content


def test_gpus(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    gpus = client.get("/api/gpus/", {"page_size": 100}).json()["results"]
    assert len(gpus) == 8
    for gpu in gpus:
        assert gpu["hours"] >= 6
        assert gpu["energy_j"] > 0 and 0 <= gpu["utilisation"] <= 1
        assert gpu["model_name"] == "NVIDIA H200"


def test_schema_and_offline_docs(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/jobs/", "/api/jobs/{id}/", "/api/gpus/"} <= paths.keys()
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"cdn" not in docs.content.lower()


def test_csv_without_a_page_streams_every_job(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    response = client.get("/api/jobs/", {"format": "csv"})
    assert response.streaming and response["Content-Disposition"].startswith("attachment")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == len(ingested.truth)  # every job, streamed
    expected = {"energy_j", "facility_kwh", "operational_kg", "currency", "intensity_basis", "attribution_j.whole_gpu"}
    assert expected <= rows[0].keys()


def test_every_field_of_the_schema_is_described(db) -> None:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("reader"))  # (the schema is behind login)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    undescribed = [
        f"{name}.{prop}"
        for name, component in schema["components"]["schemas"].items()
        for prop, spec in component.get("properties", {}).items()
        if not spec.get("description")
    ]
    assert undescribed == []


def test_times_with_offsets_postgres_cannot_hold_are_compared_in_utc(ingested) -> None:
    client = _client(User.objects.create_user("root", is_staff=True))
    response = client.get("/api/jobs/", {"start": "2026-11-13T21:29:58-16:42"})  # Postgres refuses -16:42
    assert response.status_code == 200
    assert client.get("/api/jobs/", {"start": "0252-11-13T21:29:58-16:42"}).status_code == 400  # years 2000-2100
    assert client.get("/api/jobs/", {"end": "0001-01-01T00:00:00+01:00"}).status_code == 400  # before year 1


def test_list_rows_render_exactly_as_drf_would(ingested) -> None:
    """The jobs and findings lists render rows by a compiled plan (apps.core.web.serializers): same output."""
    from apps.core.web.serializers import PlannedRepresentationMixin
    from apps.jobs.api.serializers import JobSerializer
    from apps.waste.api.serializers import FlagSerializer
    from apps.waste.models import Flag

    Job.objects.filter(pk=Job.objects.order_by("id").values("id")[:1]).update(work_units=250.0, work_unit="request")
    jobs = list(Job.objects.select_related("cluster", "team", "job_group"))
    assert any(j.work_units for j in jobs)
    flags = list(Flag.objects.select_related("cluster", "job__team", "gpu"))
    assert jobs and flags and any(j.end is None or j.job_group is None for j in jobs)
    for serializer, rows in ((JobSerializer(), jobs), (FlagSerializer(), flags)):
        for row in rows:
            drf_own = super(PlannedRepresentationMixin, serializer).to_representation(row)
            assert serializer.to_representation(row) == drf_own
    # and the lists' rows, read as values() (a GPU-hour's finding among them: no job, no team; jobs with no
    # group; the method fields given the row)
    job_rows = {r["id"]: r for r in Job.objects.values(*JobSerializer.row_keys())}
    assert set(job_rows) == {j.pk for j in jobs}
    for job in jobs:
        drf_own = super(PlannedRepresentationMixin, JobSerializer()).to_representation(job)
        assert JobSerializer().to_representation(job_rows[job.pk]) == drf_own
    values = {r["id"]: r for r in Flag.objects.values(*FlagSerializer.row_keys())}
    assert any(f.job_id is None for f in flags) and set(values) == {f.pk for f in flags}
    for flag in flags:
        drf_own = super(PlannedRepresentationMixin, FlagSerializer()).to_representation(flag)
        assert FlagSerializer().to_representation(values[flag.pk]) == drf_own
