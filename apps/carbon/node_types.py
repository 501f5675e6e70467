"""A node's server type, from its cluster's hostname rules (docs/config.md, `nodes`): the first glob that matches
its hostname. Pure: apps.carbon.services.node_server_types_apply applies the stored rules to a cluster's nodes."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class NodeMatch:
    """Nodes of a cluster whose hostname matches the glob `match` are servers of type `server_type`."""

    match: str
    server_type: str


@dataclass
class NodeTypesReport:
    """What node_server_types_apply did on one cluster."""

    updated: int = 0
    unchanged: int = 0
    unmatched: int = 0  # nodes no pattern matches: their server type is left as it is


def server_type_for_hostname(hostname: str, patterns: Iterable[NodeMatch]) -> str | None:
    """The server type of the first pattern whose glob matches the hostname (case-sensitive), or None."""
    for pattern in patterns:
        if fnmatch.fnmatchcase(hostname, pattern.match):
            return pattern.server_type
    return None
