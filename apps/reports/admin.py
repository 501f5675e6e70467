from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import ReportRecipient, WeeklyReport
from .services import report_mark_sent_by_admin


@admin.register(ReportRecipient)
class ReportRecipientAdmin(admin.ModelAdmin):
    list_display = ["email", "team", "active", "created_at", "unsubscribed_at"]
    list_filter = ["active", "team"]
    search_fields = ["email", "team__name"]
    readonly_fields = ["token", "created_at", "unsubscribed_at"]


@admin.register(WeeklyReport)
class WeeklyReportAdmin(admin.ModelAdmin):
    """The archive. Read-only but for resolving a report in doubt (a send that never recorded its end)."""

    list_display = ["week_start", "team", "status", "sent_at", "claimed_at", "send_count", "subject"]
    list_filter = ["status", "team"]
    date_hierarchy = "week_start"
    actions = ["mark_sent"]
    readonly_fields = [f.name for f in WeeklyReport._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: WeeklyReport | None = None) -> bool:
        return False

    @admin.action(description="It went out (seen in the relay's log): mark the in-doubt reports as sent")
    def mark_sent(self, request: HttpRequest, queryset: QuerySet[WeeklyReport]) -> None:
        done = sum(report_mark_sent_by_admin(report=r) for r in queryset)
        self.message_user(request, f"{done} report(s) marked as sent.", messages.SUCCESS)
