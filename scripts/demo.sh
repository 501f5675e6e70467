#!/usr/bin/env bash
# make demo: a week of simulated fleet history in a Prometheus of our own and its Slurm accounting, the live
# simulator, a real local Slurm (when it can start), Celery worker and beat, the web server; then the URL and
# a login. Everything listens on 127.0.0.1 only, but the local Slurm's slurmdbd (docs/schedulers.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_DEBUG=${DJANGO_DEBUG:-1}
PY=.venv/bin/python

# The demo empties the database it uses, so it only uses one it created itself (apps/simulator/
# demo_database.py): DATABASE_URL's when set (exported or in .env), else a local fleetwatt_demo. Any other
# database, and DJANGO_DEBUG=0, are refused with one line, before anything is touched; a missing one is
# created, marked as the demo's.
if [ -z "${DATABASE_URL:-}" ] && ! grep -qsE '^[[:space:]]*(export[[:space:]]+)?DATABASE_URL=' .env; then
  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/fleetwatt_demo
fi
FLEETWATT_LOG_LEVEL=WARNING $PY manage.py demo_database
VAR=var/demo
RUN=var/run
mkdir -p "$VAR" "$RUN" var/log

stop_pid() { [ -f "$1" ] && kill "$(cat "$1")" 2>/dev/null || true; rm -f "$1"; }
free_port() { $PY -c 'from apps.simulator.local_prometheus import free_port; print(free_port())'; }
wait_http() { for _ in $(seq 120); do curl -fs -o /dev/null "$1" && return 0; sleep 0.5; done; echo "no answer from $1" >&2; return 1; }

for p in prometheus simulator worker beat web; do stop_pid "$RUN/$p.pid"; done
# Migrated and emptied: a second `make demo` starts from an empty database, or the earlier run's jobs
# (same keys, other hours) would mix with the new ones.
FLEETWATT_LOG_LEVEL=WARNING $PY manage.py demo_database --reset

# The real local Slurm (scripts/slurm.sh: one node, 4 stand-in GPUs, accounting), so that jobs can be submitted
# during the demo; it starts in the background while the history is simulated. `make stop` stops it only when
# the demo started it (var/run/slurm.started-by-demo). Where it cannot start (not root, no packages, no MariaDB...)
# the demo goes on without it and says why, in slurm.sh's words; FLEETWATT_DEMO_SLURM=0 leaves it out.
rm -f "$VAR/slurm.rc"
if [ "${FLEETWATT_DEMO_SLURM:-1}" = 0 ]; then
  echo 3 > "$VAR/slurm.rc"
elif bash scripts/slurm.sh status >/dev/null 2>&1; then
  echo 0 > "$VAR/slurm.rc"
else
  (
    rc=0
    timeout "${FLEETWATT_DEMO_SLURM_TIMEOUT_S:-300}" bash scripts/slurm.sh start > var/log/slurm.log 2>&1 || rc=$?
    [ $rc = 0 ] && touch "$RUN/slurm.started-by-demo"
    echo $rc > "$VAR/slurm.rc"
  ) &
fi

# The fleet starts a week before the current hour; its history runs up to now, the live simulator on.
START=$(date -u -d "$(date -u +%Y-%m-%dT%H:00:00) 7 days ago" +%Y-%m-%dT%H:00:00Z)
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
SIM_PORT=${FLEETWATT_SIM_PORT:-9400}
PROM_PORT=${FLEETWATT_DEMO_PROMETHEUS_PORT:-$(free_port)}
echo "simulating the demo fleet from $START to $NOW ..."
rm -rf "$VAR/data" "$VAR"/history*.om
$PY manage.py simulate history --scenario demo --start "$START" --until "$NOW" --out "$VAR/history" --chunk-hours 24 \
  --truth "$VAR/truth.json" --label job=fleetwatt-sim --label "instance=127.0.0.1:$SIM_PORT" | tee "$VAR/simulate.log"
echo "backfilling it into Prometheus with promtool, a day at a time ..."
# Two days at once: promtool is single-threaded and the machine has two cores.
ls "$VAR"/history.*.om | xargs -P 2 -I{} sh -c 'promtool tsdb create-blocks-from openmetrics {} "$0/data" >> var/log/promtool.log && rm -f {}' "$VAR"
$PY - <<PY
from pathlib import Path
from apps.simulator.local_prometheus import config_write
config_write(Path("$VAR/prometheus.yml"), targets=["127.0.0.1:$SIM_PORT"], scrape_interval_s=60)
PY

setsid nohup $PY manage.py simulate serve --scenario demo --start "$START" --listen "127.0.0.1:$SIM_PORT" \
  > var/log/simulator.log 2>&1 & echo $! > "$RUN/simulator.pid"
setsid nohup prometheus --config.file="$VAR/prometheus.yml" --storage.tsdb.path="$VAR/data" \
  --storage.tsdb.retention.time=3650d --web.listen-address="127.0.0.1:$PROM_PORT" \
  > var/log/prometheus.log 2>&1 & echo $! > "$RUN/prometheus.pid"
wait_http "http://127.0.0.1:$PROM_PORT/-/ready"
wait_http "http://127.0.0.1:$SIM_PORT/healthz"

export FLEETWATT_PROMETHEUS_URL="http://127.0.0.1:$PROM_PORT" FLEETWATT_SCRAPE_INTERVAL_S=60
echo "FLEETWATT_PROMETHEUS_URL=$FLEETWATT_PROMETHEUS_URL" > "$VAR/env"
# The fleet's configuration (site, servers, GPU prices, teams and their rules, job groups), the logins,
# and hourly grid intensity for the demo's zone, through the same commands an operator uses.
$PY manage.py apply_config apps/simulator/scenarios/demo-fleet.yaml
# The demo cluster's Slurm accounting is simulated from the same scenario and anchor as its history
# (`manage.py simulate_sacct`); the local Slurm, when it started, is a second cluster read with the real sacct.
for _ in $(seq "${FLEETWATT_DEMO_SLURM_TIMEOUT_S:-300}"); do [ -s "$VAR/slurm.rc" ] && break; sleep 1; done
SLURM_RC=$(cat "$VAR/slurm.rc" 2>/dev/null || echo 124)
LOCAL_SLURM=()
SLURM_CONF_FILE=""
if [ "$SLURM_RC" = 0 ]; then
  SLURM_CONF_FILE=$(bash scripts/slurm.sh env | sed -n "s/^export SLURM_CONF=//p")
  LOCAL_SLURM=(--local-slurm-conf "$SLURM_CONF_FILE")
fi
$PY manage.py demo_setup --prometheus-url "$FLEETWATT_PROMETHEUS_URL" --scrape-interval 60 \
  --scenario demo --scenario-start "$START" "${LOCAL_SLURM[@]}"
# The intensity starts four weeks before the fleet: the zone's profile of recent weeks, which the when-to-run hints
# use where no forecast covers a run; and a forecast made this hour for the next two days (docs/arithmetic.md).
INTENSITY_START=$(date -u -d "${START%Z} 28 days ago" +%Y-%m-%dT%H:00:00Z)
$PY manage.py simulate_intensity --zone DE --start "$INTENSITY_START" --hours $((28 * 24 + 216)) --out "$VAR/intensity-DE.csv"
$PY manage.py import_intensity "$VAR/intensity-DE.csv" --zone DE --source "fleetwatt simulator (synthetic)"
FORECAST_ISSUED=$(date -u +%Y-%m-%dT%H:00:00Z)
$PY manage.py simulate_intensity --zone DE --start "$FORECAST_ISSUED" --hours 48 --forecast --out "$VAR/forecast-DE.csv"
$PY manage.py import_forecast "$VAR/forecast-DE.csv" --zone DE --source "fleetwatt simulator (synthetic forecast)" \
  --issued "$FORECAST_ISSUED"
END=$(date -u +%Y-%m-%dT%H:00:00Z)  # the last closed hour; beat goes on from there
echo "ingesting $START .. $END ..."
$PY manage.py ingest --start "$START" --end "$END" --cluster default -v1 | awk 'NR % 24 == 0 || /Ingested/'
# Each job's Slurm record (state, exit code, allocation) for the week, a day a window; failed runs become findings.
SYNC_END=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "reading the week's Slurm accounting, $START .. $SYNC_END ..."
FLEETWATT_LOG_LEVEL=WARNING $PY manage.py sync_scheduler --cluster default --start "$START" --end "$SYNC_END" \
  || echo "the demo cluster's accounting could not be read: see the cluster's status at /status/"
if [ "$SLURM_RC" = 0 ]; then
  FLEETWATT_LOG_LEVEL=WARNING $PY manage.py sync_scheduler --cluster slurm-local --start "$START" --end "$SYNC_END" -v0 \
    || echo "the local Slurm's accounting could not be read (see the cluster's status at /status/)"
fi

# The when-to-run hints of the week's flexible runs (the job group "sweeps"), every 6 hours, as beat keeps them each
# hour from now on: the team pages check them against the intensity that came.
HINTS_AT=()
for h in $(seq 144 -6 6); do HINTS_AT+=(--at "$(date -u -d "${END%Z} $h hours ago" +%Y-%m-%dT%H:00:00Z)"); done
FLEETWATT_LOG_LEVEL=WARNING $PY manage.py when_to_run --record "${HINTS_AT[@]}" | tail -n 1

setsid nohup .venv/bin/celery -A fleetwatt worker -l info --concurrency 1 > var/log/worker.log 2>&1 & echo $! > "$RUN/worker.pid"
setsid nohup .venv/bin/celery -A fleetwatt beat -l info -s var/celerybeat-schedule > var/log/beat.log 2>&1 & echo $! > "$RUN/beat.pid"
WEB_PORT=${FLEETWATT_WEB_PORT:-8000}
setsid nohup bash scripts/demo_web.sh "$WEB_PORT" > var/log/web.log 2>&1 & echo $! > "$RUN/web.pid"
wait_http "http://127.0.0.1:$WEB_PORT/accounts/login/"
echo
echo "health: $(curl -s "http://127.0.0.1:$WEB_PORT/healthz")"
echo "fleetwatt is running: http://127.0.0.1:$WEB_PORT/   (API: /api/, docs: /api/docs/)"
echo "log in as admin / fleetwatt-admin (everything), ada / fleetwatt-demo (team vision) or fin / fleetwatt-finance (finance)"
echo "Prometheus: $FLEETWATT_PROMETHEUS_URL   simulator: http://127.0.0.1:$SIM_PORT/metrics   logs: var/log/"
echo "the scheduler sync's state: http://127.0.0.1:$WEB_PORT/status/ (admin); job groups, delivered vs failed: /groups/"
if [ "$SLURM_RC" = 0 ]; then
  echo "a real Slurm runs here too (cluster slurm-local; its jobs are team vision's). Submit a job and see it:"
  echo "  export SLURM_CONF=$SLURM_CONF_FILE"
  echo "  sbatch --gres=gpu:1 --wrap 'sleep 60'     # prints: Submitted batch job N"
  echo "  DJANGO_DEBUG=1 ${DATABASE_URL:+DATABASE_URL=$DATABASE_URL }.venv/bin/python manage.py sync_scheduler --cluster slurm-local \\"
  echo "    --start \$(date -u -d '1 day ago' +%FT%TZ) --end \$(date -u +%FT%TZ)   # beat reads it each hour at :02"
  echo "  then http://127.0.0.1:$WEB_PORT/jobs/slurm/N/ (as ada or admin): its state, exit code, GPUs and node"
elif [ "$SLURM_RC" = 3 ]; then
  echo "the local Slurm was left out (FLEETWATT_DEMO_SLURM=0)"
else
  # scripts/slurm.sh start's last line of its own says why it could not start.
  SLURM_WHY=$(sed -n 's/^slurm\.sh: //p' var/log/slurm.log 2>/dev/null | tail -n 1 || true)
  [ "$SLURM_RC" = 124 ] && SLURM_WHY="not running after ${FLEETWATT_DEMO_SLURM_TIMEOUT_S:-300} s"
  echo "the local Slurm did not start, the demo runs without it (var/log/slurm.log): ${SLURM_WHY:-exit $SLURM_RC}"
fi
