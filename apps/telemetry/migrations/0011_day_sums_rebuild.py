"""The daily sums were built again here for every day there are hour rows of, with the refresh of this release. The
refresh of a later release writes tables this one's database does not have yet (rollups 0007's GPUs' days), so the
days are built by the last migration, telemetry 0013_day_sums_rebuild, with that release's refresh: one formula,
not a copy of it here."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0010_unseen_backfill"),
        ("rollups", "0006_day_sums_energy_band"),
        ("jobs", "0017_job_energy_band"),
        ("carbon", "0005_job_group_match_group_key"),
        ("fleet", "0008_cluster_dcgm_host_label"),
    ]

    operations = []
