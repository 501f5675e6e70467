"""The unseen part of the idle line of the GPU-hours stored before it had columns of its own, and its daily sums:
computed here from what those rows hold, as apps.carbon.services.footprints_refresh computes it, so that no
stored hour reads an unseen part of 0 (a silent zero). Within an hour a footprint is linear in its energy and
its GPU-hours, so the unseen part is the idle line's scaled by the unseen energy (facility energy, operational
CO2e) and the unseen GPU-hours (embodied CO2e), and its cost the GPU model's rate x the unseen GPU-hours plus the
idle line's energy cost scaled by the unseen energy. One pass over the hour rows that have unseen time."""

from django.db import migrations

GPU_HOURS = """
WITH parts AS (
    SELECT h.id, h.hour,
           GREATEST(0, h.device_energy_j - h.jobs_energy_j - h.estimated_j) AS idle_j,
           GREATEST(0, 3600 - h.occupied_s - h.estimated_s) AS idle_s,
           LEAST(GREATEST(0, h.unobserved_j - h.estimated_j),
                 GREATEST(0, h.device_energy_j - h.jobs_energy_j - h.estimated_j)) AS unseen_j,
           LEAST(GREATEST(0, h.unobserved_s - h.estimated_s), GREATEST(0, 3600 - h.occupied_s - h.estimated_s)) AS unseen_s,
           COALESCE(m.hourly_rate, 0) AS rate
    FROM telemetry_gpuhour h
    JOIN fleet_gpu g ON g.id = h.gpu_id
    LEFT JOIN carbon_gpumodel m ON m.name = g.model_name
    WHERE h.unobserved_j > h.estimated_j OR h.unobserved_s > h.estimated_s
)
UPDATE telemetry_gpuhour h SET
    unseen_j = p.unseen_j,
    unseen_s = p.unseen_s,
    unseen_facility_kwh = CASE WHEN p.idle_j > 0 THEN h.idle_facility_kwh * p.unseen_j / p.idle_j ELSE 0 END,
    unseen_operational_kg = CASE WHEN p.idle_j > 0 THEN h.idle_operational_kg * p.unseen_j / p.idle_j
                                 WHEN h.idle_operational_kg IS NULL THEN NULL ELSE 0 END,
    unseen_embodied_kg = CASE WHEN p.idle_s > 0 THEN h.idle_embodied_kg * p.unseen_s / p.idle_s ELSE 0 END,
    unseen_cost = ROUND(
        (p.unseen_s / 3600.0)::numeric * p.rate
        + CASE WHEN p.idle_j > 0
               THEN (h.idle_cost - (p.idle_s / 3600.0)::numeric * p.rate) * (p.unseen_j / p.idle_j)::numeric
               ELSE 0 END,
        6)
FROM parts p
WHERE h.id = p.id AND h.hour = p.hour
"""

CLUSTER_DAYS = """
UPDATE rollups_clusterday d SET
    unseen_j = s.unseen_j, unseen_s = s.unseen_s, unseen_facility_kwh = s.unseen_facility_kwh,
    unseen_operational_kg = s.unseen_operational_kg, unseen_embodied_kg = s.unseen_embodied_kg,
    unseen_cost = s.unseen_cost
FROM (
    SELECT n.cluster_id, (h.hour AT TIME ZONE 'UTC')::date AS day,
           SUM(h.unseen_j::numeric)::float8 AS unseen_j, SUM(h.unseen_s::numeric)::float8 AS unseen_s,
           SUM(h.unseen_facility_kwh::numeric)::float8 AS unseen_facility_kwh,
           COALESCE(SUM(h.unseen_operational_kg::numeric), 0)::float8 AS unseen_operational_kg,
           SUM(h.unseen_embodied_kg::numeric)::float8 AS unseen_embodied_kg, SUM(h.unseen_cost) AS unseen_cost
    FROM telemetry_gpuhour h
    JOIN fleet_gpu g ON g.id = h.gpu_id
    JOIN fleet_node n ON n.id = g.node_id
    WHERE h.unseen_j > 0 OR h.unseen_s > 0
    GROUP BY n.cluster_id, day
) AS s
WHERE d.cluster_id = s.cluster_id AND d.day = s.day
"""


class Migration(migrations.Migration):
    # In this app, after the partitioned tables (0006) and the columns (0009): an upgrade from before them runs the
    # other apps' migrations first and this app's last (tests/telemetry/test_partition_migration.py).
    dependencies = [
        ("telemetry", "0009_gpuhour_unseen"),
        ("rollups", "0005_clusterday_unseen"),
        ("carbon", "0005_job_group_match_group_key"),
        ("fleet", "0008_cluster_dcgm_host_label"),
    ]

    operations = [
        migrations.RunSQL(GPU_HOURS, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(CLUSTER_DAYS, reverse_sql=migrations.RunSQL.noop),
    ]
