"""The work a team's or a job's serving engines counted, with its figures per token (apps.jobs.per_token), as a
partial of the team and job pages:

    {% load served %}
    {% served_work team=team start=start end=end %}     (the team's jobs over the page's days)
    {% served_work job=job %}                            (the job's whole run)
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from django import template

from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.jobs.per_token import per_token
from apps.jobs.selectors import job_work_units, serving_jobs

register = template.Library()


def _midnight(day: date | None) -> datetime | None:
    return None if day is None else datetime.combine(day, time(0), tzinfo=UTC)


@register.inclusion_tag("dashboard/_served.html", takes_context=True)
def served_work(
    context: template.Context,
    *,
    team: Team | None = None,
    job: Job | None = None,
    start: date | None = None,
    end: date | None = None,
) -> dict[str, Any]:
    """Per model: tokens, requests, J, Wh and g CO2e per 1,000 output tokens and cost per million; for a job, also its
    own work counter's units. Only jobs the viewer may see."""
    jobs = Job.objects.visible_to(context["request"].user)
    if team is not None:
        jobs = jobs.filter(team=team)
    elif job is not None:
        jobs = jobs.filter(pk=job.pk)
    else:
        jobs = jobs.none()
    lines = per_token(serving_jobs(jobs=jobs, start=_midnight(start), end=_midnight(end)), group_by="model")
    return {
        "lines": lines,
        "team": team,
        "job": job,
        "units": job_work_units(job=job) if job is not None else {},
        "start": start,
        "end": end,
    }
