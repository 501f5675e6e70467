"""The daily sums of teams, clusters and job groups built again for every day there are hour rows of, with this
release's refresh (apps.rollups.services.day_sums_refresh), so that each day holds its energy's interval (rollups
0006) as the derivation fills it: one formula, not a copy of it here. Days whose hour rows are gone (past retention)
are kept as they are, their interval not known (empty).

The last migration, in this app, as 0010: an upgrade from before the partitioned tables migrates the other apps
first, and the refresh reads every app's tables as this release has them. It is the one place the days are built
from a migration (rollups 0004 no longer builds them): a later release that changes what the refresh reads or
writes replaces this step with its own."""

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
        ("telemetry", "0010_unseen_backfill"),
        ("rollups", "0006_day_sums_energy_band"),
        ("jobs", "0017_job_energy_band"),
        ("carbon", "0005_job_group_match_group_key"),
        ("fleet", "0008_cluster_dcgm_host_label"),
    ]

    operations = [
        migrations.RunPython(days_build, migrations.RunPython.noop),
        migrations.RunSQL("ANALYZE rollups_teamday; ANALYZE rollups_clusterday; ANALYZE rollups_jobgroupday",
                          migrations.RunSQL.noop),
    ]
