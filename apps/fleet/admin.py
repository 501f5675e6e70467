from typing import Any

from django import forms
from django.contrib import admin
from django.db import models

from .endpoint import CLUSTER_ENDPOINT_KEYS, CLUSTER_SCHEDULER_KEYS
from .models import Cluster, Gpu, Node, Team, TeamMembership, TeamRule
from .selectors import pod_label_rule_parse


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
    list_filter = ("scheduler",)
    readonly_fields = ("scheduler_synced_through", "scheduler_status")
    # A Prometheus or slurmrestd address typed without a scheme is plain http (Django 6 would make it https).
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    fieldsets = (
        (None, {"fields": ("name", "prometheus_url", "selector", "scrape_interval_s", "site", "source_retention_s")}),
        (
            "Connection to the endpoint (docs/config.md)",
            {
                "description": "Secrets are never stored here: give the NAME of the worker's environment variable "
                'that holds each (a header\'s value as "${NAME}"). Thanos and Mimir tenants: an X-Scope-OrgID header.',
                "fields": CLUSTER_ENDPOINT_KEYS,  # the config file's keys are the fields' names
            },
        ),
        (
            "Scheduler (docs/schedulers.md)",
            {
                "description": "Kubernetes (kube-state-metrics) is read from this cluster's Prometheus, with its "
                "selector: set only the scheduler, or tick kube_pods beside Slurm. The sacct and slurmrestd fields are "
                "for Slurm.",
                "fields": (*CLUSTER_SCHEDULER_KEYS, "scheduler_synced_through", "scheduler_status"),
            },
        ),
        (
            "Work counters (docs/config.md)",
            {
                "description": "The serving engines' token and request counters read each hour, and jobs' own work "
                "counters. Empty: the defaults (vLLM, TGI, SGLang, Triton, fleetwatt_job_work_units_total); []: none.",
                "fields": ("work_counters",),
            },
        ),
    )


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "cluster")
    list_filter = ("cluster",)


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ("uuid", "node", "index", "model_name")
    list_filter = ("node__cluster", "model_name")
    search_fields = ("uuid", "node__hostname")


class TeamRuleForm(forms.ModelForm):
    """A rule, its value checked where its kind gives it a form (a pod label rule's `name=value`)."""

    class Meta:
        model = TeamRule
        fields = ("kind", "value", "cluster", "priority")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind, value = cleaned.get("kind"), cleaned.get("value")
        if kind == TeamRule.Kind.K8S_POD_LABEL and value and pod_label_rule_parse(value) is None:
            self.add_error("value", "A pod label rule's value is name=value, e.g. team=search.")
        return cleaned


class TeamRuleInline(admin.TabularInline):
    model = TeamRule
    form = TeamRuleForm
    extra = 1


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 1


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "display_name")
    inlines = [TeamRuleInline, TeamMembershipInline]
