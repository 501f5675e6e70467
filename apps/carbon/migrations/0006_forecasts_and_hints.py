"""Forecasts of grid intensity, kept apart from the measured IntensityHour, and the when-to-run hints of record."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('carbon', '0005_job_group_match_group_key'),
        ('fleet', '0008_cluster_dcgm_host_label'),
    ]

    operations = [
        migrations.CreateModel(
            name='ForecastHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('zone', models.CharField(max_length=50)),
                ('basis', models.CharField(choices=[('location', 'Location-based'), ('market', 'Market-based'), ('marginal', 'Marginal')], max_length=10)),
                ('hour', models.DateTimeField()),
                ('kg_per_kwh', models.FloatField()),
                ('source', models.CharField(max_length=200)),
                ('issued_at', models.DateTimeField(blank=True, help_text='When the forecast was made, where known.', null=True)),
                ('imported_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['zone', 'basis', 'hour'],
                'constraints': [models.UniqueConstraint(fields=('zone', 'basis', 'hour'), name='forecast_unique_hour')],
            },
        ),
        migrations.CreateModel(
            name='WhenToRunHint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('zone', models.CharField(max_length=50)),
                ('basis', models.CharField(choices=[('location', 'Location-based'), ('market', 'Market-based'), ('marginal', 'Marginal')], max_length=10)),
                ('made_at', models.DateTimeField(help_text='The UTC hour the hint looks forward from (its now).')),
                ('deadline_h', models.PositiveIntegerField(help_text='FLEETWATT_SHIFT_DEADLINE_H when it was made.')),
                ('runs', models.PositiveIntegerField(help_text='How many recent runs its typical run is from.')),
                ('run_kwh', models.JSONField(help_text="The typical run's facility kWh in each hour from its start.")),
                ('forecast_kind', models.CharField(choices=[('imported', 'Imported forecast'), ('profile', 'Profile of recent weeks')], max_length=10)),
                ('forecast_source', models.CharField(max_length=300)),
                ('forecast', models.JSONField(help_text='kg/kWh of each hour from made_at to the deadline, as forecast (null: unknown).')),
                ('best_start', models.DateTimeField()),
                ('now_kg', models.FloatField(help_text='kg CO2e of the typical run started at made_at, by the forecast.')),
                ('best_kg', models.FloatField(help_text='kg CO2e of the typical run started at best_start, by the forecast.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('job_group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='when_to_run_hints', to='carbon.jobgroup')),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='when_to_run_hints', to='fleet.team')),
            ],
            options={
                'ordering': ['-made_at', 'team_id', 'job_group_id', 'zone'],
                'indexes': [models.Index(fields=['team', 'made_at'], name='when_hint_team_made')],
                'constraints': [models.UniqueConstraint(fields=('team', 'job_group', 'zone', 'basis', 'made_at'), name='when_hint_unique_hour')],
            },
        ),
    ]
