"""The rows of the pages' tables of findings, each written in one pass: a template loop over a team's month of
findings (177 on the bench's team page, ten cells each through the glossary's and the numbers' filters) was a fifth
of the page's time. The same characters as the loops they replace (tests/dashboard/templatetags/test_finding_rows.py
renders both), each value escaped or built by the filters the loops called."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import conditional_escape, escape
from django.utils.safestring import SafeString, mark_safe

from apps.core.templatetags.names import isolated
from apps.reports.formatting import qty

from .glossary import finding_term, status_label, waste_window
from .numbers import billed

register = template.Library()

_ANY_ID = 987654321  # an id no job has, to reverse a job page's URL once and fill in each job's id


def _evidence(flag: Any, key: str) -> Any:
    """`flag.evidence.<key>` as a template reads it: "" where the evidence has no such key."""
    evidence = flag.evidence if isinstance(flag.evidence, dict) else {}
    return evidence.get(key, "") if key in evidence else ""


def _team_waste_row(f: Any, job_url: str) -> str:
    job, e = f.job, conditional_escape
    counted = f.counted
    marks = ' data-counted="1"' if counted else ' data-counted="0" class="not-counted"'
    row = [
        f'<tr data-job-key="{e(job.job_key)}" data-kind="{e(f.kind)}" data-status="{e(f.status)}"{marks}>'
        f"<td>{finding_term(f.kind)}</td>\n",
        f'    <td><span class="status status-{e(f.status)}">{e(status_label(f.status))}</span>',
    ]
    if not counted:
        excluded = " (job excluded from the bill)" if job.excluded_from_bill else ""
        row.append(f"<br><small>not counted{excluded}</small>")
    row += [
        f'</td><td><a href="{job_url.replace(str(_ANY_ID), str(f.job_id))}">{isolated(job.job_key)}</a></td>\n',
        f"    <td><small>{e(waste_window(f))}</small></td>\n",
        f'    <td class="num">{e(qty(f.worth.gpu_hours, 1))}</td>'
        f'<td class="num">{e(qty(_evidence(f, "sm_percent"), 1))}</td>\n',
        f'    <td class="num">{e(filesizeformat(_evidence(f, "memory_bytes")))}</td><td class="num">'
        f"{e(qty(f.worth.facility_kwh, 1))}</td>\n",
        f'    <td class="num">{e(qty(f.worth.co2e_kg, 1))}</td><td class="num">{e(billed(f.worth.cost, job.currency))} '
        f"{e(job.currency)}</td></tr>\n  ",
    ]
    return "".join(row)


@register.simple_tag
def team_waste_rows(findings: Iterable[Any]) -> SafeString:
    """The team page's findings of the period (each with its `worth` and whether it is `counted`), the most money
    first, a row each; a row saying so where there is none."""
    job_url = escape(reverse("dashboard:job", args=[_ANY_ID]))
    rows = [_team_waste_row(f, job_url) for f in sorted(findings, key=lambda f: f.worth.cost, reverse=True)]
    return mark_safe("".join(rows) or '<tr><td colspan="10">No waste found in this period.</td></tr>')  # (escaped)
