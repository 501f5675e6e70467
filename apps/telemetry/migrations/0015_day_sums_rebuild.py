"""The daily sums of teams, clusters, job groups and GPUs built again for every day there are hour rows of, with
what this release adds to them (rollups 0009): each job's days and each team's lines of its jobs within a day (what a
team's page and its job list read), and each GPU's hours of the day (the fleet page's heatmap), with this release's
refresh (apps.rollups.services.day_sums_refresh): one formula, not a copy of it here. Days whose hour rows are gone
(past retention) are kept as they are, and have no job days (their costs are ExpiredJobDay's).

The last migration of the days, in this app, as 0013 was before it (and for its reason: an upgrade from before the
partitioned tables migrates the other apps first, and the refresh reads every app's tables as this release has them):
a later release that changes what the refresh reads or writes replaces this step with its own (and this one with
nothing, as 0013 is now)."""

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
        ("telemetry", "0014_team_waste_days_build"),
        ("rollups", "0009_page_day_sums"),
        ("jobs", "0021_job_page_indexes"),
    ]

    operations = [
        migrations.RunPython(days_build, migrations.RunPython.noop),
        migrations.RunSQL(
            "ANALYZE rollups_teamday; ANALYZE rollups_clusterday; ANALYZE rollups_jobgroupday; ANALYZE rollups_gpuday; "
            "ANALYZE rollups_jobday; ANALYZE rollups_teamlineday",
            migrations.RunSQL.noop,
        ),
    ]
