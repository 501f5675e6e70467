"""A simulated fleet through the real path: its history in a real Prometheus, the fleet config applied as an admin
applies it, its hours ingested by the command, and an admin's API client."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.carbon.fleet_builder import T0, intensity_set


def config_applied_and_ingested(url: str, config: str, folder: Path, *, hours: int) -> None:
    """`config` (a fleet config whose `%s` is the Prometheus URL) applied, zone XX at 0.35 kg/kWh, and the first
    `hours` hours from the scenarios' start (T0) ingested."""
    path = folder / "fleet.yaml"
    path.write_text(config % url)
    call_command("apply_config", str(path), verbosity=0)
    intensity_set("XX", [0.35] * hours)
    end = T0 + timedelta(hours=hours)
    call_command("ingest", start=f"{T0:%Y-%m-%dT%H:%M:%SZ}", end=f"{end:%Y-%m-%dT%H:%M:%SZ}", verbosity=0)


def admin_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("root", is_staff=True))
    return client
