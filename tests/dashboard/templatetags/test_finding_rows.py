"""The tables of findings written in one pass (templatetags/finding_rows.py): the same characters as the template
loops they replace. The team page's: for findings counted and not, of an excluded job, with evidence and without, with
names to escape; the most money first. The audit queue's: findings of jobs (on the bill or excluded, decided or not,
with money at stake or none) and of GPU-hours (with their GPU and the jobs of their hour, or neither), each with its
decision's form."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.utils.safestring import mark_safe

from apps.core.units.footprint import Footprint
from apps.dashboard.templatetags.finding_rows import team_waste_rows
from apps.jobs.models import Job
from apps.waste.models import Flag
from tests.factories import ClusterFactory, FlagFactory, GpuFactory, JobFactory, TeamFactory

# The loop as the team page's template wrote it (team_waste_rows writes it at once).
_TEMPLATE_LOOP = (
    "{% load glossary numbers names %}"
    '{% for f in waste|dictsortreversed:"worth.cost" %}<tr data-job-key="{{ f.job.job_key }}" data-kind'
    '="{{ f.kind }}" data-status="{{ f.status }}" data-counted="{{ f.counted|yesno:\'1,0\' }}"{% if not'
    ' f.counted %} class="not-counted"{% endif %}><td>{{ f.kind|finding_term }}</td>\n'
    '    <td><span class="status status-{{ f.status }}">{{ f.status|status_label }}</span>{% if not f.c'
    "ounted %}<br><small>not counted{% if f.job.excluded_from_bill %} (job excluded from the bill){% en"
    "dif %}</small>{% endif %}</td><td><a href=\"{% url 'dashboard:job' f.job_id %}\">{{ f.job.job_key|"
    "isolated }}</a></td>\n"
    "    <td><small>{{ f|waste_window }}</small></td>\n"
    '    <td class="num">{{ f.worth.gpu_hours|qty:1 }}</td><td class="num">{{ f.evidence.sm_percent|qty'
    ":1 }}</td>\n"
    '    <td class="num">{{ f.evidence.memory_bytes|filesizeformat }}</td><td class="num">{{ f.worth.fa'
    "cility_kwh|qty:1 }}</td>\n"
    '    <td class="num">{{ f.worth.co2e_kg|qty:1 }}</td><td class="num">{{ f.worth.cost|billed:f.job.c'
    "urrency }} {{ f.job.currency }}</td></tr>\n"
    '  {% empty %}<tr><td colspan="10">No waste found in this period.</td></tr>{% endfor %}'
)


def _finding(
    pk: int,
    kind: str,
    status: str,
    cost: str,
    *,
    counted: bool,
    key: str = "slurm/1",
    excluded: bool = False,
    evidence: dict[str, Any] | None = None,
) -> Flag:
    job = Job(
        pk=100 + pk,
        job_key=key,
        currency="EUR",
        excluded_from_bill=excluded,
        start=datetime(2026, 11, 2, 3, tzinfo=UTC),
        end=None,
    )
    flag = Flag(pk=pk, kind=kind, status=status, job=job, evidence=evidence or {})
    flag.worth = Footprint(
        gpu_hours=1.25 * pk, facility_kwh=0.5, embodied_kg=0.01, operational_kg=0.2, cost=Decimal(cost)
    )  # type: ignore[attr-defined]
    flag.counted = counted  # type: ignore[attr-defined]
    return flag


def test_the_rows_are_those_the_template_loop_wrote() -> None:
    findings = [
        _finding(
            1,
            "memory_hog",
            "open",
            "1.234567",
            counted=True,
            evidence={
                "sm_percent": 3.25,
                "memory_bytes": 2_500_000_000,
                "from": "2026-11-02T03:00:00+00:00",
                "to": "2026-11-02T05:00:00+00:00",
            },
        ),
        _finding(2, "idle_allocation", "acknowledged", "9.5", counted=False, key='<b>"x"</b>&\u202e'),
        _finding(3, "failed_run", "open", "0.004", counted=False, excluded=True, evidence={"sm_percent": None}),
        _finding(4, "no_such_kind", "disputed", "1.234567", counted=True),
    ]
    for shown in (findings, []):
        # then the rows are the loop's, character for character, the most money first
        expected = Template(_TEMPLATE_LOOP).render(Context({"waste": shown}))
        assert team_waste_rows(shown) == expected
    assert team_waste_rows(findings).index('data-kind="idle_allocation"') < team_waste_rows(findings).index(
        'data-kind="memory_hog"'
    )


# The audit queue's loop as its template wrote it (audit_queue_rows writes it at once).
_QUEUE_LOOP = (
    "{% load glossary numbers names %}"
    "{% for flag in flags %}\n"
    '      <tr data-flag="{{ flag.pk }}" data-kind="{{ flag.kind }}" data-status="{{ flag.status }}">\n'
    '        <td>{{ flag.kind|finding_term }}<br><small class="hint">{{ flag.kind|finding_meaning }}</s'
    'mall><br><small class="status status-{{ flag.status }}">{{ flag.status|status_label }}</small>{% w'
    'ith d=flag.decision %}{% if d %}<br><small class="decided">{{ d.action|decision_label }} by {{ d.a'
    'ctor.username }} on {{ d.at|date:"Y-m-d H:i" }} UTC: “{{ d.reason }}”</small>{% endif %}{% endwith'
    " %}</td>\n"
    "        {% if flag.job_id %}\n"
    "        <td><a href=\"{% url 'dashboard:job' flag.job_id %}\">{{ flag.job.job_key|isolated }}</a><"
    "/td>\n"
    "        <td>{{ flag.job.team.name }}{% if flag.job.excluded_from_bill %}<br><small>excluded from b"
    "ill</small>{% endif %}</td>\n"
    "        {% else %}\n"
    '        <td class="hour-jobs">{% if flag.gpu_id %}on GPU <a href="{% url \'dashboard:gpu\' flag.gp'
    "u_id %}?start={{ flag.hour|date:'Y-m-d' }}\">{{ flag.gpu.node.hostname }}/{{ flag.gpu.index }}</a"
    ">{% endif %}\n"
    "          {% for j in flag.hour_jobs %}{% if forloop.first %}<br><small>jobs in that hour:</small>"
    "{% endif %} <a href=\"{% url 'dashboard:job' j.pk %}\">{{ j.job_key|isolated }}</a>{% empty %}<br>"
    "<small>no job ran in that hour</small>{% endfor %}</td>\n"
    "        <td>{{ flag.cluster.name }}<br><small>(the GPU's cluster)</small></td>\n"
    "        {% endif %}\n"
    '        <td class="num stake">{% if flag.stake is not None %}{{ flag.stake|billed:flag.job.currenc'
    'y }} {{ flag.job.currency }}{% else %}<span class="hint">none</span>{% endif %}</td>\n'
    '        <td class="evidence">{{ flag|evidence_items|join:" · " }}{% with line=flag|advice %}{% if '
    'line %}<br><span class="advice">What to do: {{ line }}</span>{% endif %}{% endwith %}</td>\n'
    '        <td class="when"><span class="waste-window">{{ flag|waste_window }}</span><br><small class'
    '="hint" title="{{ flag.created_at|date:\'Y-m-d H:i\' }} UTC">found {{ flag.created_at|timesince }}'
    " ago</small></td>\n"
    "        <td>\n"
    '          <form method="post" action="{% url \'dashboard:audit-act\' flag.pk %}" class="act">{% cs'
    "rf_token %}\n"
    '            <input type="hidden" name="next" value="{{ request.get_full_path }}">\n'
    '            <input name="reason" placeholder="reason" required aria-label="Reason for the decision'
    ' on finding #{{ flag.pk }}">\n'
    '            <select name="action" aria-label="Decision on finding #{{ flag.pk }}">\n'
    '              <option value="acknowledge">acknowledge (expected)</option>\n'
    '              <option value="dispute">dispute ({% if flag.job_id %}attribution{% else %}the meter{'
    "% endif %} looks wrong)</option>\n"
    "              {% if flag.job_id %}\n"
    '              {% if flag.job.excluded_from_bill %}<option value="include">put back on the bill</op'
    'tion>{% else %}<option value="exclude">exclude from the team\'s bill</option>{% endif %}\n'
    '              <option value="reassign_team">reassign to team →</option>\n'
    '              <option value="reassign_group">reassign to job group →</option>\n'
    "              {% endif %}\n"
    "            </select>\n"
    "            {% if flag.job_id %}\n"
    '            <select name="team" aria-label="Team to reassign job {{ flag.job.job_key }} to"><optio'
    'n value="">team</option>{{ team_options }}</select>\n'
    '            <select name="job_group" aria-label="Job group to reassign job {{ flag.job.job_key }} '
    'to"><option value="">group</option>{{ group_options }}</select>\n'
    "            {% endif %}\n"
    '            <button type="submit">Record</button>\n'
    "          </form>\n"
    "          {% if not flag.job_id %}<small class=\"hint\">On the meter's figures, not a job's: ackno"
    "wledging it (a known driver reset) changes no number; to move or exclude a job that ran in that ho"
    "ur, use the job's page.</small>{% endif %}\n"
    "        </td>\n"
    "      </tr>\n"
    '    {% empty %}<tr><td colspan="7">Nothing to review.</td></tr>{% endfor %}'
)


@pytest.mark.django_db
def test_the_audit_queue_s_rows_are_those_the_template_loop_wrote() -> None:
    # given findings of jobs (one excluded, one decided, one with nothing at stake) and of GPU-hours
    cluster = ClusterFactory(name="c<1>")
    gpu = GpuFactory(node__cluster=cluster, node__hostname="n&0", index=3)
    job = JobFactory(cluster=cluster, job_key="slurm/<7>", currency="EUR", team=TeamFactory(name="vision"))
    excluded = JobFactory(cluster=cluster, job_key="slurm/8", excluded_from_bill=True, currency="EUR")
    hog = FlagFactory(cluster=cluster, job=job, kind="memory_hog", evidence={"sm_percent": 2.5, "memory_bytes": 10**9})
    idle = FlagFactory(cluster=cluster, job=excluded, kind="idle_allocation", status="disputed")
    reset = FlagFactory(cluster=cluster, job=None, gpu=gpu, hour=datetime(2026, 11, 2, 5, tzinfo=UTC),
                        kind="counter_reset")  # fmt: skip
    orphan = FlagFactory(cluster=cluster, job=None, gpu=None, hour=None, kind="conservation")
    flags = list(Flag.objects.filter(pk__in=[hog.pk, idle.pk, reset.pk, orphan.pk]).order_by("pk"))
    decided = SimpleNamespace(action="dispute", actor=SimpleNamespace(username="a<b>"), reason='"why" & <how>',
                              at=datetime(2026, 11, 3, 7, 5, tzinfo=UTC))  # fmt: skip
    for flag, stake, decision, jobs in zip(flags, (Decimal("1.235"), None, None, None), (decided, None, None, None),
                                           ([], [], [job, excluded], []), strict=True):  # fmt: skip
        flag.stake, flag.decision, flag.hour_jobs = stake, decision, jobs  # type: ignore[attr-defined]
    request = RequestFactory().get("/audit/?kind=memory_hog&x=<y>")
    context = {"request": request, "csrf_token": "tok\"en", "team_options": mark_safe('<option value="a">a</option>'),
               "group_options": mark_safe("")}  # fmt: skip
    for shown in (flags, []):
        # then the rows are the loop's, character for character
        expected = Template(_QUEUE_LOOP).render(Context({**context, "flags": shown}))
        assert (
            Template("{% load finding_rows %}{% audit_queue_rows flags %}").render(Context({**context, "flags": shown}))
            == expected
        )
