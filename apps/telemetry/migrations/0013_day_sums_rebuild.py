"""The daily sums were built again here for every day there are hour rows of, with the refresh of this release. The
refresh of a later release writes a table this one's database does not have yet (rollups 0009's jobs' days), so the
days are built by the last migration, telemetry 0015_day_sums_rebuild, with that release's refresh: one formula,
not a copy of it here."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0012_gpuhour_power_limit_and_sm_clock"),
        ("rollups", "0007_gpuday"),
        ("jobs", "0019_job_team_indexes"),
        ("carbon", "0006_forecasts_and_hints"),
        ("fleet", "0009_cluster_work_counters"),
    ]

    operations = []
