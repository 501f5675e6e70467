"""The ingest's record in the admin: which hours are stored, and which of them only fleetwatt still holds."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import ClusterShard, IngestBatch, IngestedHour, IngestWatermark


@admin.register(IngestedHour)
class IngestedHourAdmin(admin.ModelAdmin):
    list_display = ("cluster", "hour", "ingested_at", "query_count", "duration_s", "only_copy")
    list_filter = ("cluster",)
    date_hierarchy = "hour"
    ordering = ("-hour", "cluster__name")

    @admin.display(boolean=True, description="only copy")
    def only_copy(self, obj: IngestedHour) -> bool | None:
        """Past the source's retention: Prometheus has dropped it, the rows here are all that is left."""
        retention_s = obj.cluster.source_retention_s
        if retention_s is None:
            return None
        return obj.hour < timezone.now() - timedelta(seconds=retention_s)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[IngestedHour]:
        return super().get_queryset(request).select_related("cluster")


@admin.register(IngestWatermark)
class IngestWatermarkAdmin(admin.ModelAdmin):
    list_display = ("cluster", "ingested_through", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ClusterShard)
class ClusterShardAdmin(admin.ModelAdmin):
    """A big cluster's node groups (docs/operations.md, "Sharding a big cluster"): the nodes no pattern names
    are fetched as one more group."""

    list_display = ("cluster", "name", "node_pattern")
    list_filter = ("cluster",)


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    """The fanned-out ingest's batches: open ones, and why one is waiting (its last part's error)."""

    list_display = ("cluster", "start", "end", "queued_at", "derive_queued_at", "done_at", "error")
    list_filter = ("cluster",)
    ordering = ("-queued_at",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
