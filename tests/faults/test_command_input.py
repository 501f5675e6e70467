"""Commands given odd input answer with one clear line and write nothing (never a traceback, never an
unbounded run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.carbon.models import IntensityHour, Site
from apps.fleet.models import Cluster
from apps.jobs.models import Job
from apps.telemetry.models import IngestedHour

pytestmark = pytest.mark.django_db


@pytest.fixture
def zone_de(db: None) -> None:
    site = Site.objects.create(name="dc", grid_zone="DE")
    Cluster.objects.create(name="c1", prometheus_url="http://127.0.0.1:9", site=site)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("datetime,kg_per_kwh\n0001-01-01T00:00:00+01:00,0.3\n", "out of the range of dates"),
        ("datetime,kg_per_kwh\n" + "2024-06-03T00:00:00Z" + "x" * 200_000 + ",0.3\n", "not a readable CSV file"),
        ("datetime,kg_per_kwh\n" + "2" * 1000 + ",0.3\n", "is not an ISO 8601 time"),
    ],
    ids=["year-1-at-plus-one", "a-200-kb-cell", "a-long-timestamp"],
)
def test_import_intensity_refuses_odd_cells_in_one_line(zone_de: None, tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "intensity.csv"
    path.write_text(body)
    with pytest.raises(CommandError, match=message):
        call_command("import_intensity", str(path), zone="DE", source="test")
    assert not IntensityHour.objects.exists()


def test_import_intensity_refuses_a_file_over_the_cap_without_reading_it(
    zone_de: None, tmp_path: Path, settings
) -> None:
    settings.FLEETWATT_INTENSITY_MAX_BYTES = 1000
    path = tmp_path / "intensity.csv"
    path.write_text("datetime,kg_per_kwh\n" + "2024-06-03T00:00:00Z,0.3\n" * 100)
    with pytest.raises(CommandError, match="an intensity file is at most 1,000"):
        call_command("import_intensity", str(path), zone="DE", source="test")


def test_apply_config_refuses_a_file_over_the_cap(tmp_path: Path, settings) -> None:
    settings.FLEETWATT_CONFIG_MAX_BYTES = 1000
    path = tmp_path / "fleet.yaml"
    path.write_text("sites:\n" + "".join(f"  - name: s{i}\n" for i in range(200)))
    with pytest.raises(CommandError, match="a config is at most 1,000"):
        call_command("apply_config", str(path))
    assert not Site.objects.exists()


def test_apply_config_refuses_anchors_that_expand_past_the_cap(tmp_path: Path) -> None:
    # given a few hundred bytes of YAML whose aliases stand for ten billion nodes ("billion laughs")
    lines = ['a0: &a0 ["x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 11)]
    path = tmp_path / "fleet.yaml"
    path.write_text("\n".join(lines) + "\n")
    # when applied: refused before anything is built
    with pytest.raises(CommandError, match="YAML nodes once its anchors are expanded"):
        call_command("apply_config", str(path))
    assert not Site.objects.exists()


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-11-02T00:00:00", "2026-11-02T01:00:00Z", "--start 2026-11-02T00:00:00 has no time zone"),
        ("2026-11-02T00:00:00Z", "2026-11-02T01:00:00", "--end 2026-11-02T01:00:00 has no time zone"),
        ("1970-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "one run covers at most 8,784"),
    ],
    ids=["naive-start", "naive-end", "56-years"],
)
def test_ingest_refuses_odd_ranges(start: str, end: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("ingest", start=start, end=end, verbosity=0)
    assert not (Job.objects.exists() or IngestedHour.objects.exists())
