"""Writes to the fleet: the default cluster from settings, the team of jobs no rule matches."""

from __future__ import annotations

from django.conf import settings

from .models import Cluster, Team


def default_cluster_ensure() -> Cluster:
    """The cluster named by FLEETWATT_CLUSTER, pointing at FLEETWATT_PROMETHEUS_URL, created on first use."""
    cluster, _ = Cluster.objects.get_or_create(
        name=settings.FLEETWATT_CLUSTER,
        defaults={
            "prometheus_url": settings.FLEETWATT_PROMETHEUS_URL,
            "scrape_interval_s": settings.FLEETWATT_SCRAPE_INTERVAL_S,
        },
    )
    return cluster


def unassigned_team_ensure() -> Team:
    team, _ = Team.objects.get_or_create(name=Team.UNASSIGNED, defaults={"display_name": "Unassigned"})
    return team
