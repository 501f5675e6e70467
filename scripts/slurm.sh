#!/usr/bin/env bash
# A private, one-node Slurm with accounting (munged, slurmdbd, slurmctld, slurmd) for the scheduler tests.
#
#   scripts/slurm.sh start    install what is missing, lay out var/slurm/, start the daemons, wait until usable
#   scripts/slurm.sh stop     cancel its jobs, stop the daemons it started (by their pid files), remove munge's folder
#   scripts/slurm.sh status   print each daemon's state; exit 0 only when all four run
#   scripts/slurm.sh env      print the exports a client needs: eval "$(scripts/slurm.sh env)"
#
# The Slurm daemons run as root and keep their config, spool, state and logs under var/slurm/ (git-ignored). munged
# runs as the munge user, which may not enter the checkout (a clone in /root, or in a mode-700 folder): its key,
# seed, log and socket live in /run/fleetwatt-slurm-<checkout hash>/, which stop removes. All of it on its own
# ports, so that it never collides with a system munged or another checkout's Slurm. Accounting goes to the
# machine's MariaDB (127.0.0.1:3306, root without password) in a database of its own. No systemd, no cgroups: the
# node's 4 GPUs are stand-in device files. docs/schedulers.md explains the choices. Needs root (apt-get, munge user,
# SlurmUser=root). When start cannot start, its last line (slurm.sh: ...) says why.
#
# Settings (environment, read by start; env/status/stop read what start wrote):
#   FLEETWATT_SLURM_PORT     first of the three ports (slurmctld, slurmd, slurmdbd); default 16817, the next free
#                            triple above it is taken when one of them is busy
#   FLEETWATT_SLURM_DB       accounting database name (default fleetwatt_slurm_acct_<checkout hash>)
#   FLEETWATT_SLURM_CPUS     CPUs the node claims (default 4, so that a few 1-CPU jobs run side by side on 2 cores)
#   FLEETWATT_SLURM_TIMEOUT  seconds to wait for each daemon (default 90)
#   FLEETWATT_SLURM_RUN_DIR  where start makes munge's folder fleetwatt-slurm-<checkout hash> (default /run); the
#                            munge user must be able to enter it
#   MYSQL_HOST, MYSQL_PORT   the MariaDB server (default 127.0.0.1, 3306), reached as root without password
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=$ROOT/var/slurm
ETC=$BASE/etc
RUN=$BASE/run
LOG=$BASE/log
STATE=$BASE/state
SPOOL=$BASE/spool
DEV=$BASE/dev
SLURM_CONF_FILE=$ETC/slurm.conf
export SLURM_CONF=$SLURM_CONF_FILE

CLUSTER=fwlocal
ACCOUNT=fwteam
PARTITION=gpu
# One accounting database and one munge folder per checkout: two checkouts on one machine (a developer's and CI's)
# each number their jobs from 1, and must not find each other's records under the same ids, nor share a munged.
CHECKOUT_HASH=$(printf %s "$ROOT" | md5sum | cut -c1-8)
DB_NAME=${FLEETWATT_SLURM_DB:-fleetwatt_slurm_acct_$CHECKOUT_HASH}
DB_USER=$DB_NAME # slurmdbd's own MariaDB user, one per accounting database
MYSQL_HOST=${MYSQL_HOST:-127.0.0.1}
MYSQL_PORT=${MYSQL_PORT:-3306}
TIMEOUT=${FLEETWATT_SLURM_TIMEOUT:-90}
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge)

# munged's files, outside the checkout: the munge user may not be able to enter it. MUNGE_DIR (munge:munge 0700)
# holds the key, seed and log, MUNGE_RUN (munge:munge 0755) the socket and pid file, as /etc/munge, /var/lib/munge
# and /run/munge do for a system munged. start records the folder in var/slurm/etc/munge-home, for stop, status and
# env. A checkout started before this layout has no such record: its munged's files are var/slurm/munge and
# var/slurm/run/munge, and stop and status find them there.
MUNGE_HOME_NEW=${FLEETWATT_SLURM_RUN_DIR:-/run}/fleetwatt-slurm-$CHECKOUT_HASH
MUNGE_HOME_RECORD=$ETC/munge-home
munge_paths() {
  MUNGE_HOME=$(cat "$MUNGE_HOME_RECORD" 2>/dev/null || true)
  if [ -n "$MUNGE_HOME" ]; then
    MUNGE_DIR=$MUNGE_HOME/munge
    MUNGE_RUN=$MUNGE_HOME/run
  else
    MUNGE_DIR=$BASE/munge
    MUNGE_RUN=$RUN/munge
  fi
  MUNGE_SOCKET=$MUNGE_RUN/munge.socket.2
}
munge_paths

log() { echo "slurm.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

# --- processes ---------------------------------------------------------------------------------------------------

pid_file() {
  case $1 in
    munged) echo "$MUNGE_RUN/munged.pid" ;;
    *) echo "$RUN/$1.pid" ;;
  esac
}

# A process that exists and is not a zombie (PID 1 here may take a moment to reap what it inherits).
proc_live() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# The pid of a daemon of ours that is alive, or nothing: the pid file's process must still be that program.
pid_alive() {
  local file pid
  file=$(pid_file "$1")
  [ -s "$file" ] || return 1
  pid=$(tr -dc 0-9 <"$file")
  [ -n "$pid" ] && proc_live "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
  echo "$pid"
}

running() { pid_alive "$1" >/dev/null; }
any_running() {
  local d
  for d in munged slurmdbd slurmctld slurmd; do running "$d" && return 0; done
  return 1
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every half second.
wait_for() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      log "timed out after ${seconds}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- install -----------------------------------------------------------------------------------------------------

install_missing() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  command -v mysql >/dev/null || missing+=(mariadb-client)
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "need root to apt-get install ${missing[*]}"
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# --- layout ------------------------------------------------------------------------------------------------------

# Sets PORT, the first of three free ports (not in a subshell, so that die's line is the last one).
pick_ports() {
  local tries=0
  PORT=${FLEETWATT_SLURM_PORT:-16817}
  while port_busy "$PORT" || port_busy $((PORT + 1)) || port_busy $((PORT + 2)); do
    PORT=$((PORT + 10))
    tries=$((tries + 1))
    [ $tries -lt 50 ] || die "no three free ports found above ${FLEETWATT_SLURM_PORT:-16817}"
  done
}

# The accounting database's password for slurmdbd: made once, kept in var/slurm/etc/dbpass (mode 600).
db_password() {
  if [ ! -s "$ETC/dbpass" ]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$ETC/dbpass")
  fi
  cat "$ETC/dbpass"
}

write_configs() {
  local node ctld_port slurmd_port dbd_port cpus pass
  node=$(hostname -s)
  pick_ports
  ctld_port=$PORT slurmd_port=$((PORT + 1)) dbd_port=$((PORT + 2))
  cpus=${FLEETWATT_SLURM_CPUS:-4}
  pass=$(db_password)

  : >"$ETC/plugstack.conf"
  cat >"$ETC/slurm.conf" <<EOF
# Written by scripts/slurm.sh start: a private one-node cluster with accounting. Edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$ETC/plugstack.conf
MailProg=/bin/true
# No cgroups: processes are tracked through /proc, tasks are not bound, no usage sampling.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# Connections to slurmdbd take their munge socket from here, not from AuthInfo (else /run/munge/munge.socket.2).
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
# The node claims the CPUs of this config, not the machine's: config_overrides keeps it from draining.
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
DefMemPerCPU=1000
InactiveLimit=0
MinJobAge=300
SlurmdTimeout=300
NodeName=$node NodeHostname=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 Gres=gpu:4 State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

  cat >"$ETC/gres.conf" <<EOF
# Four stand-ins for /dev/nvidia0..3 (Count= alone reports 0 GPUs and drains the node).
AutoDetect=off
NodeName=$node Name=gpu File=$DEV/nvidia[0-3]
EOF

  (
    umask 077
    cat >"$ETC/slurmdbd.conf" <<EOF
# Written by scripts/slurm.sh start; slurmdbd reads it beside \$SLURM_CONF and wants mode 600.
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=$node
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=$MYSQL_HOST
StoragePort=$MYSQL_PORT
StorageUser=$DB_USER
StoragePass=$pass
StorageLoc=$DB_NAME
EOF
  )
  chmod 600 "$ETC/slurmdbd.conf"
}

layout() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$STATE" "$SPOOL" "$DEV" "$BASE/jobs"
  chmod 755 "$BASE" "$ETC" "$RUN" "$LOG"
  # The GPUs: character devices with /dev/null's numbers, so that slurmd takes them as devices and sets
  # CUDA_VISIBLE_DEVICES in jobs; plain files where mknod is not allowed (the node works, the variable stays empty).
  local i
  for i in 0 1 2 3; do
    [ -c "$DEV/nvidia$i" ] && continue
    rm -f "$DEV/nvidia$i"
    mknod -m 666 "$DEV/nvidia$i" c 1 3 2>/dev/null || : >"$DEV/nvidia$i"
  done

  # The configuration is only rewritten while none of its daemons runs, so that a running cluster keeps its ports
  # and its munged.
  if ! any_running || [ ! -s "$ETC/slurm.conf" ]; then
    echo "$MUNGE_HOME_NEW" >"$MUNGE_HOME_RECORD"
    munge_paths
    # munged's files of the layout before they moved out of the checkout, its key among them.
    rm -rf "$BASE/munge" "$RUN/munge"
    write_configs
  fi
  munge_layout
}

# munge wants its key (0400), seed and log in a folder of its own user closed to others, its socket in one that only
# its user may write; the key is made once per munge folder (stop removes it, so each life has a new one).
munge_layout() {
  install -d -m 755 "$MUNGE_HOME" || die "cannot make munge's folder $MUNGE_HOME (FLEETWATT_SLURM_RUN_DIR)"
  install -d -o munge -g munge -m 700 "$MUNGE_DIR"
  install -d -o munge -g munge -m 755 "$MUNGE_RUN"
  if [ ! -s "$MUNGE_DIR/munge.key" ]; then
    rm -f "$MUNGE_DIR/munge.key"
    mungekey --create --keyfile="$MUNGE_DIR/munge.key" --bits=1024
  fi
  chown munge:munge "$MUNGE_DIR/munge.key"
  chmod 400 "$MUNGE_DIR/munge.key"
  munge_reach_check
}

# munged runs as the munge user: it must enter every folder down to its own, or it fails saying little. Say which
# folder on the way is closed to it, before anything else is started.
munge_reach_check() {
  local folder up closed
  for folder in "$MUNGE_DIR" "$MUNGE_RUN"; do
    runuser -u munge -- test -x "$folder" -a -w "$folder" && continue
    closed=$folder up=$folder
    while [ "$up" != / ]; do
      up=$(dirname "$up")
      runuser -u munge -- test -x "$up" || closed=$up
    done
    die "the munge user cannot reach $folder ($closed is closed to it): set FLEETWATT_SLURM_RUN_DIR to a folder" \
      "it can enter (default /run)"
  done
}

# --- database ----------------------------------------------------------------------------------------------------

mysql_root() { mysql -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u root --batch --skip-column-names "$@"; }

database_prepare() {
  local pass host sql=""
  pass=$(db_password)
  wait_for 30 "MariaDB at $MYSQL_HOST:$MYSQL_PORT" mysql_root -e 'SELECT 1' || die "MariaDB is not answering"
  # A controller without saved state numbers jobs from 1 again: accounting records of an earlier life would
  # answer for the new jobs' ids, so the accounting starts afresh with it.
  if [ ! -e "$STATE/job_state" ] && [ ! -e "$STATE/job_state.old" ]; then
    log "no saved controller state: the accounting database $DB_NAME starts afresh"
    sql+="DROP DATABASE IF EXISTS \`$DB_NAME\`;"
  fi
  sql+="CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;"
  for host in localhost 127.0.0.1; do
    sql+="CREATE USER IF NOT EXISTS '$DB_USER'@'$host' IDENTIFIED BY '$pass';"
    sql+="ALTER USER '$DB_USER'@'$host' IDENTIFIED BY '$pass';"
    sql+="GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'$host';"
  done
  mysql_root -e "$sql"
}

# --- daemons -----------------------------------------------------------------------------------------------------

munge_works() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }

start_munged() {
  running munged && return 0
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  # munged says why it refuses to start on its stderr, before it forks.
  if ! runuser -u munge -- munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
    --pid-file="$MUNGE_RUN/munged.pid" --seed-file="$MUNGE_DIR/munged.seed" \
    --log-file="$MUNGE_DIR/munged.log" --num-threads=2 </dev/null >>"$LOG/munged.out" 2>&1; then
    die "munged did not start: $(tail -n 1 "$LOG/munged.out")"
  fi
  wait_for "$TIMEOUT" munged munge_works || die "munged did not start: see $MUNGE_DIR/munged.log"
}

dbd_answers() { sacctmgr -n -P show cluster format=cluster; }

start_slurmdbd() {
  running slurmdbd && return 0
  slurmdbd </dev/null >>"$LOG/slurmdbd.out" 2>&1
  wait_for "$TIMEOUT" slurmdbd dbd_answers || {
    tail -n 20 "$LOG/slurmdbd.log" >&2 || true
    die "slurmdbd did not start: see $LOG/slurmdbd.log"
  }
}

# The cluster, an account and the users that submit (root, and whoever runs this) in accounting, once.
accounting_register() {
  local users=(root) me
  me=$(id -un)
  [ "$me" = root ] || users+=("$me")
  if [ -z "$(sacctmgr -n -P show cluster "$CLUSTER" format=cluster)" ]; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
  if [ -z "$(sacctmgr -n -P show account "$ACCOUNT" format=account)" ]; then
    sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="fleetwatt local tests" organization=fleetwatt \
      >/dev/null
  fi
  for me in "${users[@]}"; do
    if [ -z "$(sacctmgr -n -P show association where cluster="$CLUSTER" account="$ACCOUNT" user="$me" format=user)" ]
    then
      sacctmgr -i add user "$me" account="$ACCOUNT" defaultaccount="$ACCOUNT" cluster="$CLUSTER" >/dev/null
    fi
  done
}

start_slurmctld() {
  running slurmctld && return 0
  slurmctld </dev/null >>"$LOG/slurmctld.out" 2>&1
  wait_for "$TIMEOUT" slurmctld scontrol ping || {
    tail -n 20 "$LOG/slurmctld.log" >&2 || true
    die "slurmctld did not start: see $LOG/slurmctld.log"
  }
}

node_state() { sinfo -h -N -n "$(hostname -s)" -o %T 2>/dev/null | head -1; }
node_idle() { case $(node_state) in idle | mixed | allocated) return 0 ;; *) return 1 ;; esac }
sacct_answers() { sacct -n -X -S now -o JobID; }

start_slurmd() {
  local node
  node=$(hostname -s)
  if ! running slurmd; then
    mkdir -p "$SPOOL/slurmd-$node"
    slurmd -N "$node" </dev/null >>"$LOG/slurmd.out" 2>&1
  fi
  if ! wait_for 20 "node $node to register" node_idle; then
    # A drain or down left in the saved state by an earlier run: resume it once.
    log "node $node is $(node_state): resuming it"
    scontrol update NodeName="$node" State=RESUME || true
    wait_for "$TIMEOUT" "node $node to be idle" node_idle || {
      sinfo -N -l >&2 || true
      tail -n 20 "$LOG/slurmd.log" >&2 || true
      die "node $node is not idle: see $LOG/slurmd.log and $LOG/slurmctld.log"
    }
  fi
}

# The ERR trap of start: a command failed outside a test. In a subshell the caller's line says it.
start_failed() {
  if [ "$BASH_SUBSHELL" = 0 ]; then log "start failed: \`$2\` exited $1"; fi
}

cmd_start() {
  local t0=$SECONDS
  if cmd_status >/dev/null 2>&1; then
    log "already running"
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "start needs root (apt-get, the munge user, SlurmUser=root)"
  # Whatever fails below without a word of its own is named here, so that the last line always says why.
  set -E
  trap 'start_failed $? "$BASH_COMMAND"' ERR
  install_missing
  if any_running && [ -z "$MUNGE_HOME" ]; then
    log "part of this checkout's Slurm runs with munged's files in var/slurm/ (an earlier layout): stopping it first"
    cmd_stop
  fi
  layout
  database_prepare
  start_munged
  start_slurmdbd
  accounting_register
  start_slurmctld
  start_slurmd
  wait_for "$TIMEOUT" "sacct" sacct_answers || die "sacct does not answer"
  log "running (cluster $CLUSTER, node $(hostname -s), $(grep -o 'SlurmctldPort=[0-9]*' "$ETC/slurm.conf"))" \
    "in $((SECONDS - t0))s"
}

# --- stop, status, env -------------------------------------------------------------------------------------------

stop_daemon() {
  local name=$1 pid
  if pid=$(pid_alive "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for 30 "$name to stop" eval "! proc_live $pid"; then
      log "killing $name ($pid)"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name"
  fi
  rm -f "$(pid_file "$name")"
}

no_jobs() { [ -z "$(squeue -h -o %A 2>/dev/null)" ]; }

# Job steps run under slurmstepd, which outlives slurmd: cancel our jobs first, then end what is left of the steps
# started by our slurmd (they carry our SLURM_CONF in their environment), each task with its process group.
stop_jobs() {
  local ids pid task
  if running slurmctld; then
    ids=$(squeue -h -o %A 2>/dev/null || true)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      scancel $ids 2>/dev/null || true
      wait_for 20 "jobs to end" no_jobs || true
    fi
  fi
  for pid in $(pgrep -x slurmstepd || true); do
    if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx "SLURM_CONF=$SLURM_CONF_FILE"; then
      for task in $(pgrep -P "$pid" || true); do kill -KILL -- "-$task" 2>/dev/null || kill -KILL "$task" || true; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

cmd_stop() {
  stop_jobs
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon slurmdbd
  stop_daemon munged
  munge_home_remove
}

# munge's folder goes with its munged (its log is kept beside the daemons' logs). A checkout of the earlier layout
# has none.
munge_home_remove() {
  case $MUNGE_HOME in
    */fleetwatt-slurm-*) ;;
    *) return 0 ;;
  esac
  [ -d "$MUNGE_HOME" ] || return 0
  if [ -s "$MUNGE_DIR/munged.log" ] && [ -d "$LOG" ]; then cat "$MUNGE_DIR/munged.log" >>"$LOG/munged.log"; fi
  rm -rf "$MUNGE_HOME"
}

cmd_status() {
  local d pid rc=0
  for d in munged slurmdbd slurmctld slurmd; do
    if pid=$(pid_alive "$d"); then
      echo "$d: running (pid $pid)"
    else
      echo "$d: stopped"
      rc=1
    fi
  done
  if [ $rc = 0 ]; then echo "node $(hostname -s): $(node_state)"; fi
  return $rc
}

# SLURM_CONF is all a client needs: slurm.conf names the munge socket (AuthInfo, AccountingStoragePass). The others
# are for tests and scripts: munge(1) and unmunge(1) take the socket with -S; jobs may write their output to JOBS.
cmd_env() {
  printf 'export %s=%q\n' SLURM_CONF "$SLURM_CONF_FILE" FLEETWATT_SLURM_MUNGE_SOCKET "$MUNGE_SOCKET" \
    FLEETWATT_SLURM_CLUSTER "$CLUSTER" FLEETWATT_SLURM_ACCOUNT "$ACCOUNT" FLEETWATT_SLURM_PARTITION "$PARTITION" \
    FLEETWATT_SLURM_JOBS "$BASE/jobs"
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
