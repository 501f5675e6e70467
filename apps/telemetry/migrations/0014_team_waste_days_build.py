"""Each team's waste per UTC day (rollups 0008, what team rollups of whole days read) built for every day its jobs
with counted findings ran, with this release's refresh (apps.rollups.services.team_waste_days_refresh): one formula,
not a copy of it here. In this app, after 0013, for the reason 0013 gives (an upgrade from before the partitioned
tables migrates the other apps first; the refresh reads every app's tables as this release has them): a later release
that changes what the refresh reads or writes replaces this step with its own (and this one with nothing)."""

from datetime import timedelta

from django.db import migrations

SPANS = """
SELECT j.team_id, min(j.first_day), max(j.last_day)
FROM waste_flag f JOIN jobs_job j ON j.id = f.job_id
WHERE j.team_id IS NOT NULL AND j.first_day IS NOT NULL AND j.last_day IS NOT NULL
GROUP BY j.team_id
"""


def waste_days_build(apps, schema_editor):
    from apps.rollups.services import team_waste_days_refresh

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(SPANS)
        spans = cursor.fetchall()
    for team_id, first, last in spans:
        days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
        team_waste_days_refresh(team_ids=[team_id], days=days)


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0013_day_sums_rebuild"),
        ("rollups", "0008_team_waste_day"),
        ("waste", "0009_audit_flag_at"),
        ("jobs", "0020_job_group_team_last_day_index"),
    ]

    operations = [migrations.RunPython(waste_days_build, migrations.RunPython.noop)]
