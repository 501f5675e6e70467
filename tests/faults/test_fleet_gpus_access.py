"""`/api/gpus/` answered any logged-in user, even one in no team (GPU UUIDs, hostnames, energy), while the GPU
page says the fleet's GPUs are for admins and finance. Fleet-wide GPU data is for admins and finance only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.api.world import World, world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> World:
    return world_build()


@pytest.mark.parametrize("suffix", ["", "?format=csv", "?start=2026-11-02T00:00:00Z"])
def test_the_gpus_api_is_for_admins_and_finance(world: World, suffix: str) -> None:
    for path in ("/api/gpus/", f"/api/gpus/{world.gpu_b.pk}/"):
        for role, expected in {"member": 403, "lead": 403, "nobody": 403, "finance": 200, "admin": 200}.items():
            client = APIClient()
            client.force_login(world.users[role])
            response = client.get(path + suffix)
            assert response.status_code == expected, (role, path + suffix, response.status_code)
            if expected == 403:
                assert world.gpu_b.uuid.encode() not in response.content
        assert APIClient().get(path + suffix).status_code == 401


def test_a_named_token_of_finance_reads_the_gpus(world: World) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.finance_key}")
    assert world.gpu_b.uuid in {g["uuid"] for g in client.get("/api/gpus/").json()["results"]}
