"""Admin for the carbon and cost inputs. The same objects come from the fleet config (apply_config); an edit
here recomputes the footprints it reaches, as an apply would. Intensity is imported, not typed in."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from apps.pipeline import inputs

from .models import (
    ForecastHour,
    GpuModel,
    IntensityHour,
    JobGroup,
    ServerType,
    ServerTypeRule,
    Site,
    WhenToRunHint,
)
from .selectors import clusters_affected


def _recomputed(modeladmin: admin.ModelAdmin, request: HttpRequest, gpu_hours: int | None) -> None:
    if gpu_hours is not None:
        modeladmin.message_user(request, f"Footprints recomputed: {gpu_hours} GPU-hours.", messages.INFO)


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "grid_zone",
        "intensity_basis",
        "pue",
        "provider_includes_overhead",
        "electricity_price_per_kwh",
        "currency",
        "timezone",
        "cluster_count",
    )
    list_filter = ("intensity_basis", "provider_includes_overhead", "grid_zone")
    search_fields = ("name", "grid_zone")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Site]:
        return super().get_queryset(request).annotate(cluster_count=Count("clusters"))

    @admin.display(description="clusters", ordering="cluster_count")
    def cluster_count(self, site: Any) -> int:
        return site.cluster_count

    def save_model(self, request: HttpRequest, obj: Site, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and set(form.changed_data) - {"name", "timezone"}:
            _recomputed(self, request, inputs.footprint_inputs_changed(site_ids=[obj.pk]))


@admin.register(ServerType)
class ServerTypeAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "overhead_shown",
        "embodied_kg_per_server",
        "service_life_h",
        "gpus_per_server",
        "node_count",
    )
    search_fields = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ServerType]:
        return super().get_queryset(request).annotate(node_count=Count("nodes"))

    @admin.display(description="node overhead factor", ordering="node_overhead_factor")
    def overhead_shown(self, server_type: ServerType) -> str:
        if server_type.node_overhead_factor is None:
            return "not measured (1.0 used)"
        return f"{server_type.node_overhead_factor:g}"

    @admin.display(description="nodes", ordering="node_count")
    def node_count(self, server_type: Any) -> int:
        return server_type.node_count

    def save_model(self, request: HttpRequest, obj: ServerType, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and set(form.changed_data) - {"name"}:
            _recomputed(self, request, inputs.footprint_inputs_changed(server_type_ids=[obj.pk]))


@admin.register(ServerTypeRule)
class ServerTypeRuleAdmin(admin.ModelAdmin):
    """A cluster's hostname globs -> server type; the ingest applies them to nodes as they appear."""

    list_display = ("cluster", "hostname_glob", "server_type", "priority")
    list_filter = ("cluster", "server_type")
    search_fields = ("hostname_glob",)
    list_select_related = ("cluster", "server_type")

    def save_model(self, request: HttpRequest, obj: ServerTypeRule, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.changed_data:
            _recomputed(self, request, inputs.server_type_rules_changed(cluster_id=obj.cluster_id))

    def delete_model(self, request: HttpRequest, obj: ServerTypeRule) -> None:
        super().delete_model(request, obj)  # nodes keep the type it gave them, unless another rule matches
        _recomputed(self, request, inputs.server_type_rules_changed(cluster_id=obj.cluster_id))


@admin.register(GpuModel)
class GpuModelAdmin(admin.ModelAdmin):
    list_display = ("name", "hourly_rate", "currency", "tdp_w")
    search_fields = ("name",)

    def save_model(self, request: HttpRequest, obj: GpuModel, form: Any, change: bool) -> None:
        old_name = form.initial.get("name") if change else None
        super().save_model(request, obj, form, change)
        if form.changed_data:
            names = {obj.name} | ({old_name} if old_name else set())
            _recomputed(self, request, inputs.footprint_inputs_changed(gpu_model_names=names))

    def delete_model(self, request: HttpRequest, obj: GpuModel) -> None:
        super().delete_model(request, obj)
        _recomputed(self, request, inputs.footprint_inputs_changed(gpu_model_names=[obj.name]))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[GpuModel]) -> None:
        names = list(queryset.values_list("name", flat=True))
        super().delete_queryset(request, queryset)
        _recomputed(self, request, inputs.footprint_inputs_changed(gpu_model_names=names))


@admin.register(IntensityHour)
class IntensityHourAdmin(admin.ModelAdmin):
    """Read-mostly: figures come from import_intensity; a wrong import can be deleted here."""

    list_display = ("hour", "zone", "basis", "kg_per_kwh", "source", "imported_at")
    list_filter = ("zone", "basis", "source")
    date_hierarchy = "hour"
    list_per_page = 168  # a week
    show_full_result_count = False  # years of hours: no COUNT(*) over the whole table on every page

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: IntensityHour | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: IntensityHour) -> None:
        inputs.intensity_delete(hours=IntensityHour.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[IntensityHour]) -> None:
        inputs.intensity_delete(hours=queryset)


@admin.register(JobGroup)
class JobGroupAdmin(admin.ModelAdmin):
    list_display = ("name", "match_kind", "match_value", "flexible", "job_count")
    list_filter = ("match_kind", "flexible")
    search_fields = ("name", "match_value")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobGroup]:
        return super().get_queryset(request).annotate(job_count=Count("jobs"))

    @admin.display(description="jobs", ordering="job_count")
    def job_count(self, group: Any) -> int:
        return group.job_count

    def save_model(self, request: HttpRequest, obj: JobGroup, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.changed_data:
            _recomputed(self, request, inputs.footprint_inputs_changed(job_group_ids=[obj.pk]))

    def delete_model(self, request: HttpRequest, obj: JobGroup) -> None:
        clusters = clusters_affected(job_group_ids=[obj.pk])
        super().delete_model(request, obj)  # its jobs lose their group (SET_NULL)
        _recomputed(self, request, inputs.footprint_inputs_changed(cluster_ids=clusters, regroup=True))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[JobGroup]) -> None:
        clusters = clusters_affected(job_group_ids=list(queryset.values_list("pk", flat=True)))
        super().delete_queryset(request, queryset)
        _recomputed(self, request, inputs.footprint_inputs_changed(cluster_ids=clusters, regroup=True))


@admin.register(ForecastHour)
class ForecastHourAdmin(admin.ModelAdmin):
    """Read-mostly: forecasts come from import_forecast; a wrong one can be deleted here (it enters no footprint)."""

    list_display = ("hour", "zone", "basis", "kg_per_kwh", "source", "issued_at", "imported_at")
    list_filter = ("zone", "basis", "source")
    date_hierarchy = "hour"
    list_per_page = 168
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ForecastHour | None = None) -> bool:
        return False


@admin.register(WhenToRunHint)
class WhenToRunHintAdmin(admin.ModelAdmin):
    """Read-only: the hints beat keeps each hour (apps.carbon.when_services.hints_record)."""

    list_display = ("made_at", "team", "job_group", "zone", "best_start", "now_kg", "best_kg", "forecast_kind")
    list_filter = ("forecast_kind", "zone", "job_group")
    list_select_related = ("team", "job_group")
    date_hierarchy = "made_at"
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: WhenToRunHint | None = None) -> bool:
        return False
