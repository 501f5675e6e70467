"""Finding a job as its users know it: by the scheduler's id (`/jobs/slurm/123/`), a search box, "my jobs"."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.fleet.models import Cluster, Team, TeamMembership
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, object]:
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    a = Cluster.objects.create(name="a", prometheus_url="http://127.0.0.1:9")
    b = Cluster.objects.create(name="b", prometheus_url="http://127.0.0.1:9")
    ada = User.objects.create_user("ada")
    TeamMembership.objects.create(user=ada, team=vision)

    def job(cluster: Cluster, team: Team, job_id: str, **kw: str) -> Job:
        return Job.objects.create(
            cluster=cluster, team=team, job_key=f"slurm/{job_id}", scheduler="slurm", job_id=job_id, **kw
        )

    return {
        "ada": ada,
        "mine": job(a, vision, "101", user="ada", name="train-vit"),
        "colleague": job(a, vision, "102", user="bob", name="eval-vit"),
        "twin": job(b, vision, "101", user="ada", name="train-vit-b"),  # the same id on another cluster
        "other_team": job(a, nlp, "103", user="cy", name="train-llm"),
    }


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _keys(html: str) -> set[str]:
    return {part.split('"')[0] for part in html.split('data-job-key="')[1:]}


def test_a_job_is_reached_by_its_scheduler_id(world: dict) -> None:
    client = _client(world["ada"])
    answer = client.get("/jobs/slurm/102/")
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{world['colleague'].pk}/"
    # an id on two clusters lists both; another team's job is not found
    assert _keys(client.get("/jobs/slurm/101/").content.decode()) == {"slurm/101"}
    assert client.get("/jobs/slurm/101/").content.decode().count('data-job-key="slurm/101"') == 2
    assert client.get("/jobs/slurm/103/").status_code == 404
    assert client.get("/jobs/slurm/999/").status_code == 404


def test_the_search_finds_by_id_key_or_name_within_the_teams_one_sees(world: dict) -> None:
    client = _client(world["ada"])
    assert client.get("/jobs/", {"q": "102"}).content.decode().count('data-job-key="slurm/102"') == 1
    assert client.get("/jobs/", {"q": "slurm/102"}).content.decode().count('data-job-key="slurm/102"') == 1
    by_name = client.get("/jobs/", {"q": "train"}).content.decode()
    assert by_name.count('data-job-key="slurm/101"') == 2 and "slurm/103" not in by_name  # nlp's is not shown
    assert "data-job-key" not in client.get("/jobs/").content.decode()  # nothing asked, nothing listed


def test_my_jobs_are_the_ones_i_ran(world: dict) -> None:
    page = _client(world["ada"]).get("/jobs/", {"mine": "1"}).content.decode()
    assert page.count('data-job-key="slurm/101"') == 2 and "slurm/102" not in page


@pytest.mark.parametrize("query", [{"q": "x" * 201}, {"mine": "yes"}])
def test_odd_searches_are_a_400(world: dict, query: dict) -> None:
    assert _client(world["ada"]).get("/jobs/", query).status_code == 400
