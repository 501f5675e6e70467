"""The rows of the pages' tables of findings, each written in one pass: a template loop over a team's month of
findings (177 on the bench's team page, ten cells each through the glossary's and the numbers' filters) was a fifth
of the page's time, and the audit queue's page of 50 findings with a decision's form each a sixth of its. The same
characters as the loops they replace (tests/dashboard/templatetags/test_finding_rows.py renders both), each value
escaped or built by the filters the loops called."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import template
from django.template import Context
from django.template.defaultfilters import date, filesizeformat, join, timesince_filter
from django.template.defaulttags import CsrfTokenNode
from django.urls import reverse
from django.utils.html import conditional_escape, escape
from django.utils.safestring import SafeString, mark_safe

from apps.core.templatetags.names import isolated
from apps.reports.formatting import qty

from .glossary import advice, decision_label, evidence_items, finding_meaning, finding_term, status_label, waste_window
from .numbers import billed

register = template.Library()

_ANY_ID = 987654321  # an id no job has, to reverse a job page's URL once and fill in each job's id
_DOT = " \u00b7 "  # between a finding's evidence's items


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


def _decision(d: Any) -> str:
    if not d:
        return ""
    e = conditional_escape
    return (
        f'<br><small class="decided">{e(decision_label(d.action))} by {e(d.actor.username)} on '
        f"{e(date(d.at, 'Y-m-d H:i'))} UTC: \u201c{e(d.reason)}\u201d</small>"
    )


def _hour_jobs(flag: Any, job_url: str) -> str:
    """A GPU-hour finding's cells: its GPU and the jobs that ran in its hour."""
    e = conditional_escape
    gpu = ""
    if flag.gpu_id:
        url = escape(reverse("dashboard:gpu", args=[flag.gpu_id]))
        gpu = (
            f'on GPU <a href="{url}?start={e(date(flag.hour, "Y-m-d"))}">{e(flag.gpu.node.hostname)}/'
            f"{e(flag.gpu.index)}</a>"
        )
    jobs = "".join(
        ("<br><small>jobs in that hour:</small>" if k == 0 else "")
        + f' <a href="{job_url.replace(str(_ANY_ID), str(j.pk))}">{isolated(j.job_key)}</a>'
        for k, j in enumerate(flag.hour_jobs)
    )
    return (
        f'\n        <td class="hour-jobs">{gpu}\n'
        f"          {jobs or '<br><small>no job ran in that hour</small>'}</td>\n"
        f"        <td>{e(flag.cluster.name)}<br><small>(the GPU's cluster)</small></td>\n        "
    )


def _queue_row(flag: Any, urls: Mapping[str, str], form: Mapping[str, str]) -> str:
    e = conditional_escape
    job = flag.job if flag.job_id else None
    pk = str(flag.pk)
    row = [
        f'\n      <tr data-flag="{pk}" data-kind="{e(flag.kind)}" data-status="{e(flag.status)}">\n'
        f'        <td>{finding_term(flag.kind)}<br><small class="hint">{e(finding_meaning(flag.kind))}</small><br>'
        f'<small class="status status-{e(flag.status)}">{e(status_label(flag.status))}</small>'
        f"{_decision(flag.decision)}</td>\n        ",
    ]
    if job is not None:
        excluded = "<br><small>excluded from bill</small>" if job.excluded_from_bill else ""
        row.append(
            f'\n        <td><a href="{urls["job"].replace(str(_ANY_ID), str(flag.job_id))}">{isolated(job.job_key)}</a>'
            f"</td>\n        <td>{e(job.team.name)}{excluded}</td>\n        "
        )
    else:
        row.append(_hour_jobs(flag, urls["job"]))
    currency = job.currency if job is not None else ""
    stake = (
        f"{e(billed(flag.stake, currency))} {e(currency)}"
        if flag.stake is not None
        else '<span class="hint">none</span>'
    )
    line = advice(flag)
    shown_advice = f'<br><span class="advice">What to do: {e(line)}</span>' if line else ""
    row.append(
        f'\n        <td class="num stake">{stake}</td>\n'
        f'        <td class="evidence">{join(evidence_items(flag), _DOT, autoescape=True)}{shown_advice}</td>\n'
        f'        <td class="when"><span class="waste-window">{e(waste_window(flag))}</span><br><small class="hint" '
        f'title="{e(date(flag.created_at, "Y-m-d H:i"))} UTC">found {e(timesince_filter(flag.created_at))} ago</small>'
        "</td>\n        <td>\n"
        f'          <form method="post" action="{urls["act"].replace(str(_ANY_ID), pk)}" class="act">{form["csrf"]}\n'
        f'            <input type="hidden" name="next" value="{form["next"]}">\n'
        '            <input name="reason" placeholder="reason" required '
        f'aria-label="Reason for the decision on finding #{pk}">\n'
        f'            <select name="action" aria-label="Decision on finding #{pk}">\n'
        '              <option value="acknowledge">acknowledge (expected)</option>\n'
        f'              <option value="dispute">dispute ({"attribution" if job is not None else "the meter"} looks '
        "wrong)</option>\n              "
    )
    if job is not None:
        bill = (
            '<option value="include">put back on the bill</option>'
            if job.excluded_from_bill
            else '<option value="exclude">exclude from the team\'s bill</option>'
        )
        row.append(
            f"\n              {bill}\n"
            '              <option value="reassign_team">reassign to team \u2192</option>\n'
            '              <option value="reassign_group">reassign to job group \u2192</option>\n              '
        )
    row.append("\n            </select>\n            ")
    if job is not None:
        key = e(job.job_key)
        row.append(
            f'\n            <select name="team" aria-label="Team to reassign job {key} to"><option value="">team'
            f"</option>{form['teams']}</select>\n"
            f'            <select name="job_group" aria-label="Job group to reassign job {key} to"><option value="">'
            f"group</option>{form['groups']}</select>\n            "
        )
    meter = (
        ""
        if job is not None
        else "<small class=\"hint\">On the meter's figures, not a job's: acknowledging it (a known driver reset) "
        "changes no number; to move or exclude a job that ran in that hour, use the job's page.</small>"
    )
    row.append(f'\n            <button type="submit">Record</button>\n          </form>\n          {meter}\n'
               "        </td>\n      </tr>\n    ")  # fmt: skip
    return "".join(row)


@register.simple_tag(takes_context=True)
def audit_queue_rows(context: Context, flags: Iterable[Any]) -> SafeString:
    """The audit queue's page of findings (each with its `stake`, `decision` and, for a GPU-hour's, `hour_jobs`), a
    row and its decision's form each; a row saying so where there is none. The page's CSRF token, its path and its
    choices of team and job group (`team_options`, `group_options`) are the context's."""
    urls = {
        "job": escape(reverse("dashboard:job", args=[_ANY_ID])),
        "act": escape(reverse("dashboard:audit-act", args=[_ANY_ID])),
    }
    form = {
        "csrf": CsrfTokenNode().render(context),
        "next": conditional_escape(context["request"].get_full_path()),
        "teams": conditional_escape(context["team_options"]),
        "groups": conditional_escape(context["group_options"]),
    }
    rows = "".join(_queue_row(flag, urls, form) for flag in flags)
    return mark_safe(rows or '<tr><td colspan="7">Nothing to review.</td></tr>')  # (escaped)
