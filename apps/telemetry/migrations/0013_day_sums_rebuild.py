"""The daily sums of teams, clusters, job groups and GPUs built again for every day there are hour rows of, with
this release's refresh (apps.rollups.services.day_sums_refresh), so that each GPU has its days (rollups 0007, what
the GPU list reads) as the derivation fills them: one formula, not a copy of it here. Days whose hour rows are gone
(past retention) are kept as they are.

The last migration, in this app, as 0011 was before it: an upgrade from before the partitioned tables migrates the
other apps first, and the refresh reads every app's tables as this release has them. It is the one place the days
are built from a migration: a later release that changes what the refresh reads or writes replaces this step with
its own (and this one with nothing, as 0011 is now)."""

from django.db import migrations

DAYS = """
SELECT n.cluster_id, (h.hour AT TIME ZONE 'UTC')::date AS day
FROM jobs_jobgpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id JOIN fleet_node n ON n.id = g.node_id
UNION
SELECT n.cluster_id, (h.hour AT TIME ZONE 'UTC')::date
FROM telemetry_gpuhour h JOIN fleet_gpu g ON g.id = h.gpu_id JOIN fleet_node n ON n.id = g.node_id
"""


def days_build(apps, schema_editor):
    from apps.rollups.services import day_sums_refresh

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(DAYS)
        pairs = cursor.fetchall()
    for cluster_id in sorted({c for c, _ in pairs}):
        day_sums_refresh(cluster_ids=[cluster_id], days={d for c, d in pairs if c == cluster_id})


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0012_gpuhour_power_limit_and_sm_clock"),
        ("rollups", "0007_gpuday"),
        ("jobs", "0019_job_team_indexes"),
        ("carbon", "0006_forecasts_and_hints"),
        ("fleet", "0009_cluster_work_counters"),
    ]

    operations = [
        migrations.RunPython(days_build, migrations.RunPython.noop),
        migrations.RunSQL(
            "ANALYZE rollups_teamday; ANALYZE rollups_clusterday; ANALYZE rollups_jobgroupday; ANALYZE rollups_gpuday",
            migrations.RunSQL.noop,
        ),
    ]
