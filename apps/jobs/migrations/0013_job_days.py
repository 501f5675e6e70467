"""Each job's first and last UTC day of its hour rows (and of its days past retention), filled in for the jobs
there are, and whether they differ (a stored column: what the planner has statistics of)."""

from django.db import migrations, models

DAYS_FILL = """
UPDATE jobs_job j SET first_day = d.first_day, last_day = d.last_day
FROM (
    SELECT job_id, min(day) AS first_day, max(day) AS last_day FROM (
        SELECT job_id, (min(hour) AT TIME ZONE 'UTC')::date AS day FROM jobs_jobgpuhour GROUP BY job_id
        UNION ALL
        SELECT job_id, (max(hour) AT TIME ZONE 'UTC')::date FROM jobs_jobgpuhour GROUP BY job_id
        UNION ALL
        SELECT job_id, day FROM jobs_expiredjobday
    ) AS days GROUP BY job_id
) AS d
WHERE d.job_id = j.id
"""


class Migration(migrations.Migration):

    dependencies = [
        ('carbon', '0005_job_group_match_group_key'),
        ('fleet', '0007_cluster_prometheus_connection'),
        ('jobs', '0012_expired_job_day'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='first_day',
            field=models.DateField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='last_day',
            field=models.DateField(blank=True, null=True),
        ),
        migrations.RunSQL(DAYS_FILL, migrations.RunSQL.noop),
        migrations.AddField(
            model_name='job',
            name='across_days',
            field=models.GeneratedField(db_persist=True, expression=models.ExpressionWrapper(models.Q(('first_day__lt', models.F('last_day'))), models.BooleanField()), output_field=models.BooleanField()),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('across_days', True), ('excluded_from_bill', False)), fields=['team', 'last_day'], include=('first_day',), name='job_billed_team_across_days'),
        ),
        migrations.RunSQL("ANALYZE jobs_job", migrations.RunSQL.noop),
    ]
