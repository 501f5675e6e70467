"""The per-hour tables partitioned by month (Postgres declarative partitioning): GPU-hours, job-GPU-hours and
their energy by method. Each table becomes a parent partitioned by range of `hour`, with one partition per
UTC month (`<table>_pYYYYMM`) and a default one for rows outside them; its primary key is (id, hour), its
unique constraints, indexes and foreign keys are those it had. Existing rows are copied over once.

Two functions, owned by the migrating role and run with its rights (SECURITY DEFINER), so that the app's own
role, which owns nothing, may create months ahead but only the owner may drop them:

- fleetwatt_hour_partitions_ensure(first, last): the monthly partitions of [first, last], moving any rows the
  default partition holds for a new month into it; returns how many it made. Beat calls it for the months
  ahead, the ingest for an hour's own month.
- fleetwatt_hour_partitions_drop_before(horizon): drops the months that end on or before `horizon` (and such
  rows of the default partition); returns how many partitions it dropped. `manage.py hour_rows_expire`.
"""

from django.db import migrations

TABLES = ("telemetry_gpuhour", "jobs_jobgpuhour", "jobs_jobgpuhourenergy")

CONVERT = """
DO $convert$
DECLARE
  t text;
  defs text[];
  def text;
  first_month date;
  m date;
BEGIN
  FOREACH t IN ARRAY ARRAY[%(tables)s] LOOP
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass(t)) = 'p' THEN
      CONTINUE;  -- already partitioned
    END IF;
    EXECUTE format('ALTER TABLE %%I RENAME TO %%I', t, t || '_unpartitioned');
    -- What the table had, to make again on the parent once the old table is gone (their names are the same).
    SELECT array_agg(format('ALTER TABLE %%I ADD CONSTRAINT %%I %%s', t, conname, pg_get_constraintdef(oid))
                     ORDER BY contype, conname)
      INTO defs FROM pg_constraint
     WHERE conrelid = to_regclass(t || '_unpartitioned') AND contype IN ('u', 'f', 'c');
    SELECT defs || array_agg(replace(pg_get_indexdef(i.indexrelid),
                                     ' ON public.' || t || '_unpartitioned ', ' ON public.' || t || ' ')
                             ORDER BY c.relname)
      INTO defs
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = to_regclass(t || '_unpartitioned')
       AND NOT i.indisprimary
       AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid);
    EXECUTE format('CREATE TABLE %%I (LIKE %%I INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE) '
                   'PARTITION BY RANGE (hour)', t, t || '_unpartitioned');
    EXECUTE format('CREATE TABLE %%I PARTITION OF %%I DEFAULT', t || '_default', t);
    EXECUTE format('SELECT date_trunc(''month'', min(hour) AT TIME ZONE ''UTC'')::date FROM %%I',
                   t || '_unpartitioned') INTO first_month;
    m := coalesce(first_month, date_trunc('month', now() AT TIME ZONE 'UTC')::date);
    WHILE m <= (now() AT TIME ZONE 'UTC')::date + 92 LOOP
      EXECUTE format('CREATE TABLE %%I PARTITION OF %%I FOR VALUES FROM (%%L) TO (%%L)',
                     t || '_p' || to_char(m, 'YYYYMM'), t,
                     to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00',
                     to_char((m + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
      m := (m + interval '1 month')::date;
    END LOOP;
    EXECUTE format('INSERT INTO %%I SELECT * FROM %%I', t, t || '_unpartitioned');
    EXECUTE format('SELECT setval(pg_get_serial_sequence(%%L, ''id''), '
                   'greatest(coalesce((SELECT max(id) FROM %%I), 0), 1), '
                   '(SELECT max(id) IS NOT NULL FROM %%I))', t, t, t);
    EXECUTE format('DROP TABLE %%I', t || '_unpartitioned');
    EXECUTE format('ALTER TABLE %%I ADD CONSTRAINT %%I PRIMARY KEY (id, hour)', t, t || '_pkey');
    FOREACH def IN ARRAY coalesce(defs, ARRAY[]::text[]) LOOP
      EXECUTE def;
    END LOOP;
  END LOOP;
END
$convert$
"""

FUNCTIONS = """
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
        -- One maker at a time; it checks again once it holds the lock.
        PERFORM pg_advisory_xact_lock(1718026244);
        IF to_regclass(part) IS NULL THEN
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
-- ;;
CREATE OR REPLACE FUNCTION fleetwatt_hour_partitions_drop_before(horizon date)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  t text;
  part record;
  dropped integer := 0;
BEGIN
  IF horizon <> date_trunc('month', horizon)::date THEN
    RAISE EXCEPTION 'fleetwatt_hour_partitions_drop_before: %% is not the first day of a month', horizon;
  END IF;
  FOREACH t IN ARRAY ARRAY[%(tables)s] LOOP
    FOR part IN
      SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = to_regclass(t) AND c.relname ~ ('^' || t || '_p[0-9]{6}$')
         AND to_date(right(c.relname, 6), 'YYYYMM') < horizon
    LOOP
      EXECUTE format('DROP TABLE %%I', part.relname);
      dropped := dropped + 1;
    END LOOP;
    EXECUTE format('DELETE FROM %%I WHERE hour < %%L', t || '_default', to_char(horizon, 'YYYY-MM-DD') || ' 00:00:00+00');
  END LOOP;
  RETURN dropped;
END
$fn$
-- ;;
REVOKE EXECUTE ON FUNCTION fleetwatt_hour_partitions_drop_before(date) FROM PUBLIC
-- ;;
REVOKE EXECUTE ON FUNCTION fleetwatt_hour_partitions_ensure(date, date) FROM PUBLIC
"""
# Only the owner drops history; the app's role is granted ensure (apps/core/access/database_roles.py).

TABLE_LIST = ", ".join(f"'{t}'" for t in TABLES)

UNDO = """
DROP FUNCTION IF EXISTS fleetwatt_hour_partitions_ensure(date, date);
DROP FUNCTION IF EXISTS fleetwatt_hour_partitions_drop_before(date);
"""


class Migration(migrations.Migration):
    atomic = True

    dependencies = [
        ("telemetry", "0005_ingest_fanout_and_shards"),
        ("jobs", "0008_method_estimated"),
    ]

    # Statements as a list: each is run whole (a string would be split on its semicolons, dollar quotes aside).
    operations = [
        migrations.RunSQL([CONVERT % {"tables": TABLE_LIST}], reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(
            [part.strip() for part in (FUNCTIONS % {"tables": TABLE_LIST}).split("\n-- ;;\n")],
            reverse_sql=[UNDO],
        ),
    ]
