"""Indexes of the jobs across days per cluster and per job group."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('carbon', '0005_job_group_match_group_key'),
        ('fleet', '0007_cluster_prometheus_connection'),
        ('jobs', '0013_job_days'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('across_days', True)), fields=['cluster', 'last_day'], include=('first_day',), name='job_cluster_across_days'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('across_days', True)), fields=['job_group', 'last_day'], include=('first_day',), name='job_group_across_days'),
        ),
    ]
