"""A flexible job group with runs and four weeks of its zone's intensity, for the when-to-run tests."""

from __future__ import annotations

from datetime import datetime, timedelta

from apps.carbon.models import JobGroup
from apps.carbon.services import job_groups_assign
from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.pipeline.inputs import footprints_recompute

from .fleet_builder import HOUR, T0, Fleet, intensity_set, job_run

NOW = T0 + timedelta(days=28, hours=22)  # Monday 30 November 2026, 22:00 UTC
KWH_PER_H = 0.5 * 1.3 * 1.2  # 500 W on one GPU, node overhead 1.3, PUE 1.2: facility kWh per hour
# The hint of the 2-hour runs at NOW, from the pattern below, as every page writes it.
HINT_AT_NOW = "start after 03:00 UTC (Tue 1 Dec): \u22120.47 kg, \u221260 %"


def clean_at(hour: datetime) -> float:
    """The zone's weekly pattern: cleaner from 03:00 to 05:00 UTC every day."""
    return 0.2 if 3 <= hour.hour < 5 else 0.5


def history(zone: str = "TEST", weeks: int = 4) -> None:
    """`weeks` weeks of the pattern up to NOW (its last hour 21:00)."""
    start = NOW - weeks * 7 * 24 * HOUR
    intensity_set(zone, [clean_at(start + k * HOUR) for k in range(weeks * 7 * 24)], start=start)


def sweeps(fleet: Fleet, *, team: Team | None = None, hours: int = 2, runs: int = 3, first_gpu: int = 0) -> list[Job]:
    """`runs` runs of the flexible group "sweeps", `hours` long at 500 W, starting 1, 2, 3 days before NOW."""
    JobGroup.objects.get_or_create(
        name="sweeps", defaults={"match_kind": "name_prefix", "match_value": "sweep-", "flexible": True}
    )
    jobs = []
    for k in range(runs):
        start = NOW - (k + 1) * 24 * HOUR
        key = f"slurm/{(team or fleet.team).name}-{k}"
        job = job_run(fleet, key=key, gpus=fleet.gpus[first_gpu : first_gpu + 1], hours=hours, power_w=500, start=start)
        Job.objects.filter(pk=job.pk).update(
            name=f"sweep-{k}", end=start + hours * HOUR, last_seen=start + hours * HOUR, team=team or fleet.team
        )
        jobs.append(job)
    job_groups_assign()
    footprints_recompute()
    return jobs
