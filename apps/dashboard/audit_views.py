"""The admins' audit queue and the actions taken from it (thin: the decisions live in apps.waste.audit)."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html_join
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST, require_safe

from apps.carbon.models import JobGroup
from apps.core.access.policy import acting_user, admin_required
from apps.core.web.params import whole_number
from apps.core.web.query import QueryError, amount_param, bad_query_is_400, currency_param, filters_checked, text_param
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job
from apps.pipeline import decisions
from apps.waste import audit
from apps.waste.audit import REASON_MAX_CHARS
from apps.waste.filtersets import FlagFilterSet
from apps.waste.kinds import KIND_CHOICES, STATUS_CHOICES, FlagKind
from apps.waste.models import Flag
from apps.waste.selectors import (
    QueueTriage,
    latest_decisions,
    queue_order,
    queue_rows,
    queue_triage,
    recent_decisions,
    rule_matches,
)
from apps.waste.triage import (
    PAGE_SIZE,
    QUEUE_ORDER_CHOICES,
    REVIEW_CHOICES,
    RULE_KIND_CHOICES,
    RULE_KINDS,
    RULE_SAMPLE,
    BulkRule,
    QueueOrder,
    Review,
    selection_digest,
)

from .page_cache import kept_page
from .selectors import gpu_hour_flag_jobs
from .views import page_period, period_of

RECENT_DECISIONS = 20  # the "Recently decided" table


@require_safe
@bad_query_is_400
@admin_required
@kept_page
def queue(request: HttpRequest) -> HttpResponse:
    """Findings on jobs and on GPU-hours (a counter reset, a sum that does not add up), open ones by default;
    `?status=` (empty) for any status. Above them, per kind, the open findings and the money at stake in the period;
    the list by money at stake (`?order=oldest`: oldest first), 50 a page (`?page=`). A GPU-hour finding lists the
    jobs that ran in it; it is acknowledged or disputed as it is (the log names its GPU and hour), and a job of it is
    decided on from the job's page. The queries do not grow with the findings: a page's rows are read by their ids."""
    params = request.GET.copy()
    params.setdefault("status", Flag.Status.OPEN)
    filterset = FlagFilterSet(params, queryset=Flag.objects.all())
    filters_checked(filterset)
    order = _order(request)
    start, end = page_period(request)
    # The waste the findings filtered by kind, team, cluster and age count in the period, as the team page, the
    # weekly report and the team's rollup count it: open and disputed findings of jobs on the bill, each clipped
    # to the period, a shared GPU-hour once. The status filter picks what is listed, not what counts (the queue
    # lists open findings by default; a disputed one is still waste), so a team's line is its page's figure.
    unfiltered_status = params.copy()
    unfiltered_status.pop("status")
    triage = queue_triage(flags=FlagFilterSet(unfiltered_status, queryset=Flag.objects.all()).qs, start=start, end=end)
    stake = triage.stake()
    paginator = Paginator(queue_order(flags=filterset.qs, stake=stake, order=order), PAGE_SIZE)
    page = paginator.page(_page_number(request, paginator.num_pages))
    listed = queue_rows(ids=list(page.object_list))
    jobs_in_hour = gpu_hour_flag_jobs(listed)
    decided = latest_decisions(flag_ids=[f.pk for f in listed])
    for flag in listed:
        flag.hour_jobs = jobs_in_hour.get(flag.pk, [])  # type: ignore[attr-defined]
        flag.stake = stake.get(flag.pk)  # type: ignore[attr-defined]
        flag.decision = decided.get(flag.pk)  # type: ignore[attr-defined]
    waste = triage.waste
    teams = list(Team.objects.order_by("name"))
    unpaged = request.GET.copy()
    unpaged.pop("page", None)
    unkinded = unpaged.copy()
    unkinded.pop("kind", None)
    context = {
        "start": start.date(),
        "end": end.date(),
        "triage": triage,
        "kinds_total": {
            "open": sum(k.open for k in triage.kinds),
            "disputed": sum(k.disputed for k in triage.kinds),
        },
        "waste_counted": {
            "findings": len(waste.per_flag),
            "gpu_hours_blocked": waste.total.gpu_hours,
            "facility_kwh": waste.total.facility_kwh,
            "co2e_kg": waste.total.co2e_kg,
            "cost": waste.total.cost,
            "currency": triage.currency,
        },
        "filter": filterset,
        "flags": listed,
        "page": page,
        "unpaged_query": unpaged.urlencode(),  # the pager's links keep the filters
        "unkinded_query": unkinded.urlencode(),  # the summary's links filter on their kind
        "order": order,
        "orders": QUEUE_ORDER_CHOICES,
        "recent": recent_decisions(limit=RECENT_DECISIONS),
        "rule": _rule_defaults(request, triage),
        "rule_kinds": RULE_KIND_CHOICES,
        "reviews": REVIEW_CHOICES,
        "teams": teams,
        "clusters": Cluster.objects.order_by("name"),
        # Each row's choices of team and job group, written once for the page's 50 forms.
        "team_options": _options(teams),
        "group_options": _options(JobGroup.objects.order_by("name")),
        "kinds": KIND_CHOICES,
        "statuses": STATUS_CHOICES,
    }
    return render(request, "dashboard/audit_queue.html", context)


def _options(choices: Iterable[Team | JobGroup]) -> SafeString:
    """`<option>`s of teams or job groups, by name, as the template's loop wrote them (escaped)."""
    return format_html_join("", '<option value="{}">{}</option>', ((c.name, str(c)) for c in choices))


def _order(request: HttpRequest) -> QueueOrder:
    raw = text_param(request.GET, "order") or QueueOrder.MONEY
    try:
        return QueueOrder(raw)
    except ValueError:
        raise QueryError("order", "money (money at stake, largest first) or oldest (oldest first).") from None


def _page_number(request: HttpRequest, pages: int) -> int:
    raw = text_param(request.GET, "page")
    return whole_number(raw, name="page", low=1, high=pages) if raw else 1


def _rule_defaults(request: HttpRequest, triage: QueueTriage) -> dict[str, str | list[str]]:
    """The bulk rule's form as the queue opens it: the kind filtered if it can be a rule's, else the kind with the
    most open findings that can; the currencies of the findings counted."""
    kind = text_param(request.GET, "kind")
    if kind not in RULE_KINDS:
        kind = next((k.kind.value for k in sorted(triage.kinds, key=lambda k: -k.open) if k.kind in RULE_KINDS), "")
    return {"kind": kind, "currencies": triage.currency.split(",") if triage.currency else []}


@require_POST
@bad_query_is_400
@admin_required
def bulk(request: HttpRequest) -> HttpResponse:
    """A decision by a rule ("acknowledge every failed run under 1 EUR in this period"), with one reason: sent
    without `confirm`, the preview (how many findings it takes, and which); confirmed, each of them decided and logged
    as one decision, in one transaction, if they are still those the preview counted. Input the rule cannot read
    (a kind without money at stake, an amount that is not one, no reason): the 400 page, nothing written."""
    rule, action, reason = _bulk_form(request)
    if text_param(request.POST, "confirm") != "yes":
        return _bulk_preview(request, rule, action, reason)
    try:
        entries = decisions.flags_review_by_rule(
            actor=acting_user(request.user), rule=rule, action=action, reason=reason,
            selection=text_param(request.POST, "selection", max_length=64),
        )  # fmt: skip
    except audit.AuditError as exc:
        return _bulk_preview(request, rule, action, reason, error=str(exc))
    if entries:
        n = len(entries)
        messages.success(request, f"{n} finding{pluralize(n)} {action.done}: {rule.words}.")
    else:
        messages.info(request, f"No open finding is left that this rule takes ({rule.words}): nothing was decided.")
    back = {"kind": rule.kind.value, "start": f"{rule.start:%Y-%m-%d}", "end": f"{rule.end:%Y-%m-%d}"}
    return HttpResponseRedirect(f"{reverse('dashboard:audit')}?{urlencode(back)}")


def _bulk_form(request: HttpRequest) -> tuple[BulkRule, Review, str]:
    """The rule, its decision and its reason, as the form sends them; QueryError naming what is wrong."""
    values = request.POST
    kind = text_param(values, "kind")
    if kind not in RULE_KINDS:
        named = ", ".join(k.label for k in RULE_KINDS)
        raise QueryError("kind", f"a kind of finding with money at stake: {named}.")
    try:
        action = Review(text_param(values, "action"))
    except ValueError:
        raise QueryError("action", "acknowledge or dispute.") from None
    reason = _reason(request).strip()
    if not reason:
        raise QueryError("reason", "a reason is required: it is written to the audit log beside each decision.")
    start, end = period_of(values)
    rule = BulkRule(
        kind=FlagKind(kind), under=amount_param(values, "under"), currency=currency_param(values, "currency"),
        start=start, end=end,
    )  # fmt: skip
    return rule, action, reason


def _bulk_preview(request: HttpRequest, rule: BulkRule, action: Review, reason: str, error: str = "") -> HttpResponse:
    taken = rule_matches(rule=rule)
    ids = sorted(taken, key=lambda pk: (-taken[pk], pk))
    sample = queue_rows(ids=ids[:RULE_SAMPLE])
    for flag in sample:
        flag.stake = taken[flag.pk]  # type: ignore[attr-defined]
    context = {
        "rule": rule,
        "action": action,
        "reason": reason,
        "count": len(taken),
        "total": sum(taken.values(), Decimal(0)),
        "sample": sample,
        "selection": selection_digest(taken),
        "error": error,
        "back": f"{reverse('dashboard:audit')}?"
        + urlencode({"kind": rule.kind.value, "start": f"{rule.start:%Y-%m-%d}", "end": f"{rule.end:%Y-%m-%d}"}),
    }
    return render(request, "dashboard/audit_bulk.html", context, status=409 if error else 200)


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
