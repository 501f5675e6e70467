"""The GPU page's power limit and SM clock per hour: the stored figures, and “—” where nobody exported them."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.telemetry.models import GpuHour
from tests.carbon.fleet_builder import T0, fleet_build, job_run

pytestmark = pytest.mark.django_db


def test_the_gpu_page_shows_each_hours_limit_and_clock_and_a_dash_for_unknown() -> None:
    # given a GPU whose first hour's cap changed from 700 W to 450 W, and whose second hour nobody reported
    fleet = fleet_build(servers=1, gpus_per_server=1)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=2, power_w=400)
    GpuHour.objects.filter(hour=T0).update(
        power_limit_w=575.0, power_limit_min_w=450.0, power_limit_max_w=700.0, sm_clock_mhz=1980.0
    )
    client = Client()
    client.force_login(User.objects.create_user("boss", is_staff=True))
    # when
    page = client.get(f"/gpus/{fleet.gpus[0].pk}/", {"start": "2026-11-02", "end": "2026-11-03"}).content.decode()
    # then
    table = page[page.index('id="gpu-settings"') :]
    rows = re.findall(r"<tr><td>(2026-11-02 \d\d:00)</td>(.*?)</tr>", table, re.S)
    cells = {hour: re.findall(r'<td class="num">(.*?)</td>', rest) for hour, rest in rows}
    assert cells == {"2026-11-02 00:00": ["575", "450–700", "1,980"], "2026-11-02 01:00": ["—", "—", "—"]}
    # and the period's summary above the table (docs/arithmetic.md, "A GPU's settings over a period")
    summary = re.sub(r"\s+", " ", re.search(r'id="gpu-settings-period">(.*?)</p>', page, re.S).group(1))
    assert summary == (
        "Over the period: power limit 450–700 W, mean 575 W (1 of 2 hours known); "
        "SM clock mean 1,980 MHz (1 of 2 hours known)."
    )
    none = client.get(f"/gpus/{fleet.gpus[0].pk}/", {"start": "2026-11-03", "end": "2026-11-04"}).content.decode()
    assert "power limit unknown; SM clock unknown." in re.sub(r"\s+", " ", none)
