from django.contrib import admin

from .models import Cluster, Gpu, Node, Team, TeamMembership, TeamRule


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "prometheus_url",
        "selector",
        "scrape_interval_s",
        "scheduler",
        "scheduler_synced_through",
        "scheduler_status",
    )
    readonly_fields = ("scheduler_synced_through", "scheduler_status")


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "cluster")
    list_filter = ("cluster",)


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ("uuid", "node", "index", "model_name")
    list_filter = ("node__cluster", "model_name")
    search_fields = ("uuid", "node__hostname")


class TeamRuleInline(admin.TabularInline):
    model = TeamRule
    extra = 1


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "display_name")
    inlines = [TeamRuleInline, TeamMembershipInline]
