"""An admin's decisions (apps.waste.audit), each with what follows from it derived in the same
transaction: a job moved to another team or out of its bill changes the teams' daily sums; a job moved
to another group may change its carbon-shift hint; a finding acknowledged or disputed changes its team's waste."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.fleet.models import Team
from apps.jobs.models import Job
from apps.waste import audit
from apps.waste.models import AuditEntry, Flag
from apps.waste.selectors import rule_matches
from apps.waste.triage import BulkRule, selection_digest

from .derive import Fact, Scope, derive


def flag_review(*, actor: User, flag: Flag, action: str, reason: str) -> AuditEntry:
    """Acknowledge or dispute a finding: its job's team's waste follows (an acknowledged finding no longer counts)."""
    with transaction.atomic():
        entry = audit.flag_review(actor=actor, flag=flag, action=action, reason=reason)
        if flag.job_id is not None:
            derive(Scope.jobs([flag.job_id]), changed={Fact.FINDING_STATUS})
    return entry


def flags_review_by_rule(*, actor: User, rule: BulkRule, action: str, reason: str, selection: str) -> list[AuditEntry]:
    """Acknowledge or dispute the open findings `rule` takes, each logged as one decision, in one transaction; only
    if they are still the findings the admin's preview counted (`selection`, their digest): else AuditError, and
    nothing is written. None left to take (decided already): nothing is written, and no error."""
    with transaction.atomic():
        taken = rule_matches(rule=rule)
        if taken and selection_digest(taken) != selection:
            raise audit.AuditError(
                f"The findings this rule takes changed since the preview ({len(taken)} now): look at them again "
                "before deciding."
            )
        entries = audit.flags_review(actor=actor, flag_ids=taken.keys(), action=action, reason=reason)
        decided = {entry.job_id for entry in entries if entry.job_id is not None}
        if decided:
            derive(Scope.jobs(decided), changed={Fact.FINDING_STATUS})
        return entries


def job_exclude(*, actor: User, job: Job, exclude: bool, reason: str, flag: Flag | None = None) -> AuditEntry:
    with transaction.atomic():
        entry = audit.job_exclude(actor=actor, job=job, exclude=exclude, reason=reason, flag=flag)
        derive(Scope.jobs([job.pk]), changed={Fact.BILLING})
    return entry


def job_reassign(
    *, actor: User, job: Job, reason: str, team: Team | None = None, job_group: JobGroup | None = None,
    flag: Flag | None = None,
) -> AuditEntry:  # fmt: skip
    with transaction.atomic():
        entry = audit.job_reassign(actor=actor, job=job, reason=reason, team=team, job_group=job_group, flag=flag)
        derive(Scope.jobs([job.pk]), changed={Fact.BILLING if team is not None else Fact.JOB_GROUP})
    return entry
