"""When to run through the real path: a flexible group's runs simulated into a real Prometheus and ingested, the
fleet configured and the zone's intensity imported with the operators' commands; the typical run is the simulator's
truth and the hint is the one the simulator's own intensity gives (docs/arithmetic.md, "When to run")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps.carbon.when_selectors import group_hints
from apps.fleet.models import Team, TeamMembership
from apps.simulator.intensity import intensity_at

pytestmark = [pytest.mark.django_db, pytest.mark.prometheus]

START = datetime(2026, 11, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)
WEEK = timedelta(days=7)
POWER_W, OVERHEAD, PUE = 500.0, 1.3, 1.2
SCENARIO = {
    "name": "when-to-run",
    "start": START.isoformat(),
    "duration": "12h",
    "scrape_interval_s": 15,
    "linger_s": 60,
    "nodes": [{"hostname": "gpu-a01", "gpus": 2}],
    "jobs": [
        # three runs of the sweeps group, two of them 2 h, one 3 h: the typical run is 2 h
        {"scheduler": "slurm", "job_id": str(300 + k), "user": "ada", "account": "vision", "node": "gpu-a01",
         "gpus": [0], "start": start, "end": end, "sm": 90, "power_w": POWER_W, "memory_gib": 20, "name": f"sweep-{k}"}
        for k, (start, end) in enumerate([("0s", "2h"), ("3h", "5h"), ("6h", "9h")])
    ] + [
        # another team's run of a group that is not flexible
        {"scheduler": "slurm", "job_id": "400", "user": "bob", "account": "nlp", "node": "gpu-a01", "gpus": [1],
         "start": "0s", "end": "4h", "sm": 90, "power_w": 600, "memory_gib": 20, "name": "pretrain-1"},
    ],
}  # fmt: skip
CONFIG = f"""
sites:
  - {{name: dc, grid_zone: DE, pue: {PUE}, electricity_price_per_kwh: 0.20, currency: EUR, timezone: UTC}}
server_types:
  - {{name: hgx, node_overhead_factor: {OVERHEAD}, embodied_kg_per_server: 3000, service_life_years: 5,
     gpus_per_server: 8}}
clusters:
  - {{name: default, site: dc, nodes: [{{match: "gpu-*", server_type: hgx}}]}}
teams:
  - {{name: vision, rules: [{{kind: slurm_account, value: vision}}]}}
  - {{name: nlp, rules: [{{kind: slurm_account, value: nlp}}]}}
job_groups:
  - {{name: sweeps, match_kind: name_prefix, match_value: sweep-, flexible: true}}
  - {{name: pretrain, match_kind: name_prefix, match_value: pretrain-, flexible: false}}
"""


def _profile_at(hour: datetime, made_at: datetime) -> float:
    """What the zone's profile of four weeks says of `hour`: the mean of the simulator's intensity at the same UTC
    hour of the week in the four weeks before `made_at` (its last stored hour is the one before)."""
    back = [hour - k * WEEK for k in range(1, 6)]
    return sum(intensity_at(h, zone="DE") for h in back if made_at - 4 * WEEK <= h < made_at) / 4


def test_the_hint_of_a_simulated_flexible_group_is_the_simulators_truth(
    history_loader, cluster_for, tmp_path: Path, monkeypatch
) -> None:
    # given the runs in Prometheus, the fleet's config, four weeks of the zone's intensity, the hours ingested
    history = history_loader(SCENARIO)
    cluster_for(history)
    (tmp_path / "fleet.yaml").write_text(CONFIG)
    call_command("apply_config", str(tmp_path / "fleet.yaml"), verbosity=0)
    first = START - 4 * WEEK
    call_command("simulate_intensity", zone="DE", start=first.isoformat(), hours=4 * 7 * 24 + 24,
                 out=str(tmp_path / "de.csv"), stdout=StringIO())  # fmt: skip
    call_command("import_intensity", str(tmp_path / "de.csv"), zone="DE", source="simulated", verbosity=0)
    call_command("ingest", start=START.isoformat(), end=(START + 12 * HOUR).isoformat(), verbosity=0)
    made_at = START + 18 * HOUR  # 18:00 UTC: the evening, dirtier than the next day's solar dip
    vision = Team.objects.get(name="vision")
    # when
    [hint] = group_hints(teams=list(Team.objects.order_by("name")), now=made_at)
    # then one hint, vision's sweeps: its typical run is 2 h at the simulator's 500 W through overhead and PUE
    assert (hint.team, hint.group, hint.zone, hint.run.runs) == ("vision", "sweeps", "DE", 3)
    truth_kwh = POWER_W / 1000 * OVERHEAD * PUE
    assert hint.run.length_h == 2
    assert hint.run.kwh == pytest.approx((truth_kwh, truth_kwh), rel=0.005)
    # its forecast is the profile of the simulator's own four weeks, and the best start the one they give
    expected = [_profile_at(made_at + k * HOUR, made_at) for k in range(24)]
    assert hint.forecast.kind == "profile" and hint.forecast.values == pytest.approx(expected)
    kg = [truth_kwh * (expected[o] + expected[o + 1]) for o in range(23)]
    best = min(range(23), key=lambda o: (kg[o], o))
    assert hint.best is not None and hint.best.offset_h == best and best > 0
    assert hint.best.saving_kg == pytest.approx(kg[0] - kg[best], rel=0.005)
    assert hint.best.saving_pct == pytest.approx(100 * (kg[0] - kg[best]) / kg[0], rel=0.005)
    # and the team's member reads the same hint in the API, and nothing of nlp's
    member = User.objects.create_user("ada")
    TeamMembership.objects.create(user=member, team=vision)
    client = APIClient()
    client.force_authenticate(member)
    monkeypatch.setattr(timezone, "now", lambda: made_at + 20 * timedelta(minutes=1))
    [doc] = client.get("/api/when-to-run/").json()
    assert [h["text"] for h in doc["hints"]] == [hint.text] and "pretrain" not in str(doc)
