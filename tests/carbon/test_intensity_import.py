"""Hourly intensity files: every validation rule names its line and imports nothing; the samples and the
Electricity Maps layout import; re-importing replaces and recomputes the footprints of the hours reached;
the simulator writes files the importer reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.carbon import services
from apps.carbon.intensity import IntensityError, IntensityRow, intensity_parse, plain_csv
from apps.carbon.models import IntensityHour, Site
from apps.fleet.models import Cluster
from apps.pipeline.inputs import intensity_import
from apps.simulator.intensity import ZONES, intensity_at, intensity_series
from apps.simulator.management.commands.simulate_intensity import start_parse

SAMPLES = Path(__file__).resolve().parents[2] / "apps" / "carbon" / "samples"
PLAIN_SAMPLE = SAMPLES / "DE-2024-06-03-week.csv"
EMA_SAMPLE = SAMPLES / "DE-2024-06-10-week-electricitymaps.csv"
EMA_HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,Data Estimated,"
    "Data Estimation Method"
)
EMA_HEADER_2024 = (
    "Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
    "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),Renewable energy percentage (RE%),"
    "Data source,Data estimated,Data estimation method"
)


def h(day: int, hour: int) -> datetime:
    return datetime(2024, 6, day, hour, tzinfo=UTC)


# (id, file text, the problem the error must name)
BAD: list[tuple[str, str, str]] = [
    ("empty file", "", "line 1: the file is empty"),
    ("blank lines only", "\n\n", "line 1: the file is empty"),
    ("header only", "datetime,kg_per_kwh\n", "line 2: no rows after the header"),
    ("unknown header", "time,value\n2024-06-03T00:00:00Z,0.3\n", "line 1: unrecognised header 'time,value'"),
    ("unknown column", "datetime,kg_per_kwh,comment\n", "line 1: unknown columns 'comment'"),
    (
        "unparseable time",
        "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3\n03/06/2024 01:00,0.3\n",
        "line 3: '03/06/2024 01:00' is not an ISO 8601 time",
    ),
    ("date only", "datetime,kg_per_kwh\n2024-06-03,0.3\n", "line 2: '2024-06-03' is a date without a time"),
    (
        "not on the hour",
        "datetime,kg_per_kwh\n2024-06-03T00:30:00Z,0.3\n",
        "line 2: '2024-06-03T00:30:00Z' is not on the hour",
    ),
    (
        "not on the UTC hour",
        "datetime,kg_per_kwh\n2024-06-03T05:00:00+05:30,0.3\n",
        "line 2: '2024-06-03T05:00:00+05:30' is not on the hour (in UTC)",
    ),
    (
        "duplicate",
        "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3\n2024-06-03T01:00:00Z,0.3\n2024-06-03 00:00:00,0.31\n",
        "line 4: 2024-06-03 00:00 UTC is already given on line 2",
    ),
    (
        "duplicate across offsets",
        "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3\n2024-06-03T02:00:00+02:00,0.3\n",
        "line 3: 2024-06-03 00:00 UTC is already given on line 2",
    ),
    ("negative", "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,-0.01\n", "line 2: negative intensity -0.01 kg/kWh"),
    (
        "over 2 kg",
        "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,350\n",
        "line 2: 350 kg/kWh is over 2 kg/kWh (this column is in kg/kWh",
    ),
    ("not a number", "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3O\n", "line 2: '0.3O' is not a number"),
    ("nan", "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,nan\n", "line 2: 'nan' is not a finite number"),
    ("missing value", "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,\n", "line 2: no value"),
    ("columns", "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3,x\n", "line 2: 3 columns, the header has 2"),
    (
        "other zone",
        "datetime,zone,kg_per_kwh\n2024-06-03T00:00:00Z,DE,0.3\n2024-06-03T01:00:00Z,FR,0.05\n",
        "line 3: zone 'FR' is not the zone imported ('DE'); import one zone per run",
    ),
    (
        "ema over 2000 g",
        f"{EMA_HEADER}\n2024-06-03 00:00:00,Germany,Germany,DE,1900,2100.5,1,1,x,false,\n",
        "line 2: 2100.5 g/kWh is over 2 kg/kWh",
    ),
    (
        "ema other zone",
        f"{EMA_HEADER}\n2024-06-03 00:00:00,France,France,FR,30,50,1,1,x,false,\n",
        "line 2: zone 'FR' is not the zone imported ('DE')",
    ),
]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """footprints_refresh, recorded instead of run (it is tested with the footprint arithmetic)."""
    recorded: list[dict[str, Any]] = []
    refreshed = services.FootprintRefresh(gpu_hours=11)
    monkeypatch.setattr(services, "footprints_refresh", lambda **kw: recorded.append(kw) or refreshed)
    return recorded


@pytest.fixture
def de_cluster(db: None) -> Cluster:
    site = Site.objects.create(name="dc-frankfurt", grid_zone="DE", pue=1.2, electricity_price_per_kwh=Decimal("0.18"))
    return Cluster.objects.create(name="c1", prometheus_url="http://p:9090", site=site)


def snapshot() -> list[tuple[Any, ...]]:
    return list(IntensityHour.objects.order_by("pk").values_list())


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


# --- Parsing ------------------------------------------------------------------------------------------


def test_plain_file_parses_with_utc_for_naive_times_and_offsets_converted() -> None:
    text = "datetime,kg_per_kwh\n2024-06-03T01:00:00Z,0.31\n2024-06-03 00:00:00,0.30\n2024-06-03T04:00:00+02:00,0.32\n"
    parsed = intensity_parse(text, zone="DE")
    assert parsed.layout == "plain"
    assert [(r.hour, r.kg_per_kwh, r.line) for r in parsed.rows] == [
        (h(3, 0), 0.30, 3), (h(3, 1), 0.31, 2), (h(3, 2), 0.32, 4)
    ]  # fmt: skip
    assert parsed.missing_hours == 0


def test_plain_file_with_a_zone_column_in_any_order() -> None:
    text = "zone,kg_per_kwh,datetime\nDE,0.30,2024-06-03T00:00:00Z\nDE,0.33,2024-06-03T03:00:00Z\n"
    parsed = intensity_parse(text, zone="DE")
    assert parsed.layout == "plain+zone"
    assert [r.hour for r in parsed.rows] == [h(3, 0), h(3, 3)]
    assert parsed.missing_hours == 2


def test_electricity_maps_export_parses_in_grams_lca_by_default() -> None:
    text = (
        f"\ufeff{EMA_HEADER}\n"
        "2024-06-03 00:00:00,Germany,Germany,DE,350.5,410.25,50,48,entsoe.eu,false,\n"
        "2024-06-03 01:00:00,Germany,Germany,DE,340,400,51,49,entsoe.eu,true,TIME_SLICER_AVERAGE\n"
    )
    lca = intensity_parse(text, zone="DE")
    direct = intensity_parse(text, zone="DE", ema_column="direct")
    assert lca.layout == "electricitymaps" and lca.value_column == "Carbon Intensity gCO₂eq/kWh (LCA)"
    assert [r.kg_per_kwh for r in lca.rows] == [pytest.approx(0.41025), pytest.approx(0.4)]
    assert [r.kg_per_kwh for r in direct.rows] == [pytest.approx(0.3505), pytest.approx(0.34)]


def test_electricity_maps_2024_header_parses() -> None:
    text = f"{EMA_HEADER_2024}\n2024-01-01 00:00:00,Sweden,Sweden,SE,2.54,30.02,99.42,60.13,svk.se,true,X\n"
    parsed = intensity_parse(text, zone="SE")
    assert parsed.value_column == "Carbon intensity gCO₂eq/kWh (Life cycle)"
    assert parsed.rows[0] == IntensityRow(
        hour=datetime(2024, 1, 1, tzinfo=UTC), kg_per_kwh=pytest.approx(0.03002), line=2
    )


def test_electricity_maps_export_without_the_asked_column_says_which_it_has() -> None:
    text = "Datetime (UTC),Zone Id,Carbon Intensity gCO₂eq/kWh (direct)\n2024-06-03 00:00:00,DE,350\n"
    with pytest.raises(IntensityError, match="line 1: an Electricity Maps export without its lca carbon intensity"):
        intensity_parse(text, zone="DE")
    assert intensity_parse(text, zone="DE", ema_column="direct").rows[0].kg_per_kwh == 0.35


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[i for i, _, _ in BAD])
def test_each_rule_names_the_line(text: str, expected: str) -> None:
    with pytest.raises(IntensityError) as raised:
        intensity_parse(text, zone="DE")
    assert any(expected in p for p in raised.value.problems), raised.value.problems


def test_every_bad_line_is_listed() -> None:
    text = "datetime,kg_per_kwh\n2024-06-03T00:00:00Z,0.3\nx,0.3\n2024-06-03T02:00:00Z,-1\n2024-06-03T03:00:00Z,0.3\n"
    with pytest.raises(IntensityError) as raised:
        intensity_parse(text, zone="DE")
    assert [p.split(":")[0] for p in raised.value.problems] == ["line 3", "line 4"]


@settings(max_examples=50, deadline=None)
@given(
    # Hypothesis takes naive bounds (a zone would come through `timezones=`); the test sets UTC itself.
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1)),  # noqa: DTZ001
    hours=st.integers(min_value=1, max_value=100),
    zone=st.sampled_from([*ZONES, "XX-UNKNOWN"]),
)
def test_simulated_series_round_trips_through_the_plain_format(start: datetime, hours: int, zone: str) -> None:
    start = start.replace(minute=0, second=0, microsecond=0, tzinfo=UTC)
    series = intensity_series(zone=zone, start=start, end=start + timedelta(hours=hours))
    parsed = intensity_parse(plain_csv(series), zone=zone)
    assert [(r.hour, r.kg_per_kwh) for r in parsed.rows] == series
    assert all(0 < v < 2 for _, v in series)


# --- Import -------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[i for i, _, _ in BAD])
def test_a_bad_file_imports_nothing(
    text: str, expected: str, de_cluster: Cluster, calls: list[Any], tmp_path: Path
) -> None:
    # given hours already stored
    run("import_intensity", str(PLAIN_SAMPLE), "--zone", "DE", "--source", "sample")
    calls.clear()
    before = snapshot()
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    # when
    with pytest.raises(CommandError) as raised:
        run("import_intensity", str(path), "--zone", "DE", "--source", "bad")
    # then
    assert expected in str(raised.value)
    assert "Nothing was imported." in str(raised.value)
    assert snapshot() == before
    assert calls == []


@pytest.mark.django_db
def test_a_zone_no_site_uses_is_refused_unless_allowed(de_cluster: Cluster, calls: list[Any]) -> None:
    with pytest.raises(CommandError, match="--zone FR: no site uses this zone \\(sites use: DE\\)"):
        run("import_intensity", str(PLAIN_SAMPLE), "--zone", "FR", "--source", "s")
    assert IntensityHour.objects.count() == 0
    out = run("import_intensity", str(PLAIN_SAMPLE), "--zone", "FR", "--source", "s", "--allow-unknown-zone")
    assert IntensityHour.objects.filter(zone="FR").count() == 168
    assert "footprints: nothing to recompute" in out and calls == []


@pytest.mark.django_db
def test_the_samples_import(de_cluster: Cluster, calls: list[Any]) -> None:
    # when
    plain = run("import_intensity", str(PLAIN_SAMPLE), "--zone", "DE", "--source", "fleetwatt sample")
    ema = run("import_intensity", str(EMA_SAMPLE), "--zone", "DE", "--source", "fleetwatt sample (EM layout)")
    # then two weeks, back to back
    hours = IntensityHour.objects.filter(zone="DE", basis="location")
    assert hours.count() == 2 * 168
    assert hours.order_by("hour").first().hour == h(3, 0) and hours.order_by("hour").last().hour == h(16, 23)
    assert "168 hours of DE (location, source 'fleetwatt sample'): 2024-06-03 00:00 to 2024-06-09 23:00 UTC" in plain
    assert "168 created, 0 replaced, 0 unchanged; 0 hours missing" in plain
    assert "(electricitymaps, Carbon Intensity gCO₂eq/kWh (LCA))" in ema
    first = hours.get(hour=h(10, 0))
    assert first.kg_per_kwh == pytest.approx(0.4227) and first.source == "fleetwatt sample (EM layout)"
    # plausible: a diurnal curve with its solar dip around midday
    by_hour = {0: [], 12: []}
    for row in hours:
        if row.hour.hour in by_hour:
            by_hour[row.hour.hour].append(row.kg_per_kwh)
    assert sum(by_hour[12]) / 14 < 0.85 * sum(by_hour[0]) / 14


@pytest.mark.django_db
def test_reimporting_replaces_and_recomputes_the_hours_reached(
    de_cluster: Cluster, calls: list[Any], settings: Any
) -> None:
    settings.FLEETWATT_INTENSITY_FILL_HOURS = 3
    rows = [IntensityRow(hour=h(3, i), kg_per_kwh=0.30) for i in range(24)]
    # when imported first: June had no figures, so hours of other months filled from the nearest month change
    first = intensity_import(rows=rows, zone="DE", source="v1", basis="location")
    assert (first.created, first.replaced, first.unchanged) == (24, 0, 0)
    assert calls == [{"cluster_ids": [de_cluster.id]}] and first.refresh_window is None
    # when the same hours come again with a newer version of some
    newer = [IntensityRow(hour=r.hour, kg_per_kwh=0.25 if r.hour.hour < 6 else 0.30) for r in rows]
    report = intensity_import(rows=newer, zone="DE", source="v2", basis="location")
    # then every hour is replaced (the source changed), the newer values win
    assert (report.created, report.replaced, report.unchanged) == (0, 24, 0)
    stored = dict(IntensityHour.objects.values_list("hour", "kg_per_kwh"))
    assert stored[h(3, 0)] == 0.25 and stored[h(3, 12)] == 0.30
    assert set(IntensityHour.objects.values_list("source", flat=True)) == {"v2"}
    # and June's footprints are recomputed: its monthly mean changed, and hours within 3 h of the changes
    assert calls[-1] == {
        "cluster_ids": [de_cluster.id],
        "start": datetime(2024, 6, 1, tzinfo=UTC),
        "end": datetime(2024, 7, 1, tzinfo=UTC),
    }
    assert report.refresh_window == (datetime(2024, 6, 1, tzinfo=UTC), datetime(2024, 7, 1, tzinfo=UTC))


@pytest.mark.django_db
def test_reimporting_the_same_file_changes_nothing(de_cluster: Cluster, calls: list[Any]) -> None:
    run("import_intensity", str(PLAIN_SAMPLE), "--zone", "DE", "--source", "s")
    before = snapshot()
    calls.clear()
    out = run("import_intensity", str(PLAIN_SAMPLE), "--zone", "DE", "--source", "s")
    assert "0 created, 0 replaced, 168 unchanged" in out
    assert snapshot() == before and calls == []


@pytest.mark.django_db
def test_a_change_near_a_month_edge_reaches_the_next_month(
    de_cluster: Cluster, calls: list[Any], settings: Any
) -> None:
    settings.FLEETWATT_INTENSITY_FILL_HOURS = 3
    intensity_import(rows=[IntensityRow(h(30, 20), 0.3), IntensityRow(h(30, 21), 0.3)], zone="DE", source="a",
                     basis="location")  # fmt: skip
    intensity_import(rows=[IntensityRow(datetime(2024, 7, 1, 5, tzinfo=UTC), 0.3)], zone="DE", source="a",
                     basis="location")  # fmt: skip
    calls.clear()
    intensity_import(rows=[IntensityRow(h(30, 22), 0.3)], zone="DE", source="a", basis="location")
    # an hour filled from 22:00 may be 01:00 on 1 July
    assert calls == [{"cluster_ids": [de_cluster.id], "start": datetime(2024, 6, 1, tzinfo=UTC),
                      "end": datetime(2024, 8, 1, tzinfo=UTC)}]  # fmt: skip


@pytest.mark.django_db
def test_bases_are_kept_apart_and_only_clusters_on_that_basis_recompute(de_cluster: Cluster, calls: list[Any]) -> None:
    rows = [IntensityRow(h(3, 0), 0.3)]
    intensity_import(rows=rows, zone="DE", source="loc", basis="location")
    intensity_import(rows=[IntensityRow(h(3, 0), 0.1)], zone="DE", source="mkt", basis="market")
    assert dict(IntensityHour.objects.values_list("basis", "kg_per_kwh")) == {"location": 0.3, "market": 0.1}
    assert len(calls) == 1  # no site in DE reports market-based figures


@pytest.mark.django_db
def test_a_failed_recomputation_imports_nothing(de_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(**kwargs: Any) -> int:
        raise RuntimeError("refresh failed")

    monkeypatch.setattr(services, "footprints_refresh", fail)
    with pytest.raises(RuntimeError):
        intensity_import(rows=[IntensityRow(h(3, 0), 0.3)], zone="DE", source="s", basis="location")
    assert IntensityHour.objects.count() == 0


@pytest.mark.django_db
def test_import_checks_its_arguments(de_cluster: Cluster, calls: list[Any]) -> None:
    with pytest.raises(IntensityError) as raised:
        intensity_import(
            rows=[IntensityRow(h(3, 0), 0.3, line=2), IntensityRow(h(3, 0), 0.3, line=3)],
            zone="DE",
            source="",
            basis="average",
        )
    assert raised.value.problems == [
        "--basis: expected one of location, market, marginal, got 'average'",
        "--source: a name of 1 to 200 characters, e.g. 'Electricity Maps 2024 v1'",
        "line 3: 2024-06-03 00:00 UTC is already given on line 2",
    ]
    assert IntensityHour.objects.count() == 0


# --- The simulator ------------------------------------------------------------------------------------


def test_simulated_intensity_is_deterministic_and_independent_of_the_window() -> None:
    week = intensity_series(zone="DE", start=h(3, 0), end=h(10, 0))
    day = intensity_series(zone="DE", start=h(5, 0), end=h(6, 0))
    assert week == intensity_series(zone="DE", start=h(3, 0), end=h(10, 0))
    assert day == week[48:72]
    assert intensity_series(zone="DE", start=h(3, 0), end=h(10, 0), seed=1) != week
    assert intensity_at(h(3, 0), zone="FR") < intensity_at(h(3, 0), zone="PL")


def test_simulated_intensity_has_a_solar_dip_and_the_mean_asked_for() -> None:
    year = intensity_series(zone="DE", start=datetime(2024, 1, 1, tzinfo=UTC), end=datetime(2025, 1, 1, tzinfo=UTC),
                            mean_kg_per_kwh=0.35)  # fmt: skip
    mean = sum(v for _, v in year) / len(year)
    assert mean == pytest.approx(0.35, rel=0.03)
    june = [(t, v) for t, v in year if t.month == 6]
    noon = [v for t, v in june if t.hour in (10, 11, 12)]
    night = [v for t, v in june if t.hour in (1, 2, 3)]
    assert sum(noon) / len(noon) < 0.85 * sum(night) / len(night)


@pytest.mark.django_db
def test_simulate_intensity_writes_what_import_intensity_reads(
    de_cluster: Cluster, calls: list[Any], tmp_path: Path
) -> None:
    out = tmp_path / "de.csv"
    run("simulate_intensity", "--zone", "DE", "--start", "2024-06-03T00:00:00Z", "--hours", "48", "--out", str(out),
        "--mean", "0.35")  # fmt: skip
    run("import_intensity", str(out), "--zone", "DE", "--source", "simulated")
    assert IntensityHour.objects.filter(zone="DE", source="simulated").count() == 48
    with pytest.raises(CommandError, match="not on the hour"):
        run("simulate_intensity", "--zone", "DE", "--start", "2024-06-03T00:30:00Z", "--hours", "1", "--out", "-")


def test_simulate_intensity_start_accepts_now_minus_a_duration() -> None:
    now = datetime(2024, 6, 10, 12, 34, tzinfo=UTC)
    assert start_parse("now-7d", now=now) == datetime(2024, 6, 3, 12, tzinfo=UTC)
    assert start_parse("now", now=now) == datetime(2024, 6, 10, 12, tzinfo=UTC)
    assert start_parse("2024-06-03T02:00:00+02:00") == h(3, 0)
    assert start_parse("2024-06-03T00:00:00") == h(3, 0)
