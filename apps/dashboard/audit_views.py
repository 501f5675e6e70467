"""The admins' audit queue and the actions taken from it (thin: the decisions live in apps.waste.audit)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from apps.carbon.models import JobGroup
from apps.core.access import acting_user, admin_required
from apps.core.query import bad_query_is_400, filters_checked, text_param
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job
from apps.pipeline import decisions
from apps.waste import audit
from apps.waste.audit import REASON_MAX_CHARS
from apps.waste.filtersets import FlagFilterSet
from apps.waste.kinds import KIND_CHOICES, STATUS_CHOICES
from apps.waste.models import Flag
from apps.waste.selectors import counted_flags, period_waste

from .selectors import gpu_hour_flag_jobs
from .views import page_period

QUEUE_LISTED = 500


@require_safe
@bad_query_is_400
@admin_required
def queue(request: HttpRequest) -> HttpResponse:
    """Findings on jobs and on GPU-hours (a counter reset, a sum that does not add up), open ones by default;
    `?status=` (empty) for any status. A GPU-hour finding lists the jobs that ran in it; it is acknowledged or
    disputed as it is (the log names its GPU and hour), and a job of it is decided on from the job's page."""
    params = request.GET.copy()
    params.setdefault("status", Flag.Status.OPEN)
    flags = Flag.objects.select_related("job__team", "cluster", "gpu__node").order_by("created_at", "id")
    filterset = FlagFilterSet(params, queryset=flags)
    filters_checked(filterset)
    start, end = page_period(request)
    listed = list(filterset.qs[:QUEUE_LISTED])
    jobs_in_hour = gpu_hour_flag_jobs(listed)
    # The waste the findings filtered by kind, team, cluster and age count in the period, as the team page, the
    # weekly report and the team's rollup count it: open and disputed findings of jobs on the bill, each clipped
    # to the period, a shared GPU-hour once. The status filter picks what is listed, not what counts (the queue
    # lists open findings by default; a disputed one is still waste), so a team's line is its page's figure.
    unfiltered_status = params.copy()
    unfiltered_status.pop("status")
    unlisted = FlagFilterSet(unfiltered_status, queryset=flags)
    counted = counted_flags(unlisted.qs)
    waste = period_waste(flags=counted, start=start, end=end)
    for flag in listed:
        flag.hour_jobs = jobs_in_hour.get(flag.pk, [])
        flag.worth = waste.per_flag.get(flag.pk)
    context = {
        "start": start.date(),
        "end": end.date(),
        "waste_counted": {
            "findings": len(waste.per_flag),
            "gpu_hours_blocked": waste.total.gpu_hours,
            "facility_kwh": waste.total.facility_kwh,
            "co2e_kg": waste.total.co2e_kg,
            "cost": waste.total.cost,
            "currency": ",".join(sorted(set(counted.values_list("job__currency", flat=True).distinct().order_by()))),
        },
        "filter": filterset,
        "flags": listed,
        "listed": QUEUE_LISTED,
        "teams": Team.objects.order_by("name"),
        "clusters": Cluster.objects.order_by("name"),
        "groups": JobGroup.objects.order_by("name"),
        "kinds": KIND_CHOICES,
        "statuses": STATUS_CHOICES,
    }
    return render(request, "dashboard/audit_queue.html", context)


def _decide(request: HttpRequest, job: Job, flag: Flag | None) -> None:
    """One decision from a page: acknowledge, dispute (findings), exclude, include, reassign."""
    action, reason = text_param(request.POST, "action"), _reason(request)
    actor = acting_user(request.user)
    try:
        if action in ("acknowledge", "dispute"):
            if flag is None:
                raise audit.AuditError("Acknowledge and dispute apply to a finding.")
            decisions.flag_review(actor=actor, flag=flag, action=action, reason=reason)
        elif action in ("exclude", "include"):
            decisions.job_exclude(actor=actor, job=job, exclude=action == "exclude", reason=reason, flag=flag)
        elif action == "reassign_team":
            # A form's mistake (no team chosen, a name since removed) is the form's error, not a 404.
            team = Team.objects.filter(name=text_param(request.POST, "team")).first()
            if team is None:
                raise audit.AuditError("Choose the team to reassign the job to.")
            decisions.job_reassign(actor=actor, job=job, team=team, reason=reason, flag=flag)
        elif action == "reassign_group":
            group = JobGroup.objects.filter(name=text_param(request.POST, "job_group")).first()
            if group is None:
                raise audit.AuditError("Choose the job group to reassign the job to.")
            decisions.job_reassign(actor=actor, job=job, job_group=group, reason=reason, flag=flag)
        else:
            raise audit.AuditError(f"Unknown action {action!r}.")
    except audit.AuditError as exc:
        messages.error(request, f"{job.job_key}: {exc}")
    else:
        messages.success(request, f"{job.job_key}: {action.replace('_', ' ')} recorded.")


def _reason(request: HttpRequest) -> str:
    """The decision's reason, as written to the audit log: lines of text."""
    return text_param(request.POST, "reason", max_length=REASON_MAX_CHARS, lines=True)


def _back(request: HttpRequest, default: str) -> str:
    """The page the form came from (`next`), if it is a page of this site; `default` otherwise."""
    target = text_param(request.POST, "next", max_length=2000)
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def _review_gpu_hour(request: HttpRequest, flag: Flag) -> None:
    """A decision on a GPU-hour's finding: acknowledge or dispute it (there is no job to exclude or move)."""
    action, reason = text_param(request.POST, "action"), _reason(request)
    subject = f"GPU {flag.gpu.node.hostname}/{flag.gpu.index} at {flag.hour:%Y-%m-%d %H}:00" if flag.gpu else "GPU-hour"
    try:
        if action not in ("acknowledge", "dispute"):
            raise audit.AuditError("A GPU-hour's finding is acknowledged or disputed; decide on a job from its page.")
        decisions.flag_review(actor=acting_user(request.user), flag=flag, action=action, reason=reason)
    except audit.AuditError as exc:
        messages.error(request, f"{subject}: {exc}")
    else:
        messages.success(request, f"{subject}: {action} recorded.")


@require_POST
@bad_query_is_400
@admin_required
def act(request: HttpRequest, flag_id: int) -> HttpResponse:
    """A decision on a finding, from the queue: on its job, or on its GPU-hour."""
    flag = get_object_or_404(Flag.objects.select_related("job", "gpu__node"), pk=flag_id)
    if flag.job is None:
        _review_gpu_hour(request, flag)
    else:
        _decide(request, flag.job, flag)
    return HttpResponseRedirect(_back(request, reverse("dashboard:audit")))


@require_POST
@bad_query_is_400
@admin_required
def act_on_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """A decision on a job, from its page."""
    job = get_object_or_404(Job, pk=job_id)
    _decide(request, job, None)
    return HttpResponseRedirect(reverse("dashboard:job", args=[job.pk]))
