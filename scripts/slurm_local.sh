#!/usr/bin/env bash
# A one-node Slurm on localhost, for testing `hydra/launcher=slurm` on this machine.
#
#   scripts/slurm_local.sh start    # munged + slurmctld + slurmd, waits until the node is idle
#   scripts/slurm_local.sh stop     # stops the daemons this script started
#   scripts/slurm_local.sh status   # sinfo
#   scripts/slurm_local.sh env      # prints `export SLURM_CONF=...` for sbatch/squeue/submitit
#
# Needs root and Debian's slurmctld, slurmd and munge packages (`make setup-cluster`).
# Everything (config, state, logs, pid files) lives under $RAGREPRO_SLURM_DIR
# (default /tmp/ragrepro-slurm); nothing in /etc/slurm is touched. The daemons listen on
# 127.0.0.1 only. No cgroups (proctrack/linuxproc, task/none) and no accounting database:
# `sacct` is unavailable, so a job's fate is read from its own output files (submitit does).
set -euo pipefail

DIR="${RAGREPRO_SLURM_DIR:-/tmp/ragrepro-slurm}"
CONF="$DIR/slurm.conf"
CTLD_PORT="${RAGREPRO_SLURM_PORT:-6817}"
NODE=localhost
MUNGE_SOCKET="$DIR/munge/munge.socket.2"
UP_SECONDS="${RAGREPRO_SLURM_UP_SECONDS:-120}"  # how long start waits for the node to be idle

die() { echo "slurm_local: $*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null || die "$1 not found: run \`make setup-cluster\` (Debian packages slurmctld slurmd munge)."
}

write_conf() {
  local cpus mem
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc obeys OMP_NUM_THREADS
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/munge"
  cat > "$CONF" <<EOF
# Written by scripts/slurm_local.sh: one node on localhost, no cgroups, no accounting.
ClusterName=ragrepro
CommunicationParameters=NoInAddrAny
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# keep finished jobs visible to scontrol for a day: without accounting it is the only record
MinJobAge=86400
MaxArraySize=1001
NodeName=$NODE NodeHostname=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  if [ -S "$MUNGE_SOCKET" ] && munge -n -S "$MUNGE_SOCKET" >/dev/null 2>&1; then return; fi
  # munged refuses a key or socket folder that others could read; it runs as root here.
  install -m 700 -d "$DIR/munge"
  [ -f "$DIR/munge/munge.key" ] || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$DIR/munge/munge.key"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed"
  for _ in $(seq 50); do munge -n -S "$MUNGE_SOCKET" >/dev/null 2>&1 && return; sleep 0.2; done
  die "munged did not answer on $MUNGE_SOCKET (log: $DIR/log/munged.log)"
}

show_logs() {
  echo "--- slurmctld.log"; tail -20 "$DIR/log/slurmctld.log" 2>/dev/null || true
  echo "--- slurmd.log"; tail -20 "$DIR/log/slurmd.log" 2>/dev/null || true
}

wait_idle() {
  # bounded: a loaded machine takes longer than an idle one, but never forever; a daemon that
  # died (its port taken, a bad config) is reported at once instead of after the wait
  local state=""
  for _ in $(seq "$UP_SECONDS"); do
    state=$(SLURM_CONF="$CONF" sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    case "$state" in idle*|mixed*|allocated*) return 0 ;; esac
    for d in slurmctld slurmd; do
      pid_alive "$DIR/$d.pid" "$d" || { show_logs; die "$d exited during start-up"; }
    done
    sleep 1
  done
  show_logs
  die "node $NODE is not idle after $UP_SECONDS s (state: ${state:-none})"
}

wait_pidfile() {  # a daemon forks into the background; its pid file appears a moment later
  for _ in $(seq 100); do pid_alive "$DIR/$2.pid" "$2" && return 0; sleep 0.1; done
  show_logs
  die "$2 did not start (no live process in $DIR/$2.pid after 10 s)"
}

start() {
  [ "$(id -u)" = 0 ] || die "must run as root (the daemons run as root here)."
  need slurmctld; need slurmd; need munged; need sinfo
  write_conf
  start_munge
  if ! pid_alive "$DIR/slurmctld.pid" slurmctld; then
    rm -f "$DIR/slurmctld.pid"  # stale: left by a killed session, or its pid reused since
    slurmctld -f "$CONF" -c   # -c: clean start, no jobs from an earlier session
    wait_pidfile slurmctld slurmctld
  fi
  if ! pid_alive "$DIR/slurmd.pid" slurmd; then
    rm -f "$DIR/slurmd.pid"
    slurmd -f "$CONF" -N "$NODE"
    wait_pidfile slurmd slurmd
  fi
  wait_idle
  echo "Slurm is up: export SLURM_CONF=$CONF"
}

kill_leftovers() {
  # job steps (slurmstepd) that outlive slurmd; they run inside $DIR, nothing else does
  local p cwd killed=()
  for p in /proc/[0-9]*; do
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    case "$cwd" in
      "$DIR"|"$DIR"/*) kill -9 "${p#/proc/}" 2>/dev/null && killed+=("${p#/proc/}") \
        && echo "stopped leftover ${p#/proc/}" ;;
    esac
  done
  [ "${#killed[@]}" = 0 ] || wait_dead 10 "${killed[@]}" || echo "slurm_local: leftovers ${killed[*]} still alive" >&2
  return 0
}

# a pid file names a live daemon only if that pid runs the daemon: after a crash or a reboot
# the number may belong to any other process by now
pid_alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
    && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

wait_dead() {  # wait_dead SECONDS PID...: poll until every pid is gone; 1 if some remain
  local tries=$(( $1 * 5 )); shift
  for _ in $(seq "$tries"); do
    local alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && ! is_zombie "$pid" && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.2
  done
  return 1
}

# a killed daemon whose parent is gone stays a zombie where init does not reap: it holds no
# port and no file, so it counts as gone
is_zombie() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

stop() {
  if [ -f "$CONF" ] && pid_alive "$DIR/slurmctld.pid" slurmctld; then
    SLURM_CONF="$CONF" scancel -u root 2>/dev/null || true
    for _ in $(seq 25); do  # let cancelled and finishing steps end (5 s)
      [ -z "$(SLURM_CONF="$CONF" squeue -h 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  # SIGTERM to all three at once, wait for them together (3 s), then SIGKILL: this Slurm's
  # state is thrown away (the next start is a clean start, -c). The pid files go only once
  # the daemons are really gone, so a start right after a stop never runs beside them.
  local pids=() names=()
  for entry in slurmd:slurmd.pid slurmctld:slurmctld.pid munged:munge/munged.pid; do
    local name=${entry%%:*} file="$DIR/${entry#*:}"
    if pid_alive "$file" "$name"; then pids+=("$(cat "$file")"); names+=("$name"); kill "$(cat "$file")"; fi
  done
  if [ "${#pids[@]}" -gt 0 ] && ! wait_dead 3 "${pids[@]}"; then
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait_dead 10 "${pids[@]}" || die "daemons ${pids[*]} still alive 10 s after SIGKILL"
  fi
  for i in "${!pids[@]}"; do echo "stopped ${names[$i]} (${pids[$i]})"; done
  rm -f "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"
  kill_leftovers
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF="$CONF" sinfo ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) die "usage: $0 start|stop|status|env" ;;
esac
