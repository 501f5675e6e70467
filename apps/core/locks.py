"""Every Postgres advisory lock fleetwatt takes, in one list: its key and what it guards (pure).

Postgres keeps its two kinds of advisory key apart: a lock on one bigint never meets a lock on two ints. fleetwatt's
locks on two ints name what they guard by the first (a namespace below) and which one by the second (a cluster's
id); its locks on one key are a number, or the hash of a name (`hashtext`). Every taker imports its key from here;
tests/core/test_locks.py checks that no two keys are the same and that no module writes one of its own.
"""

from __future__ import annotations

# --- Two ints: (namespace, cluster id; a team's id for WASTE_DAYS) ----------------------------------------------------

# A cluster's catch-up from its watermark, hour by hour (beat without the fan-out, apps.pipeline.ingest): tried, not
# waited for (another worker catching the cluster up is left to it); a session lock, released when the catch-up ends.
CATCHUP = 0x66770000
# A cluster's daily sums deleted and summed again (apps.rollups.services.day_sums_refresh): two ingests of one day
# would both re-insert its rows. Taken in the order of the clusters' ids.
DAY_SUMS = 0x66770001
# A cluster's scheduler sync (apps.schedulers.services.cluster_sync_lock): a beat run and a command take turns.
SCHEDULER_SYNC = 0x66770002
# One writer of a cluster's rows at a time (apps.telemetry.services.cluster_write_lock): an ingested hour, a batch's
# derivation, a scheduler sync; their row locks, taken in different orders, deadlocked.
CLUSTER_WRITE = 0x66770003
# One dispatch of a cluster's ingest batch at a time (apps.pipeline.fanout.dispatch): two at once would each open one.
DISPATCH = 0x66770004
# A team's waste days deleted and summed again (apps.rollups.services.team_waste_days_refresh), with a team's id as
# the second int: two derivations of one team's days (two clusters' ingests) would both re-insert them. Taken in the
# order of the teams' ids, after any DAY_SUMS lock of the same derivation.
WASTE_DAYS = 0x66770005

NAMESPACES = {
    "CATCHUP": CATCHUP,
    "DAY_SUMS": DAY_SUMS,
    "SCHEDULER_SYNC": SCHEDULER_SYNC,
    "CLUSTER_WRITE": CLUSTER_WRITE,
    "DISPATCH": DISPATCH,
    "WASTE_DAYS": WASTE_DAYS,
}

# --- Two ints without a namespace: (cluster id, hours since the epoch) -----------------------------------------------

# Two writers of one cluster-hour take turns (apps.telemetry.services.cluster_hour_lock; operators and the tests hold
# it by this pair). Its first key is a cluster's id: it would meet a namespace above only for a cluster id of
# 0x66770000 (1,719,074,816) or more.

# --- One key ---------------------------------------------------------------------------------------------------------

# One maker of the hour tables' monthly partitions at a time: taken inside the SQL function
# fleetwatt_hour_partitions_ensure (telemetry's migrations 0006 and 0008), which writes it as this number.
PARTITIONS = 1718026244
# hashtext() of: one apply of the fleet config at a time (apps.config.services.config_write).
CONFIG_APPLY = "fleetwatt.config_apply"
# hashtext() of, per grid zone and basis: one import of a zone's intensity at a time (apps.carbon.services).
INTENSITY = "fleetwatt.intensity:{zone}:{basis}"
