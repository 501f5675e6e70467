from __future__ import annotations

from rest_framework import serializers

from apps.carbon.models import JobGroup
from apps.core.web.fields import NameField, TextField
from apps.core.web.serializers import PlannedRepresentationMixin
from apps.fleet.models import Cluster, Team
from apps.jobs.models import Job
from apps.waste.audit import REASON_MAX_CHARS
from apps.waste.models import AuditEntry, Flag


class FlagSerializer(PlannedRepresentationMixin, serializers.ModelSerializer):
    cluster: serializers.SlugRelatedField[Cluster] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    job: serializers.PrimaryKeyRelatedField[Job] = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="Job id, or null for a GPU-hour finding."
    )
    job_key = serializers.CharField(source="job.job_key", default=None, read_only=True, allow_null=True)
    team = serializers.CharField(source="job.team.name", default=None, read_only=True, allow_null=True)
    gpu_uuid = serializers.CharField(source="gpu.uuid", default=None, read_only=True, allow_null=True)
    evidence = serializers.JSONField(help_text="When, GPUs, memory (bytes), SM %, GPU-hours blocked, kWh, kg, cost.")

    class Meta:
        model = Flag
        fields = [
            "id", "kind", "status", "cluster", "job", "job_key", "team", "gpu_uuid", "hour", "evidence",
            "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class ReasonSerializer(serializers.Serializer):
    reason = TextField(
        lines=True, max_length=REASON_MAX_CHARS, help_text="Why: written to the audit log. Required.", allow_blank=False
    )


class ExcludeSerializer(ReasonSerializer):
    exclude = serializers.BooleanField(default=True, help_text="true: leave the team's bill; false: put it back.")
    flag = serializers.PrimaryKeyRelatedField(queryset=Flag.objects.all(), required=False, allow_null=True)


class ReassignSerializer(ReasonSerializer):
    team = NameField(slug_field="name", queryset=Team.objects.all(), required=False)
    job_group = NameField(slug_field="name", queryset=JobGroup.objects.all(), required=False)
    flag = serializers.PrimaryKeyRelatedField(queryset=Flag.objects.all(), required=False, allow_null=True)


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username")
    job_key = serializers.CharField(
        source="job.job_key", default=None, allow_null=True, help_text="Null for a decision on a GPU-hour's finding."
    )
    gpu_uuid = serializers.CharField(
        source="gpu.uuid", default=None, allow_null=True, help_text="The GPU of a GPU-hour's finding; else null."
    )

    class Meta:
        model = AuditEntry
        fields = [
            "id", "at", "actor", "action", "job", "job_key", "gpu_uuid", "hour", "flag_id", "flag_kind", "reason",
            "before", "after",
        ]  # fmt: skip
        read_only_fields = fields
