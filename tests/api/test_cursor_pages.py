"""Every list pages by a cursor, as the jobs list: teams, GPUs, clusters, job groups, reports and the audit log
(docs/api.md, "Pages")."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.fleet.models import Team
from tests.carbon.fleet_builder import fleet_build

pytestmark = pytest.mark.django_db


def _walk(client: APIClient, path: str, page_size: int) -> tuple[list[dict], int]:
    rows, url, params, pages = [], path, {"page_size": page_size}, 0
    while url:
        page = client.get(url, params).json()
        assert "count" not in page and set(page) == {"next", "previous", "results"}
        rows, url, params, pages = rows + page["results"], page["next"], {}, pages + 1
    return rows, pages


@pytest.fixture
def admin_client(django_user_model) -> APIClient:
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("root", password="pw", is_staff=True))
    return client


def test_gpus_page_by_cursor_in_cluster_node_and_index_order(admin_client: APIClient) -> None:
    # given a server of 12 GPUs and another of 2 (index 10 sorts after 9: the cursor's text pads them)
    fleet_build(servers=1, gpus_per_server=12)
    fleet_build(name="c2", servers=1, gpus_per_server=2)
    # when an admin walks the GPUs 5 per page
    gpus, pages = _walk(admin_client, "/api/gpus/", 5)
    # then every GPU comes once, in the order of cluster, node and index
    assert pages == 3 and len(gpus) == 14
    order = [(g["cluster"], g["hostname"], g["index"]) for g in gpus]
    assert order == sorted(order) and len(set(order)) == 14 and order[11][2] == 11


def test_teams_page_by_cursor_in_name_order(admin_client: APIClient) -> None:
    # given teams
    for name in ("delta", "alpha", "charlie", "bravo", "echo"):
        Team.objects.create(name=name)
    # when an admin walks them 2 per page
    teams, pages = _walk(admin_client, "/api/teams/", 2)
    # then each comes once, by name
    names = [t["name"] for t in teams]
    assert names == sorted(names) and {"alpha", "echo"} <= set(names) and len(names) == len(set(names))


@pytest.mark.parametrize("path", ["/api/teams/", "/api/gpus/", "/api/clusters/", "/api/job-groups/"])
@pytest.mark.parametrize("page_size", ["0", "1001", "x"])
def test_page_size_out_of_range_is_still_a_400(admin_client: APIClient, path: str, page_size: str) -> None:
    response = admin_client.get(path, {"page_size": page_size})
    assert response.status_code == 400 and "page_size" in response.json()
