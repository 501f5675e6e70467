"""Admin decisions on findings and jobs. Each writes its change and exactly one audit entry, in one
transaction, and needs a reason (a rule's decisions on many findings: one entry each, all in one transaction).
What a decision changes downstream (teams' daily sums, a job's footprint) is derived by apps.pipeline.decisions,
which callers use."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from apps.carbon.models import JobGroup
from apps.core.kept import data_changed
from apps.fleet.models import Team
from apps.jobs.models import Job

from .models import AuditEntry, Flag

REASON_MAX_CHARS = 5000  # a decision's reason, as the pages and the API take it


class AuditError(ValueError):
    """The decision cannot be taken as asked; nothing was written."""


def _require(actor: User, reason: str) -> str:
    if not getattr(actor, "is_staff", False):
        raise PermissionError("Only admins act on findings and jobs.")
    reason = (reason or "").strip()
    if not reason:
        raise AuditError("A reason is required.")
    return reason


def _billable(job: Job) -> None:
    """A job's team or bill can change only while its hour rows are all there: the teams' daily sums are
    recomputed from them."""
    if job.rows_expired:
        raise AuditError(
            f"Job {job.job_key}'s hour rows are past retention: its team's daily sums cannot be recomputed, so its "
            "team and bill stay as they are."
        )


def _cited(flag: Flag | None, job: Job) -> None:
    """A decision on a job may cite a finding of that job, and no other: the log must not tie a job's
    decision to another job's evidence."""
    if flag is not None and flag.job_id != job.pk:
        raise AuditError(f"Finding {flag.pk} is not on job {job.job_key}: cite one of the job's own findings.")


def _job_state(job: Job) -> dict[str, Any]:
    return {
        "team": job.team.name,
        "job_group": job.job_group.name if job.job_group else None,
        "excluded_from_bill": job.excluded_from_bill,
    }


def _entry(*, actor: User, action: str, job: Job | None, reason: str, before: dict, after: dict,
           flag: Flag | None = None, announce: bool = True) -> AuditEntry:  # fmt: skip
    """The log's line. A decision on a GPU-hour's finding (no job) names the GPU and the hour instead. `announce`:
    False where the caller says once that the data changed, for many lines (a rule's decisions)."""
    on_gpu_hour = job is None and flag is not None
    if announce:
        data_changed()  # the audit log shows it, and the lists what the decision changed
    return AuditEntry.objects.create(
        actor=actor, action=action, job=job, reason=reason, before=before, after=after,
        flag_id=flag.pk if flag else None, flag_kind=flag.kind if flag else "",
        gpu_id=flag.gpu_id if on_gpu_hour and flag else None, hour=flag.hour if on_gpu_hour and flag else None,
    )  # fmt: skip


_REVIEWED: dict[str, str] = {
    AuditEntry.Action.ACKNOWLEDGE: Flag.Status.ACKNOWLEDGED,
    AuditEntry.Action.DISPUTE: Flag.Status.DISPUTED,
}


def _review_checked(action: str) -> str:
    if action not in _REVIEWED:
        raise AuditError(f"Unknown review {action!r}: acknowledge or dispute.")
    return action


def _reviewed(*, actor: User, flag: Flag, action: str, reason: str, announce: bool = True) -> AuditEntry:
    """The finding (locked by the caller) given the status of `action`, and the decision's line in the log."""
    if flag.job is None and (flag.gpu_id is None or flag.hour is None):
        raise AuditError(f"Finding {flag.pk} names neither a job nor a GPU-hour.")
    before = {"status": flag.status}
    flag.status = _REVIEWED[action]
    flag.save(update_fields=["status", "updated_at"])
    return _entry(actor=actor, action=action, job=flag.job, reason=reason, before=before,
                  after={"status": flag.status}, flag=flag, announce=announce)  # fmt: skip


@transaction.atomic
def flag_review(*, actor: User, flag: Flag, action: str, reason: str) -> AuditEntry:
    """Acknowledge (expected, e.g. a debugging session, a known driver reset) or dispute (the attribution, or
    the meter, looks wrong). A finding on a GPU-hour is decided on as it is: the log names its GPU and hour."""
    reason = _require(actor, reason)
    action = _review_checked(action)
    flag = Flag.objects.select_for_update(of=("self",)).get(pk=flag.pk)
    return _reviewed(actor=actor, flag=flag, action=action, reason=reason)


@transaction.atomic
def flags_review(*, actor: User, flag_ids: Collection[int], action: str, reason: str) -> list[AuditEntry]:
    """Acknowledge or dispute many open findings with one reason (an admin's rule, from the audit queue), in one
    transaction: each decided as flag_review decides one, with its own line in the log. A finding no longer open
    once its lock is taken (decided meanwhile, or by an earlier submit of the same rule) is left as it is, so the
    same rule sent twice decides nothing the second time."""
    reason = _require(actor, reason)
    action = _review_checked(action)
    # Locked in the order of their ids, as any other caller locking several would: two rules overlapping wait, never
    # deadlock. Still open is read after the lock: Postgres checks the row again once the other transaction ends.
    flags = (
        Flag.objects.select_for_update(of=("self",))
        .select_related("job")
        .filter(pk__in=list(flag_ids), status=Flag.Status.OPEN)
        .order_by("pk")
    )
    entries = [_reviewed(actor=actor, flag=flag, action=action, reason=reason, announce=False) for flag in flags]
    if entries:
        data_changed()  # once for them all
    return entries


@transaction.atomic
def job_exclude(*, actor: User, job: Job, exclude: bool, reason: str, flag: Flag | None = None) -> AuditEntry:
    """Leave the job out of its team's bill (it stays in the fleet's totals), or put it back."""
    reason = _require(actor, reason)
    _cited(flag, job)
    job = Job.objects.select_for_update(of=("self",)).select_related("team", "job_group").get(pk=job.pk)
    _billable(job)
    if job.excluded_from_bill == exclude:
        raise AuditError("The job is already " + ("excluded." if exclude else "on its team's bill."))
    before = _job_state(job)
    job.excluded_from_bill = exclude
    job.save(update_fields=["excluded_from_bill"])
    action = AuditEntry.Action.EXCLUDE if exclude else AuditEntry.Action.INCLUDE
    return _entry(actor=actor, action=action, job=job, reason=reason, before=before, after=_job_state(job), flag=flag)


@transaction.atomic
def job_reassign(
    *, actor: User, job: Job, reason: str, team: Team | None = None, job_group: JobGroup | None = None,
    flag: Flag | None = None,
) -> AuditEntry:  # fmt: skip
    """Charge the job to another team, or count it in another job group; later ingests keep it."""
    reason = _require(actor, reason)
    if (team is None) == (job_group is None):
        raise AuditError("Reassign to a team or to a job group (one of them).")
    _cited(flag, job)
    job = Job.objects.select_for_update(of=("self",)).select_related("team", "job_group").get(pk=job.pk)
    if team is not None:
        _billable(job)
    before = _job_state(job)
    if team is not None:
        if team.pk == job.team_id:
            raise AuditError(f"The job is already charged to {team.name}.")
        job.team, job.team_locked = team, True
        job.save(update_fields=["team", "team_locked"])
        action = AuditEntry.Action.REASSIGN_TEAM
    else:
        job.job_group, job.group_locked = job_group, True
        job.save(update_fields=["job_group", "group_locked"])
        action = AuditEntry.Action.REASSIGN_GROUP
    return _entry(actor=actor, action=action, job=job, reason=reason, before=before, after=_job_state(job), flag=flag)
