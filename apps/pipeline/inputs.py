"""Changes of the inputs that footprints are made from (the fleet config, grid intensity, the admin's
edits of sites, server types, GPU models and job groups): each written by its service, then derived
from in the same transaction, so a failure leaves the database as it was."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

from django.db import models, transaction

from apps.carbon import services as carbon
from apps.carbon.intensity import IntensityRow
from apps.carbon.models import IntensityHour
from apps.carbon.selectors import clusters_affected
from apps.config.services import ApplyReport, config_write
from apps.config.types import FleetConfig

from .derive import DeriveReport, Fact, Scope, derive


def _footprints_derive(
    *, cluster_ids: Iterable[int], regroup: bool = False, window: tuple[datetime, datetime] | None = None
) -> DeriveReport | None:
    clusters = frozenset(cluster_ids)
    if not clusters and not regroup:
        return None
    start, end = window if window else (None, None)
    changed = {Fact.FACTORS} | ({Fact.GROUP_RULES} if regroup else set())
    return derive(Scope(cluster_ids=clusters, start=start, end=end), changed=changed)


def config_apply(*, config: FleetConfig, dry_run: bool = False) -> ApplyReport:
    """Apply the fleet config (apps.config.services.config_write) and type the nodes of the clusters it gives
    hostname rules, then regroup jobs if job groups changed and recompute the footprints of the clusters whose
    inputs changed. A dry run reports the same, derives nothing and rolls it all back."""
    with transaction.atomic():
        report = config_write(config=config)
        report.dry_run = dry_run
        for cluster_id in report.typed_cluster_ids:
            nodes = carbon.node_server_types_apply(cluster_id=cluster_id)
            report.nodes.updated += nodes.updated
            report.nodes.unchanged += nodes.unchanged
            report.nodes.unmatched += nodes.unmatched
            if nodes.updated:
                report.affected_cluster_ids = sorted({*report.affected_cluster_ids, cluster_id})
        if dry_run:
            transaction.set_rollback(True)
            return report
        derived = _footprints_derive(cluster_ids=report.affected_cluster_ids, regroup=bool(report.changed_group_ids))
        if derived is not None:
            report.affected_cluster_ids = sorted(set(report.affected_cluster_ids) | derived.cluster_ids)
            if report.changed_group_ids:
                report.jobs_regrouped = derived.regrouped
            if "row_footprints" in derived.steps and derived.cluster_ids:
                report.gpu_hours_refreshed = derived.gpu_hours
    return report


def intensity_import(
    *, rows: Sequence[IntensityRow], zone: str, source: str, basis: str, allow_unknown_zone: bool = False
) -> carbon.ImportReport:
    """Store hourly intensity (apps.carbon.services.intensity_write), then recompute the footprints it
    reaches. Raises IntensityError, having written nothing, for bad rows."""
    with transaction.atomic():
        report = carbon.intensity_write(
            rows=rows, zone=zone, source=source, basis=basis, allow_unknown_zone=allow_unknown_zone
        )
        derived = _footprints_derive(cluster_ids=report.refreshed_cluster_ids, window=report.refresh_window)
        if derived is not None:
            report.gpu_hours_refreshed = derived.gpu_hours
    return report


def intensity_delete(*, hours: models.QuerySet[IntensityHour]) -> int:
    """Delete stored intensity hours (the admin's delete) and recompute the footprints they reached."""
    with transaction.atomic():
        deleted, reaches = carbon.intensity_delete(hours=hours)
        for reach in reaches:
            _footprints_derive(cluster_ids=reach.cluster_ids, window=reach.window)
    return deleted


def server_type_rules_changed(*, cluster_id: int) -> int | None:
    """After a cluster's hostname rules were edited (the admin): re-type its nodes from the stored rules and
    recompute its footprints if a node changed. Returns the GPU-hours recomputed (None: none)."""
    with transaction.atomic():
        if carbon.node_server_types_apply(cluster_id=cluster_id).updated == 0:
            return None
        derived = _footprints_derive(cluster_ids=[cluster_id])
    return derived.gpu_hours if derived else None


def footprint_inputs_changed(
    *,
    site_ids: Collection[int] = (),
    server_type_ids: Collection[int] = (),
    gpu_model_names: Collection[str] = (),
    job_group_ids: Collection[int] = (),
    cluster_ids: Collection[int] = (),
    regroup: bool = False,
) -> int | None:
    """After an edit outside the config file (the admin): regroup jobs if job groups changed (or `regroup`,
    after groups were deleted), and recompute the footprints of the clusters these inputs reach, plus
    `cluster_ids`. Returns the GPU-hours recomputed (None: nothing to recompute)."""
    with transaction.atomic():
        affected = set(cluster_ids) | clusters_affected(
            site_ids=site_ids,
            server_type_ids=server_type_ids,
            gpu_model_names=gpu_model_names,
            job_group_ids=job_group_ids,
        )
        derived = _footprints_derive(cluster_ids=affected, regroup=bool(job_group_ids) or regroup)
    if derived is None or "row_footprints" not in derived.steps or not derived.cluster_ids:
        return None
    return derived.gpu_hours


def footprints_recompute(
    *, cluster_ids: Iterable[int] | None = None, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Recompute every footprint of the clusters (default: all) in [start, end) and what follows from them
    (job sums, findings, teams' daily sums): after a change made outside the services, such as rows loaded
    by hand. Returns the GPU-hours recomputed."""
    with transaction.atomic():
        scope = Scope(cluster_ids=None if cluster_ids is None else frozenset(cluster_ids), start=start, end=end)
        return derive(scope, changed={Fact.FACTORS}).gpu_hours
