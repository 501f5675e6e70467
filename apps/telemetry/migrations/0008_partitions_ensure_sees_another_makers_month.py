"""fleetwatt_hour_partitions_ensure, again: its check under the lock looks in pg_class rather than through
to_regclass.

Two workers ingesting the first hours of a new month both found the month's partition missing, and the second,
once the first had made it and let the lock go, still did: to_regclass answers from the backend's catalog cache,
which had kept "no such table" from the check before the lock (taking an advisory lock does not refresh it), so
it created the table again and its hour failed ("relation ... already exists"). A query on pg_class takes a new
snapshot and sees the other maker's commit.
"""

from django.db import migrations

TABLES = ("telemetry_gpuhour", "jobs_jobgpuhour", "jobs_jobgpuhourenergy")
TABLE_LIST = ", ".join(f"'{t}'" for t in TABLES)

ENSURE = """
CREATE OR REPLACE FUNCTION fleetwatt_hour_partitions_ensure(first_month date, last_month date)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  t text;
  m date;
  part text;
  lo text;
  hi text;
  made integer := 0;
BEGIN
  IF last_month < first_month OR last_month - first_month > 3700 THEN
    RAISE EXCEPTION 'fleetwatt_hour_partitions_ensure: %% to %% (at most ten years at once)', first_month, last_month;
  END IF;
  FOREACH t IN ARRAY ARRAY[%(tables)s] LOOP
    m := date_trunc('month', first_month)::date;
    WHILE m <= last_month LOOP
      part := t || '_p' || to_char(m, 'YYYYMM');
      IF to_regclass(part) IS NULL THEN
        -- One maker at a time; it checks again once it holds the lock, in pg_class itself (a new snapshot):
        -- to_regclass would answer from this backend's catalog cache, which the lock does not refresh.
        PERFORM pg_advisory_xact_lock(1718026244);
        IF NOT EXISTS (SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace) THEN
          lo := to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00';
          hi := to_char((m + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00';
          EXECUTE format('CREATE TABLE %%I (LIKE %%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, t);
          -- Rows the default partition took for this month move into it first (ATTACH refuses otherwise).
          EXECUTE format('WITH moved AS (DELETE FROM %%I WHERE hour >= %%L AND hour < %%L RETURNING *) '
                         'INSERT INTO %%I SELECT * FROM moved', t || '_default', lo, hi, part);
          EXECUTE format('ALTER TABLE %%I ATTACH PARTITION %%I FOR VALUES FROM (%%L) TO (%%L)', t, part, lo, hi);
          made := made + 1;
        END IF;
      END IF;
      m := (m + interval '1 month')::date;
    END LOOP;
  END LOOP;
  RETURN made;
END
$fn$
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0007_ingestbatch_aimed_through")]

    # CREATE OR REPLACE keeps the function's owner and grants (apps/core/access/database_roles.py). Going back leaves this
    # body: the one before it had the race.
    operations = [migrations.RunSQL([ENSURE % {"tables": TABLE_LIST}], reverse_sql=migrations.RunSQL.noop)]
