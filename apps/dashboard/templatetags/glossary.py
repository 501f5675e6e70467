"""The glossary on the pages: split methods, findings and energy figures with their names, how exact they are
and what they mean (a tooltip), from one place each (apps.core.units.glossary, apps.jobs.methods, apps.waste.kinds).

    {% load glossary %}
    {{ "sm_time"|method_term }}       <span class="term" title="Several jobs: ...">SM time — close</span>
    {{ flag.kind|finding_term }}      <span class="term" title="...">Memory Hog — exact</span>
    {{ "facility"|energy_label }}     Facility energy (kWh)
    {{ "gpu"|energy_unit }}           kWh (GPU)
    {{ flag|evidence_items }}         ["GPU node-1/3", "hour 2026-11-02 04:00 UTC", "residual 12.0 kJ", ...]
    {{ entry|decision_changes }}      ["status: Open → Acknowledged"]
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.template.defaultfilters import filesizeformat
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString

from apps.core.units import glossary
from apps.core.units.footprint import S_PER_HOUR, kwh
from apps.jobs.methods import Method
from apps.jobs.states import JobState
from apps.waste.advice import finding_advice
from apps.waste.kinds import FlagKind, FlagStatus

register = template.Library()


def _method(value: object) -> Method | None:
    try:
        return Method(str(value))
    except ValueError:
        return None


def _kind(value: object) -> FlagKind | None:
    try:
        return FlagKind(str(value))
    except ValueError:
        return None


def _with_exactness(name: str, exactness: str) -> str:
    """`SM time`, `close` -> "SM time — close"; without saying a word twice: `Estimated`, `estimate` ->
    "Estimated — not measured"."""
    words = glossary.exactness_words(exactness)
    if not words:
        return name
    head, _, rest = words.partition(" — ")
    if rest and name.lower().startswith(head):
        return f"{name} — {rest}"
    return f"{name} — {words}"


def method_name(value: object) -> str:
    """`sm_time` -> "SM time": the method's label without its exactness in brackets."""
    method = _method(value)
    return method.label.split(" (")[0] if method else str(value)


@register.filter
def method_text(value: object) -> str:
    """`whole_gpu` -> "Whole GPU — exact" (plain text, for a chart's legend or a CSV)."""
    method = _method(value)
    if method is None:
        return str(value)
    return _with_exactness(method_name(value), method.info.exactness)


@register.filter
def method_term(value: object) -> SafeString:
    """`whole_gpu` -> the method's name and exactness, its meaning and its exactness's meaning as the title."""
    method = _method(value)
    if method is None:
        return format_html('<span class="term">{}</span>', value)
    exactness = glossary.EXACTNESS.get(method.info.exactness)
    title = method.info.meaning + (f" {exactness.words.capitalize()}: {exactness.meaning}" if exactness else "")
    return format_html(
        '<span class="term" data-method="{}" title="{}">{}</span>', method.value, title, method_text(method.value)
    )


@register.filter
def finding_label(value: object) -> str:
    kind = _kind(value)
    return kind.label if kind else str(value)


@register.filter
def finding_meaning(value: object) -> str:
    kind = _kind(value)
    return kind.info.meaning if kind else ""


@register.filter
def finding_text(value: object) -> str:
    """`counter_reset` -> "Counter Reset — exact"."""
    kind = _kind(value)
    if kind is None:
        return str(value)
    return _with_exactness(kind.label, glossary.FINDING_BASIS.get(kind.value, ""))


@register.filter
def finding_term(value: object) -> SafeString:
    """A finding's name and how far to trust it, with its meaning as the title."""
    kind = _kind(value)
    if kind is None:
        return format_html('<span class="term">{}</span>', value)
    exactness = glossary.EXACTNESS.get(glossary.FINDING_BASIS.get(kind.value, ""))
    title = kind.info.meaning + (f" {exactness.words.capitalize()}: {exactness.meaning}" if exactness else "")
    return format_html('<span class="term" data-kind="{}" title="{}">{}</span>', kind.value, title, finding_text(kind))


@register.filter
def status_label(value: object) -> str:
    try:
        return FlagStatus(str(value)).label
    except ValueError:
        return str(value)


@register.filter
def energy_label(kind: str) -> str:
    """`facility` -> "Facility energy (kWh)"."""
    return glossary.energy_label(kind)


@register.filter
def energy_unit(kind: str) -> str:
    """`gpu` -> "kWh (GPU)"."""
    return glossary.energy_unit(kind)


@register.filter
def meter_label(source: str) -> str:
    """`dcgm` -> "dcgm-exporter": who metered a GPU-hour."""
    return glossary.meter_label(str(source))


@register.filter
def energy_meaning(kind: str) -> str:
    return glossary.ENERGY[glossary.EnergyKind(kind)].meaning


@register.filter
def kwh_of(joules: object) -> float:
    """Joules in kWh."""
    return kwh(float(joules or 0.0))  # type: ignore[arg-type]


@register.filter
def gpu_hours(seconds: object) -> float:
    """Seconds of occupancy as GPU-hours (3600 s = 1 GPU-h)."""
    return float(seconds or 0.0) / S_PER_HOUR  # type: ignore[arg-type]


@register.filter
def sampled_in_hour(seconds: object) -> float:
    """Sampled seconds of one hour, never above the hour (glossary.SAMPLED_CAP_NOTE says why they can be)."""
    return min(float(seconds or 0.0), S_PER_HOUR)  # type: ignore[arg-type]


@register.filter
def over_the_hour(seconds: object) -> bool:
    return float(seconds or 0.0) > S_PER_HOUR  # type: ignore[arg-type]


@register.simple_tag
def sampled_cap_note() -> str:
    return glossary.SAMPLED_CAP_NOTE


def _when(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    return parse_datetime(str(value)) if value else None


def _fmt_hour(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC" if value else ""


def _counted(n: int, noun: str) -> str:
    """`2, "GPU"` -> "2 GPUs"; `1, "counter reset"` -> "1 counter reset"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _num(value: Any, digits: int) -> str:
    return f"{float(value):,.{digits}f}"


@register.filter
def waste_window(flag: Any) -> str:
    """When the finding's waste happened: its evidence's hours (from, to), its GPU-hour, else its job's span."""
    evidence = flag.evidence or {}
    start, end = _when(evidence.get("from")), _when(evidence.get("to"))
    if end is not None:
        end += timedelta(hours=1)  # `to` is the start of the last hour that counted: the window ends at its end
    if start is None and flag.hour is not None:
        return _fmt_hour(flag.hour)
    if start is None and flag.job is not None:
        start, end = flag.job.start, flag.job.end
    if start is None:
        return ""
    if end is None:
        return f"{_fmt_hour(start)} → running"
    return f"{_fmt_hour(start)} → {_fmt_hour(end)}"


@register.filter
def evidence_items(flag: Any) -> list[str]:
    """The finding's evidence as short readable parts, each with its unit and, for energy, which energy."""
    e: dict[str, Any] = flag.evidence or {}
    out: list[str] = []
    if flag.gpu_id and flag.gpu is not None:
        out.append(f"GPU {glossary.gpu_name(flag.gpu.node.hostname, flag.gpu.index)}")
    if flag.hour is not None:
        out.append(f"hour {_fmt_hour(flag.hour)}")
    if e.get("state"):
        try:
            out.append(f"ended {JobState(e['state']).label.lower()}")
        except ValueError:
            out.append(f"ended {e['state']}")
    if e.get("signal"):
        out.append(f"signal {e['signal']}")
    elif e.get("exit_code") not in (None, 0):
        out.append(f"exit code {e['exit_code']}")
    gpus = e.get("gpus")
    if isinstance(gpus, list) and gpus and flag.gpu_id is None:
        out.append(_counted(len(gpus), "GPU"))
    if e.get("gpu_hours_blocked") is not None:
        out.append(f"{_num(e['gpu_hours_blocked'], 1)} GPU-h blocked")
    if e.get("unused_gpus"):
        out.append(
            f"{_counted(e['unused_gpus'], 'allocated GPU')} never used "
            f"({_num(e.get('unused_gpu_hours') or 0.0, 1)} GPU-h)"
        )
    if e.get("sm_percent") is not None:
        out.append(f"SM {_num(e['sm_percent'], 1)} %")
    if e.get("memory_bytes"):
        out.append(f"{filesizeformat(e['memory_bytes'])} held")
    if e.get("coverage") is not None:
        out.append(f"coverage {100 * float(e['coverage']):.0f} %")
        if e.get("sampled_s") is not None and e.get("expected_s"):
            out.append(
                f"seen {float(e['sampled_s']) / S_PER_HOUR:,.1f} of {float(e['expected_s']) / S_PER_HOUR:,.1f} GPU-h"
            )
        if e.get("threshold") is not None:
            out.append(f"threshold {100 * float(e['threshold']):.0f} %")
    if e.get("estimated_gpu_hours") is not None:
        out.append(f"{_num(e['estimated_gpu_hours'], 1)} of {_num(e.get('gpu_hours') or 0.0, 1)} GPU-h estimated")
    if e.get("estimated_energy_kwh") is not None:
        out.append(
            f"{_num(e['estimated_energy_kwh'], 2)} of {_num(e.get('energy_kwh') or 0.0, 2)} "
            f"{glossary.energy_unit('gpu')} estimated"
        )
    if e.get("estimated_cost") is not None:
        out.append(f"{e['estimated_cost']} estimated cost")
    if e.get("counter_resets"):
        out.append(_counted(e["counter_resets"], "counter reset"))
    if e.get("device_energy_j") is not None:
        out.append(f"{_num(kwh(e['device_energy_j']), 3)} {glossary.energy_unit('gpu')} metered by the agent")
    if e.get("dcgm_energy_j") is not None:
        out.append(f"{_num(kwh(e['dcgm_energy_j']), 3)} {glossary.energy_unit('gpu')} by DCGM")
    if e.get("residual_j") is not None:
        ratio = e.get("residual_ratio")
        share = f" ({100 * float(ratio):+.1f} %)" if ratio is not None else ""
        out.append(f"residual {_num(kwh(e['residual_j']), 3)} {glossary.energy_unit('gpu')}{share}")
    if e.get("contract_gaps"):
        gaps = e["contract_gaps"]
        out.append("agent without " + (", ".join(map(str, gaps)) if isinstance(gaps, list) else str(gaps)))
    if e.get("agent_version"):
        out.append(f"agent {e['agent_version']}")
    if e.get("intensity_source") or e.get("intensity_basis"):
        out.append(f"intensity {e.get('intensity_basis') or '?'} basis, {e.get('intensity_source') or 'no source'}")
    if e.get("facility_kwh") is not None:
        out.append(f"{_num(e['facility_kwh'], 2)} {glossary.energy_unit('facility')}")
    elif e.get("energy_kwh") is not None and e.get("estimated_energy_kwh") is None:
        out.append(f"{_num(e['energy_kwh'], 2)} {glossary.energy_unit('gpu')}")
    elif e.get("energy_j") is not None:
        out.append(f"{_num(kwh(e['energy_j']), 2)} {glossary.energy_unit('gpu')}")
    if e.get("co2e_kg") is not None:
        out.append(f"{_num(e['co2e_kg'], 1)} kg CO2e")
    if e.get("cost"):
        currency = flag.job.currency if flag.job is not None else ""
        out.append(f"{e['cost']} {currency}".strip())
    return out


_DECISION_FIELDS = {
    "status": "status",
    "team": "team",
    "job_group": "job group",
    "excluded_from_bill": "team's bill",
}


def _decision_value(key: str, value: Any) -> str:
    if key == "status":
        return status_label(value)
    if key == "excluded_from_bill":
        return "excluded" if value else "on it"
    return "none" if value in (None, "") else str(value)


@register.filter
def decision_changes(entry: Any) -> list[str]:
    """An audit entry's before and after as "field: before → after", for the fields that changed (all of
    them where none did)."""
    before: dict[str, Any] = entry.before or {}
    after: dict[str, Any] = entry.after or {}
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)] or list(after)
    return [
        f"{_DECISION_FIELDS.get(k, k.replace('_', ' '))}: {_decision_value(k, before.get(k))} → "
        f"{_decision_value(k, after.get(k))}"
        for k in keys
    ]


@register.filter
def decision_label(action: object) -> str:
    return {
        "acknowledge": "acknowledged",
        "dispute": "disputed",
        "exclude": "excluded from the team's bill",
        "include": "put back on the team's bill",
        "reassign_team": "reassigned to another team",
        "reassign_group": "reassigned to another job group",
    }.get(str(action), str(action).replace("_", " "))


@register.filter
def advice(flag: Any) -> str:
    """What to do about a finding (apps.waste.advice), with its job's own figures and currency."""
    currency = flag.job.currency if getattr(flag, "job_id", None) else ""
    return finding_advice(flag.kind, flag.evidence, currency=currency)
