"""Forecast files (apps/carbon/forecast.py) and `manage.py import_forecast`: Electricity Maps' forecast JSON and a
plain CSV import; every bad input names its problem and writes nothing; a later import replaces an hour; a
forecast is kept apart from the measured intensity and changes no footprint."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.carbon.forecast import ForecastError, forecast_parse
from apps.carbon.models import ForecastHour, IntensityHour
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute
from apps.simulator.intensity import FORECAST_SPREAD_48H, forecast_at, forecast_series, intensity_at

from .fleet_builder import HOUR, T0, fleet_build, intensity_set, job_run

SAMPLES = Path(__file__).resolve().parents[2] / "apps" / "carbon" / "samples"
SAMPLE = SAMPLES / "DE-2024-06-17-forecast-electricitymaps.json"


def _ema(points: list[dict], **top: object) -> str:
    return json.dumps({"zone": "TEST", "forecast": points, "updatedAt": "2026-11-02T07:42:10.000Z", **top})


def _point(hour: int, grams: object = 300) -> dict:
    return {"carbonIntensity": grams, "datetime": f"2026-11-02T{hour:02d}:00:00.000Z"}


def test_electricity_maps_forecast_in_grams_becomes_kg_with_when_it_was_made() -> None:
    parsed = forecast_parse(_ema([_point(9, 310), _point(8, 296.5)]), zone="TEST")
    assert parsed.layout == "electricitymaps-forecast"
    assert [(r.hour.hour, r.kg_per_kwh, r.line) for r in parsed.rows] == [(8, 0.2965, 2), (9, 0.31, 1)]
    assert parsed.issued_at == datetime(2026, 11, 2, 7, 42, 10, tzinfo=UTC)


def test_a_point_with_no_value_is_left_out_not_zero() -> None:
    parsed = forecast_parse(_ema([_point(8), _point(9, None)]), zone="TEST")
    assert [r.hour.hour for r in parsed.rows] == [8] and parsed.left_out == 1


def test_a_plain_csv_is_a_forecast_too() -> None:
    parsed = forecast_parse("datetime,kg_per_kwh\n2026-11-02T08:00:00Z,0.31\n", zone="TEST")
    assert parsed.layout == "plain" and parsed.rows[0].kg_per_kwh == 0.31 and parsed.issued_at is None


def test_the_sample_parses() -> None:
    parsed = forecast_parse(SAMPLE.read_text(), zone="DE")
    assert len(parsed.rows) == 24 and parsed.rows[0].hour == datetime(2024, 6, 17, tzinfo=UTC)
    assert all(0.1 < r.kg_per_kwh < 0.8 for r in parsed.rows)


BAD: list[tuple[str, str, str]] = [
    ("not JSON", '{"forecast": [', "not readable JSON"),
    ("no forecast list", '{"zone": "TEST"}', 'an object with a "forecast" list'),
    ("another zone", _ema([_point(8)], zone="DE"), "zone \"DE\" is not the zone imported ('TEST')"),
    ("not hourly", _ema([_point(8)], temporalGranularity="15_minutes"), "only hourly forecasts"),
    ("direct figures", _ema([_point(8)], emissionFactorType="direct"), "is not the 'lifecycle' figures"),
    ("a point's direct figures", _ema([{**_point(8), "emissionFactorType": "direct"}]), "point 1: emissionFactorType"),
    ("grams as text", _ema([_point(8, "300")]), 'point 1: carbonIntensity "300" is not a number'),
    ("negative", _ema([_point(8, -1)]), "point 1: negative intensity -1 g/kWh"),
    ("kg in a grams field", _ema([_point(8, 2500)]), "point 1: 2500 g/kWh is over 2 kg/kWh"),
    ("not on the hour", _ema([{"carbonIntensity": 3, "datetime": "2026-11-02T08:30:00Z"}]), "is not on the hour"),
    ("no datetime", _ema([{"carbonIntensity": 3}]), "point 1: no datetime"),
    ("no value field", _ema([{"datetime": "2026-11-02T08:00:00Z"}]), "point 1: no carbonIntensity"),
    ("twice", _ema([_point(8), _point(8)]), "point 2: 2026-11-02 08:00 UTC is already given by point 1"),
    ("bad updatedAt", _ema([_point(8)], updatedAt="yesterday"), "updatedAt: 'yesterday' is not an ISO 8601 time"),
    ("only nulls", _ema([_point(8, None)]), "no point with a value"),
    ("bad CSV", "datetime,kg_per_kwh\n2026-11-02T08:00:00Z,3.5\n", "line 2: 3.5 kg/kWh is over 2 kg/kWh"),
]


@pytest.mark.parametrize(("text", "problem"), [(t, p) for _, t, p in BAD], ids=[i for i, _, _ in BAD])
def test_bad_files_name_their_problem(text: str, problem: str) -> None:
    with pytest.raises(ForecastError, match=r"problems? with the forecast file") as raised:
        forecast_parse(text, zone="TEST")
    assert any(problem in p for p in raised.value.problems), raised.value.problems


@pytest.mark.django_db
@pytest.mark.parametrize(("text", "problem"), [(t, p) for _, t, p in BAD], ids=[i for i, _, _ in BAD])
def test_the_command_writes_nothing_on_bad_input(tmp_path: Path, text: str, problem: str) -> None:
    # given a fleet in zone TEST with a forecast already imported
    fleet_build(servers=1)
    good = tmp_path / "good.json"
    good.write_text(_ema([_point(8, 300), _point(9, 300)]))
    call_command("import_forecast", str(good), zone="TEST", source="EM", stdout=StringIO())
    before = list(ForecastHour.objects.values_list("hour", "kg_per_kwh", "source"))
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    # when
    with pytest.raises(CommandError, match="Nothing was imported") as raised:
        call_command("import_forecast", str(bad), zone="TEST", source="other", stdout=StringIO())
    # then
    assert problem in str(raised.value)
    assert list(ForecastHour.objects.values_list("hour", "kg_per_kwh", "source")) == before


@pytest.mark.django_db
def test_import_replaces_hours_and_never_touches_measured_intensity_or_footprints(tmp_path: Path) -> None:
    # given a job whose footprint comes from the measured intensity
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 12)
    job = job_run(fleet, key="slurm/1", gpus=fleet.gpus[:1], hours=3, power_w=500)
    footprints_recompute()
    operational = Job.objects.get(pk=job.pk).operational_kg
    path = tmp_path / "forecast.json"
    path.write_text(_ema([_point(h, 100) for h in range(12)]))
    out = StringIO()
    # when a forecast is imported for the same hours, then again with other figures for some
    call_command("import_forecast", str(path), zone="TEST", source="Electricity Maps forecast", stdout=out)
    path.write_text(_ema([_point(h, 120) for h in range(6, 14)], updatedAt="2026-11-02T08:00:00Z"))
    call_command("import_forecast", str(path), zone="TEST", source="Electricity Maps forecast", stdout=out)
    # then the later import wins where they overlap, the earlier stays elsewhere
    stored = dict(ForecastHour.objects.values_list("hour__hour", "kg_per_kwh"))
    assert stored == {**{h: 0.1 for h in range(6)}, **{h: 0.12 for h in range(6, 14)}}
    assert ForecastHour.objects.get(hour=T0.replace(hour=7)).issued_at == datetime(2026, 11, 2, 8, tzinfo=UTC)
    assert "2 new, 6 replaced, 0 unchanged" in out.getvalue()
    # and the measured intensity and the job's footprint are what they were
    assert set(IntensityHour.objects.values_list("kg_per_kwh", flat=True)) == {0.3}
    footprints_recompute()
    assert Job.objects.get(pk=job.pk).operational_kg == pytest.approx(operational)


@pytest.mark.django_db
def test_a_zone_no_site_uses_is_refused_unless_allowed(tmp_path: Path) -> None:
    fleet_build(servers=1)
    path = tmp_path / "de.json"
    path.write_text(SAMPLE.read_text())
    with pytest.raises(CommandError, match="--zone DE: no site uses this zone"):
        call_command("import_forecast", str(path), zone="DE", source="EM", stdout=StringIO())
    assert not ForecastHour.objects.exists()
    call_command("import_forecast", str(path), zone="DE", source="EM", allow_unknown_zone=True, stdout=StringIO())
    assert ForecastHour.objects.filter(zone="DE").count() == 24


@pytest.mark.django_db
def test_issued_on_the_command_line_and_a_csv(tmp_path: Path) -> None:
    fleet_build(servers=1)
    path = tmp_path / "forecast.csv"
    path.write_text("datetime,kg_per_kwh\n2026-11-02T08:00:00Z,0.31\n")
    with pytest.raises(CommandError, match="--issued: 'soon' is not an ISO 8601 time"):
        call_command("import_forecast", str(path), zone="TEST", source="grid operator", issued="soon")
    call_command("import_forecast", str(path), zone="TEST", source="grid operator", issued="2026-11-02T06:00")
    row = ForecastHour.objects.get()
    assert (row.kg_per_kwh, row.source, row.issued_at) == (0.31, "grid operator", datetime(2026, 11, 2, 6, tzinfo=UTC))


def test_the_simulators_forecast_is_the_truth_off_by_an_error_growing_with_the_lead() -> None:
    issued = datetime(2026, 11, 2, 6, tzinfo=UTC)
    series = forecast_series(zone="DE", issued=issued, hours=72)
    truth = [intensity_at(h, zone="DE") for h, _ in series]
    errors = [abs(f / t - 1) for (_, f), t in zip(series, truth, strict=True)]
    assert series[0][1] == truth[0] and series == forecast_series(zone="DE", issued=issued, hours=72)
    assert all(e <= FORECAST_SPREAD_48H * min(1, k / 48) + 1e-3 for k, e in enumerate(errors))
    assert max(errors[48:]) > FORECAST_SPREAD_48H / 2  # it is off, two days ahead
    assert forecast_at(series[30][0], issued=issued + HOUR, zone="DE") != series[30][1]  # each issue its own


@pytest.mark.django_db
def test_simulate_intensity_writes_a_forecast_import_forecast_reads(tmp_path: Path) -> None:
    fleet_build(servers=1, name="de", zone="DE")
    path = tmp_path / "forecast.csv"
    call_command("simulate_intensity", zone="DE", start="2026-11-02T06:00:00Z", hours=48, forecast=True,
                 out=str(path), stdout=StringIO())  # fmt: skip
    call_command("import_forecast", str(path), zone="DE", source="simulator", issued="2026-11-02T06:00:00Z",
                 stdout=StringIO())  # fmt: skip
    stored = list(ForecastHour.objects.filter(zone="DE").values_list("hour", "kg_per_kwh"))
    issued = datetime(2026, 11, 2, 6, tzinfo=UTC)
    assert stored == forecast_series(zone="DE", issued=issued, hours=48)
    assert not IntensityHour.objects.filter(zone="DE").exists()


@pytest.mark.django_db
def test_the_admin_lists_forecasts_read_only(client) -> None:
    fleet_build(servers=1)
    ForecastHour.objects.create(zone="TEST", basis="location", hour=T0, kg_per_kwh=0.3, source="EM")
    client.force_login(User.objects.create_superuser("root"))
    page = client.get("/admin/carbon/forecasthour/")
    assert page.status_code == 200 and "EM" in page.content.decode()
    assert client.get("/admin/carbon/forecasthour/add/").status_code == 403
    assert client.get("/admin/carbon/whentorunhint/").status_code == 200
