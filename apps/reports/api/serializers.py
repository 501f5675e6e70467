from __future__ import annotations

from rest_framework import serializers

from apps.fleet.models import Team
from apps.reports.models import WeeklyReport


class WeeklyReportSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="null: the fleet summary."
    )
    recipient_count = serializers.SerializerMethodField()
    # A plain string in the schema: an enum named "status" would collide with the flags' (drf-spectacular W001).
    status = serializers.CharField(
        read_only=True,
        help_text="pending; sending (in doubt if it stays: an admin resolves it); sent; failed (nothing went out, "
        "retried by the next run).",
    )

    class Meta:
        model = WeeklyReport
        fields = [
            "id", "team", "week_start", "time_zone", "status", "subject", "message_id", "recipient_count",
            "send_count", "claimed_at", "sent_at",
        ]  # fmt: skip
        read_only_fields = fields

    def get_recipient_count(self, obj: WeeklyReport) -> int:
        return len(obj.delivered)


class WeeklyReportDetailSerializer(WeeklyReportSerializer):
    # DRF's metaclass takes declared fields out of the class, so Serializer.data stays a property.
    data = serializers.JSONField(  # type: ignore[assignment]
        help_text="The report's numbers as sent: week, previous, changes, waste (GPU-hours, kWh, kg CO2e, money "
        "as a decimal string in `currency`), worst_jobs, days, intensity basis and sources."
    )

    class Meta(WeeklyReportSerializer.Meta):
        fields = [*WeeklyReportSerializer.Meta.fields, "error", "data", "text", "html"]
        read_only_fields = fields
