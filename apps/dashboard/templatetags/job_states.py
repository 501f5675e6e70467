"""A job's scheduler state on the pages: its label, its meaning and the outcome it counts under, from the
one vocabulary (apps.jobs.states, with its OUTCOMES)."""

from __future__ import annotations

from django import template

from apps.jobs.states import OUTCOMES, JobState, exit_text

register = template.Library()

_OUTCOME_OF = {state.value: key for key, info in OUTCOMES.items() for state in info.states}


def _state(value: object) -> JobState:
    try:
        return JobState(str(value))
    except ValueError:
        return JobState.UNKNOWN


@register.filter
def state_label(value: object) -> str:
    """`timeout` -> "Timed out"."""
    return _state(value).label


@register.filter
def state_meaning(value: object) -> str:
    """`timeout` -> "Killed at the end of its time limit."."""
    return _state(value).info.meaning


@register.filter
def state_outcome(value: object) -> str:
    """The outcome a state counts under (completed, failed, cancelled, other): the CSS class of its label."""
    return _OUTCOME_OF.get(_state(value).value, "other")


@register.filter
def job_exit(job: object) -> str:
    """How the job ended, in words (apps.jobs.states.exit_text)."""
    return exit_text(str(getattr(job, "state", "")), getattr(job, "exit_code", None), getattr(job, "signal", None))
