"""The per-hour tables partitioned by month (apps.telemetry.partitions): rows land in their month's partition,
months are made ahead, and a month past retention is dropped whole while jobs' totals, teams' daily sums,
findings and the audit log stay as they were."""

from __future__ import annotations

import io
import threading
import time
from datetime import UTC, date, datetime
from decimal import Decimal

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from apps.jobs.models import Job, JobGpuHour, JobGpuHourEnergy
from apps.pipeline import decisions
from apps.pipeline.derive import Fact, Scope, derive
from apps.pipeline.ingest import Fetched, IngestError, hour_write
from apps.pipeline.inputs import footprints_recompute
from apps.rollups.cost_selectors import cluster_job_costs_minor, team_job_costs_minor, team_totals_costs_minor
from apps.rollups.focus_selectors import focus_targets
from apps.rollups.models import JobDay, TeamDay, TeamLineDay
from apps.telemetry import partitions
from apps.telemetry.hour import HourInput
from apps.telemetry.models import GpuHour
from apps.telemetry.partitions import expiry_horizon, hour_rows_expire, months_add, partitions_ensure
from apps.waste.audit import AuditError
from apps.waste.kinds import FlagKind
from apps.waste.models import AuditEntry, Flag
from tests.carbon.fleet_builder import fleet_build, intensity_set, job_run

pytestmark = pytest.mark.django_db

OCT, NOV = date(2026, 10, 1), date(2026, 11, 1)


def _rows(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return int(cursor.fetchone()[0])


def _exists(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        return bool(cursor.fetchone()[0])


def test_months_and_the_retention_horizon_are_calendar_months() -> None:
    assert months_add(date(2026, 11, 1), 3) == date(2027, 2, 1)
    assert months_add(date(2026, 1, 1), -1) == date(2025, 12, 1)
    now = datetime(2026, 12, 1, 5, tzinfo=UTC)
    assert expiry_horizon(now=now, keep_months=0) is None
    assert expiry_horizon(now=now, keep_months=13) == date(2025, 11, 1)


def test_a_month_s_rows_move_from_the_default_partition_into_its_own_when_it_is_made() -> None:
    # given rows of November in a database whose partitions start later (they went to the default partition)
    fleet = fleet_build(servers=1, gpus_per_server=2)
    job_run(fleet, key="slurm/1", gpus=fleet.gpus, hours=3, power_w=300)
    before = JobGpuHour.objects.count(), sum(JobGpuHourEnergy.objects.values_list("energy_j", flat=True))
    made_before = _exists("jobs_jobgpuhour_p202611")
    # when November's partitions are made
    made = partitions_ensure(NOV, NOV)
    # then each hour table has its November partition holding the rows, and the ORM sees the same rows
    assert made == (0 if made_before else 3)
    assert _rows("jobs_jobgpuhour_p202611") == 6 and _rows("telemetry_gpuhour_p202611") == 6
    assert _rows("jobs_jobgpuhour_default") == 0
    assert (JobGpuHour.objects.count(), sum(JobGpuHourEnergy.objects.values_list("energy_j", flat=True))) == before
    # and making it again makes nothing
    assert partitions_ensure(NOV, NOV) == 0


def test_an_ingested_hour_lands_in_its_month_s_partition() -> None:
    fleet = fleet_build(servers=1, gpus_per_server=1)
    hour = datetime(2026, 9, 14, 3, tzinfo=UTC)
    data = HourInput(hour_start=hour.timestamp(), scrape_interval_s=15)
    hour_write(cluster=fleet.cluster, hour=hour, fetched=Fetched(data, None, 0, 0.0))
    assert _exists("telemetry_gpuhour_p202609") and _exists("jobs_jobgpuhourenergy_p202609")


def test_an_expired_month_is_dropped_while_jobs_daily_sums_costs_findings_and_the_audit_stay(settings) -> None:
    # given jobs in October, across the month's end, and in November, with their footprints and daily sums
    fleet = fleet_build(servers=1)
    intensity_set("TEST", [0.3] * 24)
    october = job_run(fleet, key="slurm/oct", gpus=fleet.gpus[:2], hours=5, power_w=400,
                      start=datetime(2026, 10, 5, tzinfo=UTC))  # fmt: skip
    across = job_run(fleet, key="slurm/across", gpus=fleet.gpus[2:4], hours=4, power_w=500,
                     start=datetime(2026, 10, 31, 22, tzinfo=UTC))  # fmt: skip
    november = job_run(fleet, key="slurm/nov", gpus=fleet.gpus[4:6], hours=3, power_w=600,
                       start=datetime(2026, 11, 2, tzinfo=UTC))  # fmt: skip
    partitions_ensure(OCT, NOV)
    with transaction.atomic():  # as the ingest leaves them: footprints, each job's days, the daily sums
        derive(Scope(), changed={Fact.FACTORS, Fact.SCHEDULER})
    admin = User.objects.create_user("boss", is_staff=True)
    flag, _ = Flag.objects.get_or_create(kind=FlagKind.IDLE_ALLOCATION, cluster=fleet.cluster, job=october)
    decisions.flag_review(actor=admin, flag=flag, action="acknowledge", reason="expected")

    def kept() -> dict:
        return {
            "jobs": {j.job_key: (j.facility_kwh, j.cost, j.embodied_kg, j.operational_kg) for j in Job.objects.all()},
            "days": {(d.day, d.team_id): (d.energy_j, d.cost, d.facility_kwh) for d in TeamDay.objects.all()},
            "flags": list(Flag.objects.values_list("kind", "job__job_key", "status")),
            "audit": list(AuditEntry.objects.values_list("action", "reason")),
            "booked": booked(),
        }

    def booked() -> list:
        """Costs in minor units (each job rounded on its own) of the team's and the cluster's rollups, of the teams
        side by side and of October's FOCUS export; by week, the job across October's end has its expired and its
        kept day in one week."""
        span = {"start": datetime(2026, 10, 1, tzinfo=UTC), "end": datetime(2026, 12, 1, tzinfo=UTC)}
        return [
            team_job_costs_minor(team=october.team, **span, granularity=g, currency="EUR") for g in ("day", "week")
        ] + [
            cluster_job_costs_minor(cluster=fleet.cluster, **span, granularity="month", currency="EUR"),
            team_totals_costs_minor(user=admin, **span),
            focus_targets(user=admin, month=OCT),
        ]

    before = kept()
    assert before["jobs"]["slurm/oct"][1] > Decimal(0) and len(before["days"]) == 4
    assert JobDay.objects.filter(day__lt=NOV).count() == 2  # October's run's day, and the first of the one across
    assert TeamLineDay.objects.filter(day__lt=NOV).count() == 1  # October's run, within its day
    assert len(before["booked"][0]) == 4 and len(before["booked"][1]) == 3 and before["booked"][3]
    assert len(before["booked"][4]) == 2
    # when the months before November are dropped
    done = hour_rows_expire(horizon=NOV)
    # then October's hour rows are gone, November's are there
    assert done.partitions_dropped == 3 and done.jobs_frozen == 2 and done.bytes_freed > 0
    assert not JobGpuHour.objects.filter(hour__lt=datetime(2026, 11, 1, tzinfo=UTC)).exists()
    assert not GpuHour.objects.filter(hour__lt=datetime(2026, 11, 1, tzinfo=UTC)).exists()
    assert JobGpuHour.objects.filter(job=november).count() == 6 and JobGpuHour.objects.filter(job=across).count() == 4
    assert not _exists("jobs_jobgpuhour_p202610") and _exists("jobs_jobgpuhour_p202611")
    # and the jobs that had rows there keep their totals, as do the daily sums, findings and the audit log
    assert set(Job.objects.filter(rows_expired=True).values_list("job_key", flat=True)) == {"slurm/oct", "slurm/across"}
    assert kept() == before
    # and the jobs' days before November go with their rows (a page reads those days' kept costs), November's stay
    assert not JobDay.objects.filter(day__lt=NOV).exists() and JobDay.objects.filter(job=november).exists()
    assert not TeamLineDay.objects.filter(day__lt=NOV).exists() and TeamLineDay.objects.filter(day__gte=NOV).exists()
    # even when every footprint is derived again (a new price, a new PUE)
    footprints_recompute()
    assert kept() == before
    # and its page says so
    admin_page = Client()
    admin_page.force_login(admin)
    assert 'id="rows-expired"' in admin_page.get(f"/jobs/{across.pk}/").content.decode()
    assert 'id="rows-expired"' not in admin_page.get(f"/jobs/{november.pk}/").content.decode()
    # and a frozen job's team or bill cannot change (its daily sums cannot be recomputed)
    with pytest.raises(AuditError, match="past retention"):
        decisions.job_exclude(actor=admin, job=across, exclude=True, reason="benchmark")
    # and an hour past retention is not ingested again
    settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS = 1
    old = datetime(2020, 1, 1, tzinfo=UTC)
    with pytest.raises(IngestError, match="past the hour rows' retention"):
        hour_write(cluster=fleet.cluster, hour=old, fetched=Fetched(HourInput(old.timestamp(), 15), None, 0, 0.0))


def test_the_command_keeps_everything_by_default_and_says_what_a_dry_run_would_drop(settings) -> None:
    settings.FLEETWATT_HOUR_ROWS_KEEP_MONTHS = 0
    call_command("hour_rows_expire", stdout=(out := io.StringIO()))
    assert "every month is kept" in out.getvalue()
    fleet = fleet_build(servers=1, gpus_per_server=1)
    job_run(fleet, key="slurm/old", gpus=fleet.gpus, hours=2, power_w=300, start=datetime(2025, 1, 6, tzinfo=UTC))
    partitions_ensure(date(2025, 1, 1), date(2025, 1, 1))
    call_command("hour_rows_expire", keep_months=3, dry_run=True, stdout=(out := io.StringIO()))
    assert "would drop 3 monthly partitions" in out.getvalue() and "1 jobs keep their totals" in out.getvalue()
    assert JobGpuHour.objects.count() == 2 and not Job.objects.filter(rows_expired=True).exists()


@pytest.mark.django_db(transaction=True)
def test_two_makers_of_one_month_at_once_make_it_once_and_neither_fails() -> None:
    # given two workers ingesting the first hour of a new month: the first has made the month's partitions and
    # not committed yet; the second found them missing and waits for the maker's lock
    params = connection.settings_dict
    where = {"host": params["HOST"] or "127.0.0.1", "port": params["PORT"] or 5432, "dbname": params["NAME"]}
    month = "2031-03-01"
    ensure = "SELECT fleetwatt_hour_partitions_ensure(%s, %s)"
    first, second = psycopg.connect(user=params["USER"], **where), psycopg.connect(user=params["USER"], **where)
    outcome: dict[str, object] = {}

    def other_worker() -> None:
        try:
            outcome["made"] = second.execute(ensure, [month, month]).fetchone()
            second.commit()
        except psycopg.Error as exc:
            outcome["error"] = exc
            second.rollback()

    try:
        assert first.execute(ensure, [month, month]).fetchone() == (3,)
        thread = threading.Thread(target=other_worker)
        thread.start()
        waiting = None
        for _ in range(200):
            activity = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s"
            waiting = first.execute(activity, [second.info.backend_pid]).fetchone()
            if waiting == ("Lock",):
                break
            time.sleep(0.025)
        assert waiting == ("Lock",)
        # when the first commits
        first.commit()
        thread.join(10)
        # then the second finds them made (its catalog cache still said "missing": the check under the lock looks
        # in pg_class), makes nothing and does not fail
        assert outcome == {"made": (0,)}
    finally:
        first.close()
        second.close()
        with connection.cursor() as cursor:
            for table in partitions.HOUR_TABLES:
                cursor.execute(f"DROP TABLE IF EXISTS {table}_p203103")
