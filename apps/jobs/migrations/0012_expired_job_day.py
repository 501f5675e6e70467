"""Each job's cost per cluster and day of the days whose hour rows are dropped past retention."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0007_cluster_prometheus_connection'),
        ('jobs', '0011_job_billed_team'),
    ]

    operations = [
        migrations.CreateModel(
            name='ExpiredJobDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('cost', models.DecimalField(decimal_places=6, max_digits=18)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='expired_job_days', to='fleet.cluster')),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='expired_days', to='jobs.job')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('job', 'cluster', 'day'), name='expiredjobday_unique')],
                'indexes': [models.Index(fields=['day'], name='expiredjobday_day')],
            },
        ),
    ]
