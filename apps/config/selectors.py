"""Reads for the fleet config: what a file may refer to without defining it."""

from __future__ import annotations

from django.conf import settings

from apps.carbon.models import ServerType, Site
from apps.fleet.models import Cluster, Team

from .types import KnownNames


def known_names_read() -> KnownNames:
    """What a config may refer to without defining it."""
    return KnownNames(
        sites=frozenset(Site.objects.values_list("name", flat=True)),
        server_types=frozenset(ServerType.objects.values_list("name", flat=True)),
        clusters=frozenset(Cluster.objects.values_list("name", flat=True)),
        teams=frozenset(Team.objects.values_list("name", flat=True)),
        default_cluster=settings.FLEETWATT_CLUSTER,
    )
