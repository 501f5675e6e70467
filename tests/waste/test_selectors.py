"""What waste findings are worth in a period (apps/waste/selectors.py): a finding clipped to the period and to the GPUs
it names, a GPU-hour two findings share counted once (the kinds still adding up to the total), only the findings that
count (open or disputed, of the waste kinds, of jobs on their team's bill); the audit queue's summary, orders and
pages, and the findings a bulk rule takes. Across the pages that read it: tests/waste/test_waste_in_period.py."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from apps.jobs.models import Job
from apps.waste.kinds import FlagKind
from apps.waste.models import Flag
from apps.waste.selectors import (
    counted_flags,
    flag_gpus,
    latest_decisions,
    period_waste,
    period_waste_counted,
    queue_order,
    queue_rows,
    queue_triage,
    recent_decisions,
    rule_matches,
    team_counted_flags,
)
from apps.waste.triage import BulkRule, QueueOrder
from tests.factories import (
    HOUR,
    T0,
    AdminFactory,
    AuditEntryFactory,
    FlagFactory,
    GpuFactory,
    JobFactory,
    JobGpuHourFactory,
)

pytestmark = pytest.mark.django_db


def _job_on_two_gpus(hours: int = 3, cost: str = "1.00", **fields: object) -> tuple[Job, list]:
    """A job `hours` hours on two GPUs, each row 1 GPU-hour and `cost`."""
    job = JobFactory(first_day=None, last_day=None, **fields)
    gpus = [GpuFactory(node__cluster=job.cluster), GpuFactory(node__cluster=job.cluster)]
    for gpu in gpus:
        for h in range(hours):
            JobGpuHourFactory(job=job, gpu=gpu, hour=T0 + h * HOUR, occupancy_s=3600, cost=Decimal(cost))
    return job, gpus


# period_waste


def test_a_finding_is_worth_its_jobs_rows_in_the_period_on_the_gpus_it_names() -> None:
    # given a job 3 hours on two GPUs; a memory hog on one of them
    job, gpus = _job_on_two_gpus()
    hog = FlagFactory(cluster=job.cluster, job=job, kind="memory_hog", evidence={"gpus": [gpus[0].uuid]})
    # when the period holds the last two hours
    found = period_waste(flags=Flag.objects.all(), start=T0 + HOUR, end=T0 + 3 * HOUR)
    # then two GPU-hours of one GPU
    assert found.per_flag[hog.pk].gpu_hours == pytest.approx(2.0)
    assert found.total.cost == Decimal("2.00") and found.per_job[job.pk].cost == Decimal("2.00")
    assert dict(found.jobs_of_kind) == {"memory_hog": {job.pk}}
    assert found.per_day_gpu_hours == {T0.date(): pytest.approx(2.0)}


def test_a_gpu_hour_two_findings_share_is_counted_once_under_the_most_specific_kind() -> None:
    # given a failed run (all its GPUs) that was also an idle allocation on one GPU
    job, gpus = _job_on_two_gpus()
    failed = FlagFactory(cluster=job.cluster, job=job, kind="failed_run", evidence={"cost": "6.00"})
    idle = FlagFactory(cluster=job.cluster, job=job, kind="idle_allocation", evidence={"gpus": [gpus[1].uuid]})
    # when
    found = period_waste(flags=Flag.objects.all(), start=T0, end=T0 + 3 * HOUR)
    # then each finding is worth its own rows, the total the union once
    assert (found.per_flag[failed.pk].cost, found.per_flag[idle.pk].cost) == (Decimal("6.00"), Decimal("3.00"))
    assert found.total.cost == Decimal("6.00")
    # and split by kind, the kinds add up to the total: the shared GPU-hours under idle allocation
    assert found.per_kind_once["idle_allocation"].cost == Decimal("3.00")
    assert found.per_kind_once["failed_run"].cost == Decimal("3.00")
    assert sum((p.cost for p in found.per_kind_once.values()), Decimal(0)) == found.total.cost
    assert found.kinds_of_job[job.pk] == {"failed_run", "idle_allocation"}


def test_a_finding_with_nothing_in_the_period_is_not_listed_and_other_kinds_are_not_in_the_total() -> None:
    job, _ = _job_on_two_gpus()
    FlagFactory(cluster=job.cluster, job=job, kind="memory_hog")
    low = FlagFactory(cluster=job.cluster, job=job, kind="low_coverage")
    assert period_waste(flags=Flag.objects.all(), start=T0 + 5 * HOUR, end=T0 + 6 * HOUR).per_flag == {}
    found = period_waste(flags=Flag.objects.filter(pk=low.pk), start=T0, end=T0 + 3 * HOUR)
    assert found.per_flag[low.pk].cost == Decimal("6.00")  # shown on its own line
    assert found.total.cost == Decimal(0) and not found.per_job  # not waste


def test_days_are_local_days() -> None:
    job, _ = _job_on_two_gpus(hours=1)  # 10:00 UTC on 2 November
    FlagFactory(cluster=job.cluster, job=job, kind="memory_hog")
    found = period_waste(flags=Flag.objects.all(), start=T0, end=T0 + HOUR, tz=ZoneInfo("Pacific/Kiritimati"))
    assert list(found.per_day) == [(T0 + timedelta(hours=14)).date()]  # UTC+14: already the 3rd


def test_the_findings_and_those_counted_worth_as_two_reads_would_give_them() -> None:
    # given a failed run also an idle allocation on one GPU, a memory hog acknowledged, and another job's open hog
    job, gpus = _job_on_two_gpus(hours=3, cost="1.234567")
    other, _ = _job_on_two_gpus(hours=2, cost="0.5")
    FlagFactory(cluster=job.cluster, job=job, kind="failed_run")
    FlagFactory(cluster=job.cluster, job=job, kind="idle_allocation", evidence={"gpus": [gpus[1].uuid]})
    FlagFactory(cluster=job.cluster, job=job, kind="memory_hog", status="acknowledged")
    FlagFactory(cluster=other.cluster, job=other, kind="memory_hog")
    start, end = T0 + HOUR, T0 + 3 * HOUR

    def counted(flag: Flag) -> bool:
        return flag.status == "open"

    # when the findings' worth and the counted ones' are read together
    every, kept, found = period_waste_counted(flags=Flag.objects.all(), start=start, end=end, counted=counted,
                                              job_fields=("job_key", "currency"))  # fmt: skip
    # then each is what period_waste gives of them, to the last bit
    assert every == period_waste(flags=Flag.objects.all(), start=start, end=end)
    assert kept == period_waste(flags=Flag.objects.filter(status="open"), start=start, end=end)
    # with the findings worth something, by kind then newest first, each with its job's fields read
    assert [f.pk for f in found] == [f.pk for f in sorted(Flag.objects.all(), key=lambda f: (f.kind, -f.pk))]
    assert found[0].job.job_key == job.job_key


# counted_flags, team_counted_flags, flag_gpus


def test_only_open_or_disputed_waste_findings_of_billed_jobs_count() -> None:
    job = JobFactory()
    counted = [FlagFactory(cluster=job.cluster, job=job, kind=k, status=s)
               for k, s in (("memory_hog", "open"), ("failed_run", "disputed"))]  # fmt: skip
    FlagFactory(cluster=job.cluster, job=job, kind="idle_allocation", status="acknowledged")
    other = JobFactory(cluster=job.cluster)
    FlagFactory(cluster=job.cluster, job=other, kind="idle_allocation", status="resolved")
    FlagFactory(cluster=job.cluster, job=job, kind="low_coverage")
    FlagFactory(cluster=job.cluster, job=None, gpu=GpuFactory(node__cluster=job.cluster), hour=T0, kind="conservation")
    excluded = JobFactory(excluded_from_bill=True)
    FlagFactory(cluster=excluded.cluster, job=excluded, kind="memory_hog")
    assert set(counted_flags(Flag.objects.all())) == set(counted)


def test_a_teams_counted_findings_are_of_its_jobs_that_ran_in_the_period() -> None:
    now = JobFactory(start=T0, last_seen=T0 + HOUR)
    mine = FlagFactory(cluster=now.cluster, job=now)
    old = JobFactory(team=now.team, start=T0 - timedelta(days=400), last_seen=T0 - timedelta(days=399))
    FlagFactory(cluster=old.cluster, job=old)
    other = JobFactory(start=T0, last_seen=T0 + HOUR)
    FlagFactory(cluster=other.cluster, job=other)
    assert list(team_counted_flags(team=now.team, start=T0, end=T0 + HOUR)) == [mine]


def test_the_gpus_a_finding_names() -> None:
    assert flag_gpus({"gpus": ["GPU-1", "GPU-2"]}) == {"GPU-1", "GPU-2"}
    assert flag_gpus({"gpus": []}) is None and flag_gpus({}) is None and flag_gpus(None) is None


# the audit queue


def test_the_queues_summary_per_kind_with_the_money_at_stake() -> None:
    # given a job's hog worth 3.00 (one GPU), a disputed failed run worth 6.00, and a low-coverage finding
    job, gpus = _job_on_two_gpus()
    FlagFactory(cluster=job.cluster, job=job, kind="memory_hog", evidence={"gpus": [gpus[0].uuid]})
    FlagFactory(cluster=job.cluster, job=job, kind="failed_run", status="disputed")
    FlagFactory(cluster=job.cluster, job=job, kind="low_coverage")
    FlagFactory(cluster=job.cluster, job=job, kind="idle_allocation", status="acknowledged")  # not in the queue
    # when
    triage = queue_triage(flags=Flag.objects.all(), start=T0, end=T0 + 3 * HOUR)
    # then by money at stake, the kinds that are not waste last with none
    lines = [(k.kind, k.open, k.disputed, k.cost, k.currency) for k in triage.kinds]
    assert lines == [
        (FlagKind.FAILED_RUN, 0, 1, Decimal("6.00"), "EUR"),
        (FlagKind.MEMORY_HOG, 1, 0, Decimal("3.00"), "EUR"),
        (FlagKind.LOW_COVERAGE, 1, 0, None, ""),
    ]
    assert triage.currency == "EUR" and triage.waste.total.cost == Decimal("6.00")
    assert sorted(triage.stake().values()) == [Decimal("3.00"), Decimal("6.00")]


def test_the_queue_by_money_or_oldest_first_and_its_page_in_that_order() -> None:
    cheap, _ = _job_on_two_gpus(hours=1, cost="0.10")
    dear, _ = _job_on_two_gpus(hours=1, cost="5.00")
    first = FlagFactory(cluster=cheap.cluster, job=cheap)
    second = FlagFactory(cluster=dear.cluster, job=dear)
    nothing = FlagFactory(cluster=dear.cluster, job=JobFactory(cluster=dear.cluster))  # no row: nothing at stake
    stake = queue_triage(flags=Flag.objects.all(), start=T0, end=T0 + HOUR).stake()
    by_money = queue_order(flags=Flag.objects.all(), stake=stake, order=QueueOrder.MONEY)
    assert list(by_money) == [second.pk, first.pk, nothing.pk] and len(by_money) == 3
    assert by_money[1:3] == [first.pk, nothing.pk] and by_money[0] == second.pk  # a page: a slice
    assert list(queue_order(flags=Flag.objects.all(), stake=stake, order=QueueOrder.OLDEST)) == [
        first.pk, second.pk, nothing.pk
    ]  # fmt: skip
    page = queue_rows(ids=[nothing.pk, second.pk, 10**9])
    assert [f.pk for f in page] == [nothing.pk, second.pk] and page[1].job.team.name


def test_the_last_decision_on_each_finding_and_the_recent_ones() -> None:
    flag = FlagFactory()
    admin = AdminFactory()
    AuditEntryFactory(actor=admin, job=flag.job, flag_id=flag.pk, action="acknowledge")
    last = AuditEntryFactory(actor=admin, job=flag.job, flag_id=flag.pk, action="dispute")
    AuditEntryFactory(job=flag.job)  # on the job, no finding
    assert latest_decisions(flag_ids=[flag.pk]) == {flag.pk: last}
    assert [e.action for e in recent_decisions(limit=5)] == ["dispute", "acknowledge"]
    assert len(recent_decisions(limit=1)) == 1


def test_a_rule_takes_the_open_findings_of_its_kind_under_its_amount_in_its_currency() -> None:
    cheap, _ = _job_on_two_gpus(hours=1, cost="0.10")
    dear, _ = _job_on_two_gpus(hours=1, cost="5.00")
    usd, _ = _job_on_two_gpus(hours=1, cost="0.10", currency="USD")
    taken = FlagFactory(cluster=cheap.cluster, job=cheap, kind="memory_hog")
    FlagFactory(cluster=dear.cluster, job=dear, kind="memory_hog")
    FlagFactory(cluster=usd.cluster, job=usd, kind="memory_hog")
    FlagFactory(cluster=cheap.cluster, job=cheap, kind="failed_run")
    FlagFactory(cluster=cheap.cluster, job=JobFactory(cluster=cheap.cluster), kind="memory_hog")  # nothing at stake
    rule = BulkRule(kind=FlagKind.MEMORY_HOG, under=Decimal("1.00"), currency="EUR", start=T0, end=T0 + HOUR)
    assert rule_matches(rule=rule) == {taken.pk: Decimal("0.20")}
