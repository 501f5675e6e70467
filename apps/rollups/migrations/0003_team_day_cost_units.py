"""The teams' daily sums of the rounded costs of their jobs within one day, filled in for the days there are (each
job's cost from its hour rows and its days past retention)."""

from django.db import migrations, models

from apps.core.units.aggregates import HALF_EVEN_QR, HALF_EVEN_UNITS
from apps.core.units.money import DEFAULT_EXPONENT, MINOR_EXPONENTS

UNITS_FILL = f"""
WITH costs AS (
    SELECT job_id, SUM(cost) AS cost FROM (
        SELECT job_id, cost FROM jobs_jobgpuhour UNION ALL SELECT job_id, cost FROM jobs_expiredjobday
    ) AS parts GROUP BY job_id
), single AS (
    SELECT j.team_id, j.cluster_id, j.first_day AS day, COALESCE(x.e, %s) AS e, (c.cost * 1000000)::bigint AS m,
           power(10, 6 - COALESCE(x.e, %s))::bigint AS d
    FROM jobs_job j JOIN costs c ON c.job_id = j.id
    LEFT JOIN unnest(%s::text[], %s::int[]) AS x(code, e) ON x.code = upper(trim(j.currency))
    WHERE NOT j.excluded_from_bill AND j.first_day = j.last_day
), floored AS (SELECT team_id, cluster_id, day, e, d, {HALF_EVEN_QR} FROM single)
UPDATE rollups_teamday t SET cost_units = u.units, units_exponent = u.e
FROM (
    SELECT team_id, cluster_id, day, SUM({HALF_EVEN_UNITS}) AS units,
           CASE WHEN min(e) = max(e) THEN min(e) ELSE -1 END AS e
    FROM floored GROUP BY team_id, cluster_id, day
) AS u
WHERE t.team_id = u.team_id AND t.cluster_id = u.cluster_id AND t.day = u.day
"""


def units_fill(apps, schema_editor):
    codes = sorted(MINOR_EXPONENTS)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("UPDATE rollups_teamday SET cost_units = 0, units_exponent = NULL")
        cursor.execute(
            UNITS_FILL, [DEFAULT_EXPONENT, DEFAULT_EXPONENT, codes, [MINOR_EXPONENTS[c] for c in codes]]
        )


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0013_job_days'),
        ('rollups', '0002_team_day_table'),
    ]

    operations = [
        migrations.AddField(
            model_name='teamday',
            name='cost_units',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='teamday',
            name='units_exponent',
            field=models.SmallIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(units_fill, migrations.RunPython.noop),
        migrations.RunSQL("ANALYZE rollups_teamday", migrations.RunSQL.noop),
    ]
