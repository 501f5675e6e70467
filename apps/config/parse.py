"""The fleet config file (docs/config.md): parse and validate a whole YAML document into typed dataclasses.

Pure: no database. Every problem is collected with its path (`sites[0].pue_by_month.13: not a month`),
so one run lists them all, and nothing is returned unless there are none. References to objects that
are not in the file are checked against the names the caller read from the database (`KnownNames`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from apps.fleet.endpoint import CLUSTER_ENDPOINT_KEYS, CLUSTER_SCHEDULER_KEYS

from .fields import Fields, Problems, mapping_read, names_in, section_read, unique_names_check, value_kind
from .sections import (
    SITE_KEYS,
    cluster_parse,
    currencies_check,
    gpu_model_parse,
    job_group_parse,
    server_type_parse,
    site_parse,
    sso_parse,
    team_parse,
)
from .types import FORMAT_VERSION, ConfigError, FleetConfig, KnownNames

_SECTIONS = ("sites", "server_types", "gpu_models", "clusters", "teams", "job_groups")


# --- YAML ------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would keep the last silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: SafeLoader reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


CONFIG_MAX_BYTES = 2 * 1024 * 1024  # a fleet of 100,000 nodes' hostname rules fits in a few hundred KB
CONFIG_MAX_NODES = 200_000  # YAML nodes once anchors are expanded (a few aliases can stand for billions)


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes the document has once every alias is expanded (aliases share node objects)."""
    if id(node) in sizes:
        return sizes[id(node)]
    sizes[id(node)] = 1  # a cycle counts once instead of recursing forever
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    sizes[id(node)] = size
    return size


def config_load(
    text: str, *, known: KnownNames | None = None, max_bytes: int = CONFIG_MAX_BYTES, max_nodes: int = CONFIG_MAX_NODES
) -> FleetConfig:
    """Parse YAML text and validate it as a whole. Raises ConfigError listing every problem; refuses, before
    building it, a text over `max_bytes` or a document that anchors expand past `max_nodes` nodes."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ConfigError([f"(document): {size:,} bytes; a config is at most {max_bytes:,}"])
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and (nodes := _expanded_size(node, {})) > max_nodes:
            raise ConfigError(
                [f"(document): {nodes:,} YAML nodes once its anchors are expanded; at most {max_nodes:,}"]
            )
        document = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(document)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: not valid YAML: {problem}"]) from None
    finally:
        loader.dispose()
    return config_parse(document, known=known)


def config_parse(document: Any, *, known: KnownNames | None = None) -> FleetConfig:
    """Validate a loaded YAML document as a whole. Raises ConfigError listing every problem."""
    known = known or KnownNames()
    problems = Problems()
    if document is None:
        raise ConfigError(["(document): the file is empty"])
    if not isinstance(document, dict):
        raise ConfigError([f"(document): expected a mapping with {', '.join(_SECTIONS)}, got {value_kind(document)}"])
    top = Fields(document, "", problems, ("version", *_SECTIONS, "sso"))
    if top.has("version") and document["version"] != FORMAT_VERSION:
        problems.add("version", f"this fleetwatt reads version {FORMAT_VERSION}, got {document['version']!r}")

    raw = {name: section_read(document, name, problems) for name in _SECTIONS}
    for name in _SECTIONS:
        unique_names_check(raw[name], problems)
    site_names = names_in(raw["sites"])
    type_names = names_in(raw["server_types"])
    cluster_names = names_in(raw["clusters"])

    def each(name: str, allowed: Sequence[str], build: Callable[[Fields], Any]) -> tuple[Any, ...]:
        out = []
        for path, element in raw[name]:
            f = mapping_read(element, path, problems, allowed)
            if f is not None and (item := build(f)) is not None:
                out.append(item)
        return tuple(out)

    rule_seen: dict[tuple[str | None, str, str], str] = {}
    config = FleetConfig(
        sites=each("sites", SITE_KEYS, site_parse),
        server_types=each(
            "server_types",
            (
                "name",
                "node_overhead_factor",
                "embodied_kg_per_server",
                "service_life_h",
                "service_life_years",
                "gpus_per_server",
            ),
            server_type_parse,
        ),
        gpu_models=each("gpu_models", ("name", "hourly_rate", "currency", "tdp_w"), gpu_model_parse),
        clusters=each(
            "clusters",
            (
                "name",
                "prometheus_url",
                "selector",
                "scrape_interval_s",
                "dcgm_host_label",
                "site",
                "nodes",
                *CLUSTER_SCHEDULER_KEYS,
                *CLUSTER_ENDPOINT_KEYS,
                "shards",
                "work_counters",
            ),
            lambda f: cluster_parse(f, known=known, sites=site_names, server_types=type_names, problems=problems),
        ),
        teams=each(
            "teams",
            ("name", "display_name", "rules"),
            lambda f: team_parse(f, clusters=cluster_names, known=known, problems=problems, rule_seen=rule_seen),
        ),
        job_groups=each("job_groups", ("name", "match_kind", "match_value", "flexible"), job_group_parse),
        sso=None
        if document.get("sso") is None
        else sso_parse(document["sso"], teams=names_in(raw["teams"]), known=known, problems=problems),
    )
    currencies_check(raw["sites"], raw["gpu_models"], problems)
    if problems.items:
        raise ConfigError(sorted(problems.items, key=_document_order))
    return config


def _document_order(problem: str) -> tuple[int, int]:
    """Problems of one object together, in the file's order (the sort is stable within an object)."""
    m = re.match(r"(\w+)\[(\d+)\]", problem)
    if m and m.group(1) in _SECTIONS:
        return (_SECTIONS.index(m.group(1)) + 1, int(m.group(2)))
    return (0, 0)
