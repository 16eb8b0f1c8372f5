#!/usr/bin/env bash
# A one-node SLURM (with munge) in a private folder, for testing scimech's --cluster runs.
#
#   scripts/slurm_local.sh          install if needed (root + apt), start, print the export lines
#   scripts/slurm_local.sh stop     cancel every job, stop the daemons
#   scripts/slurm_local.sh status   sinfo / squeue of the private cluster
#
#   eval "$(scripts/slurm_local.sh)"   # then sbatch / squeue / sinfo talk to it
#
# No systemd: munged, slurmctld and slurmd are started directly with a slurm.conf in
# $SCIMECH_SLURM_DIR (default /tmp/scimech-slurm), on private ports and a private munge socket,
# so nothing in /etc is changed. The node is described by `slurmd -C` (its real CPU count and
# memory); one partition, "debug", the default. Starting is idempotent (a running cluster is
# reused) and every wait is bounded. Messages go to stderr; stdout carries only the export lines.
set -euo pipefail

DIR=${SCIMECH_SLURM_DIR:-/tmp/scimech-slurm}
CTLD_PORT=${SCIMECH_SLURM_CTLD_PORT:-6917}
SLURMD_PORT=${SCIMECH_SLURM_SLURMD_PORT:-6918}
PARTITION=${SCIMECH_SLURM_PARTITION:-debug}
START_TIMEOUT=${SCIMECH_SLURM_START_TIMEOUT:-60}     # seconds for each daemon to come up
INSTALL_TIMEOUT=${SCIMECH_SLURM_INSTALL_TIMEOUT:-600}
CONF=$DIR/etc/slurm.conf
SOCKET=$DIR/munge/munge.socket.2

log() { echo "slurm_local: $*" >&2; }
die() { log "error: $*"; exit 1; }

# wait_for SECONDS DESCRIPTION COMMAND...: run COMMAND every 0.5 s until it succeeds, at most SECONDS
wait_for() {
    local limit=$1 what=$2; shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            log "gave up after ${limit}s waiting for $what"
            return 1
        fi
        sleep 0.5
    done
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

exports() {
    echo "export SLURM_CONF=$CONF"
    echo "export SCIMECH_SLURM_PARTITION=$PARTITION"
}

install_slurm() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        return 0
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        die "slurmctld/slurmd/munged not found, and installing them needs root and apt-get (apt-get install slurm-wlm munge)"
    fi
    log "installing slurm-wlm and munge with apt-get (at most ${INSTALL_TIMEOUT}s)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show slurm-wlm >/dev/null 2>&1; then
        timeout "$INSTALL_TIMEOUT" apt-get update -q >&2 || die "apt-get update failed or timed out"
    fi
    timeout "$INSTALL_TIMEOUT" apt-get install -y -q slurm-wlm munge >&2 \
        || die "apt-get install slurm-wlm munge failed or timed out"
}

write_config() {
    local node
    node=$(hostname -s)
    # `slurmd -C` prints what slurmd will find: NodeName=vm CPUs=2 ... RealMemory=24105
    local hw
    hw=$(slurmd -C | head -1) || die "slurmd -C failed"
    hw=${hw#NodeName=* }
    mkdir -p "$DIR"/{etc,state,spool,log,munge}
    chmod 700 "$DIR/munge"
    cat >"$CONF" <<EOF
# written by scimech scripts/slurm_local.sh: a private one-node SLURM
ClusterName=scimech
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
PlugStackConfig=$DIR/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=30
SchedulerParameters=sched_interval=2
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
    : >"$DIR/etc/plugstack.conf"
    if [[ ! -s $DIR/munge/munge.key ]]; then
        dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 400 "$DIR/munge/munge.key"
}

node_state() { SLURM_CONF=$CONF sinfo -h -N -o "%T" 2>/dev/null | head -1; }
node_usable() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing) ]]; }

start() {
    install_slurm
    export SLURM_CONF=$CONF
    if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" && alive "$DIR/munge/munged.pid" \
        && timeout 10 scontrol ping >/dev/null 2>&1 && node_usable; then
        log "already running (SLURM_CONF=$CONF)"
        exports
        return 0
    fi
    write_config
    if ! alive "$DIR/munge/munged.pid"; then
        # munged refuses group/world-writable parents unless forced; /tmp is sticky, so --force is enough
        munged --force --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
            --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" \
            --seed-file="$DIR/munge/munged.seed" >&2
        wait_for "$START_TIMEOUT" "munged" bash -c "munge -n -S '$SOCKET' | unmunge -S '$SOCKET'" \
            || die "munged did not start; see $DIR/log/munged.log"
    fi
    if ! alive "$DIR/slurmctld.pid"; then
        slurmctld -f "$CONF" >&2 || die "slurmctld failed; see $DIR/log/slurmctld.log"
        wait_for "$START_TIMEOUT" "slurmctld" timeout 5 scontrol ping \
            || die "slurmctld did not answer; see $DIR/log/slurmctld.log"
    fi
    if ! alive "$DIR/slurmd.pid"; then
        slurmd -f "$CONF" >&2 || die "slurmd failed; see $DIR/log/slurmd.log"
    fi
    if ! wait_for "$START_TIMEOUT" "the node to be idle" node_usable; then
        # a node left DOWN/DRAIN by an earlier run: resume it once
        timeout 10 scontrol update NodeName="$(hostname -s)" State=RESUME >&2 || true
        wait_for "$START_TIMEOUT" "the node to be idle" node_usable \
            || die "node state '$(node_state)'; see $DIR/log/slurmd.log and $DIR/log/slurmctld.log"
    fi
    log "running: $(sinfo -h -N -o '%N %T cpus=%c mem=%mMB partition=%P')"
    exports
}

stop_pid() {  # stop_pid PIDFILE NAME: SIGTERM, wait at most 20 s, then SIGKILL
    local pidfile=$1 name=$2
    alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    local pid
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for 20 "$name to stop" bash -c "! kill -0 $pid"; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

stop() {
    export SLURM_CONF=$CONF
    if alive "$DIR/slurmctld.pid"; then
        timeout 20 scancel --quiet --full --user="$(id -un)" >&2 2>/dev/null || true
        wait_for 30 "the queue to empty" bash -c '[[ -z $(squeue -h -o %i) ]]' || true
    fi
    stop_pid "$DIR/slurmd.pid" slurmd
    stop_pid "$DIR/slurmctld.pid" slurmctld
    stop_pid "$DIR/munge/munged.pid" munged
    log "stopped"
}

case ${1:-start} in
    start) start ;;
    stop) stop ;;
    status)
        export SLURM_CONF=$CONF
        timeout 10 sinfo -N -l && timeout 10 squeue
        ;;
    env) exports ;;
    *) die "usage: $0 [start|stop|status|env]" ;;
esac
