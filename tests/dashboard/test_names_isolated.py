"""Names a source or a user chose are shown isolated (issue: no input breaks it): a job named
"invoice<U+202E>gnp.exe" read "invoiceexe.png" in the search results. Now every page shows a job's key, id, name and
user in a <bdi>, with its direction controls shown as marks ([RLO]), never applied to the page's text."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.core.templatetags.names import isolated
from apps.fleet.models import Cluster, Team, TeamMembership
from apps.jobs.models import Job

pytestmark = pytest.mark.django_db

SPOOF = "invoice\u202egnp.exe"
SHOWN = '<bdi>invoice<abbr class="bidi-control" title="U+202E right-to-left override">[RLO]</abbr>gnp.exe</bdi>'


def test_the_filter_isolates_escapes_and_shows_direction_controls() -> None:
    assert isolated(SPOOF) == SHOWN
    assert isolated("<b>\u2067x\u2069</b>") == (
        '<bdi>&lt;b&gt;<abbr class="bidi-control" title="U+2067 right-to-left isolate">[RLI]</abbr>x'
        '<abbr class="bidi-control" title="U+2069 pop directional isolate">[PDI]</abbr>&lt;/b&gt;</bdi>'
    )
    assert isolated(None) == "<bdi></bdi>" and isolated("שלום") == "<bdi>שלום</bdi>"


def test_the_search_results_and_the_job_page_show_a_spoofing_name_isolated() -> None:
    # given a job whose name and user carry a right-to-left override
    team = Team.objects.create(name="vision")
    cluster = Cluster.objects.create(name="a", prometheus_url="http://127.0.0.1:9")
    ada = User.objects.create_user("ada")
    TeamMembership.objects.create(user=ada, team=team)
    job = Job.objects.create(
        cluster=cluster, team=team, job_key="slurm/7", scheduler="slurm", job_id="7", name=SPOOF, user=SPOOF
    )
    client = Client()
    client.force_login(ada)
    # when it is found, and opened
    for page in (client.get("/jobs/", {"q": "invoice"}), client.get(f"/jobs/{job.pk}/")):
        body = page.content.decode()
        # then its name and user are isolated, the override shown, never applied
        assert page.status_code == 200 and body.count(SHOWN) >= 2, body
        assert "\u202e" not in body
