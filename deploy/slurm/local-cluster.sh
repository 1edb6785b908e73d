#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (munge, slurmctld and slurmd on localhost), to try
# submit.sh as a user would without a real cluster; everything it starts, `stop` stops.
#
#   bash deploy/slurm/local-cluster.sh start    # prints the SLURM_CONF line to export
#   export SLURM_CONF=/tmp/bcas-slurm/slurm.conf
#   SHARDS=2 BCAS_RUN=/tmp/run BCAS_MODEL=mock:gold BCAS_ARGS="--bcas-grid smoke" \
#     SBATCH_ARGS="--gpus-per-node=0 --cpus-per-task=1 --mem=1G" bash deploy/slurm/submit.sh
#   bash deploy/slurm/local-cluster.sh stop
#
# Needs Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge) and root (the
# daemons run as the invoking user).  State, logs, the munge key and socket live in
# BCAS_SLURM_DIR (default /tmp/bcas-slurm); BCAS_SLURM_CPUS (default 2) CPUs, ports
# BCAS_SLURM_PORT and +1 (default 16817).
set -euo pipefail

DIR="${BCAS_SLURM_DIR:-/tmp/bcas-slurm}"
CPUS="${BCAS_SLURM_CPUS:-2}"
PORT="${BCAS_SLURM_PORT:-16817}"
NODE="$(hostname -s)"
export SLURM_CONF="$DIR/slurm.conf"

start() {
    for tool in munged slurmctld slurmd sbatch; do
        command -v "$tool" >/dev/null || { echo "local-cluster: $tool not found: apt-get install -y slurm-wlm munge" >&2; exit 2; }
    done
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
    if [[ ! -f "$DIR/munge.key" ]]; then
        dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
        chmod 400 "$DIR/munge.key"
    fi
    munged --force --key-file="$DIR/munge.key" --socket="$DIR/munge.socket" \
        --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge.seed"
    local mem
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
    cat > "$SLURM_CONF" <<CONF
ClusterName=bcaslocal
SlurmctldHost=${NODE}(127.0.0.1)
SlurmctldPort=${PORT}
SlurmdPort=$((PORT + 1))
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=${DIR}/munge.socket
CredType=cred/munge
StateSaveLocation=${DIR}/state
SlurmdSpoolDir=${DIR}/spool
SlurmctldPidFile=${DIR}/slurmctld.pid
SlurmdPidFile=${DIR}/slurmd.pid
SlurmctldLogFile=${DIR}/log/slurmctld.log
SlurmdLogFile=${DIR}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${mem} State=UNKNOWN
PartitionName=local Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
CONF
    slurmctld -c -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 1 60); do
        if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            echo "local-cluster: up ($NODE, $CPUS CPUs); export SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 1
    done
    echo "local-cluster: the node did not come up; logs in $DIR/log" >&2
    stop
    exit 1
}

stop() {
    for name in slurmd slurmctld munged; do
        local pidfile="$DIR/$name.pid" pid
        if [[ -f "$pidfile" ]]; then
            pid="$(cat "$pidfile")"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -9 "$pid" 2>/dev/null || true  # still there after 20 s
            rm -f "$pidfile"
        fi
    done
    echo "local-cluster: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
