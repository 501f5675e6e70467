"""The team page's table of findings written in one pass (templatetags/finding_rows.py): the same characters as the
template's loop it replaces, for findings counted and not, of an excluded job, with evidence and without, with names to
escape; the most money first."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.template import Context, Template

from apps.core.units.footprint import Footprint
from apps.dashboard.templatetags.finding_rows import team_waste_rows
from apps.jobs.models import Job
from apps.waste.models import Flag

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
