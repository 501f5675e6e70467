"""The clusters' and the job groups' daily sums. Their days were built here with this release's refresh
(apps.rollups.services.day_sums_refresh), which a later release's tables no longer fit: the days are built by
telemetry 0013_day_sums_rebuild, the last migration, with the refresh of its own release."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('carbon', '0005_job_group_match_group_key'),
        ('fleet', '0007_cluster_prometheus_connection'),
        ('jobs', '0014_job_across_days_indexes'),
        ('rollups', '0003_team_day_cost_units'),
        ('telemetry', '0004_gpuhour_unobserved'),
    ]

    operations = [
        migrations.CreateModel(
            name='ClusterDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('energy_j', models.FloatField(default=0.0)),
                ('occupancy_s', models.FloatField(default=0.0)),
                ('facility_kwh', models.FloatField(default=0.0)),
                ('operational_kg', models.FloatField(default=0.0)),
                ('embodied_kg', models.FloatField(default=0.0)),
                ('cost', models.DecimalField(decimal_places=6, default=0, max_digits=18)),
                ('energy_by_method_j', models.JSONField(default=dict)),
                ('cost_units', models.BigIntegerField(blank=True, null=True)),
                ('units_exponent', models.SmallIntegerField(blank=True, null=True)),
                ('device_j', models.FloatField(default=0.0)),
                ('jobs_j', models.FloatField(default=0.0)),
                ('estimated_j', models.FloatField(default=0.0)),
                ('gpu_hours_total', models.IntegerField(default=0, help_text='GPU-hour rows: 0, no idle line that day.')),
                ('occupied_s', models.FloatField(default=0.0)),
                ('estimated_s', models.FloatField(default=0.0)),
                ('idle_facility_kwh', models.FloatField(default=0.0)),
                ('idle_operational_kg', models.FloatField(default=0.0)),
                ('idle_embodied_kg', models.FloatField(default=0.0)),
                ('idle_cost', models.DecimalField(decimal_places=6, default=0, max_digits=18)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='days', to='fleet.cluster')),
            ],
            options={
                'ordering': ['cluster_id', 'day'],
                'constraints': [models.UniqueConstraint(fields=('cluster', 'day'), name='clusterday_unique')],
            },
        ),
        migrations.CreateModel(
            name='JobGroupDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('energy_j', models.FloatField(default=0.0)),
                ('occupancy_s', models.FloatField(default=0.0)),
                ('facility_kwh', models.FloatField(default=0.0)),
                ('operational_kg', models.FloatField(default=0.0)),
                ('embodied_kg', models.FloatField(default=0.0)),
                ('cost', models.DecimalField(decimal_places=6, default=0, max_digits=18)),
                ('energy_by_method_j', models.JSONField(default=dict)),
                ('cost_units', models.BigIntegerField(blank=True, null=True)),
                ('units_exponent', models.SmallIntegerField(blank=True, null=True)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='job_group_days', to='fleet.cluster')),
                ('job_group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='days', to='carbon.jobgroup')),
            ],
            options={
                'ordering': ['job_group_id', 'day', 'cluster_id'],
                'constraints': [models.UniqueConstraint(fields=('job_group', 'cluster', 'day'), name='jobgroupday_unique')],
            },
        ),
        # (the days: telemetry 0013_day_sums_rebuild)
        migrations.RunSQL("ANALYZE rollups_clusterday; ANALYZE rollups_jobgroupday", migrations.RunSQL.noop),
    ]
