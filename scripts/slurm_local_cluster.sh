#!/usr/bin/env bash
# Start a real one-node SLURM cluster on this machine, for the SLURM launcher's tests and for trying
# `hydra/launcher=slurm` without a cluster: Debian's slurm-wlm + munge, as root, without systemd.
# Installs the packages when missing, writes /etc/slurm/slurm.conf for this host (all its cores,
# 80% of its memory, one partition `debug`), starts munged, slurmctld and slurmd, waits for the node
# to be idle. Idempotent. No accounting storage: `sacct` fails, job states come from the controller.
# Stop it with: kill $(pgrep -x slurmd) $(pgrep -x slurmctld)
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "slurm_local_cluster.sh: needs root" >&2; exit 1; }
if ! command -v slurmctld >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
host=$(hostname -s)
mkdir -p /run/munge /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
chown munge:munge /run/munge
if [ ! -f /etc/munge/munge.key ]; then
    mungekey -c 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
fi
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged
memory_mb=$(( $(free -m | awk '/Mem:/{print $2}') * 8 / 10 ))
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc obeys OMP_NUM_THREADS, which test runs set to 1
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/pgid
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
if pgrep -x slurmd >/dev/null && ! scontrol show node "$host" 2>/dev/null | grep -q "CPUTot=$cpus "; then
    kill $(pgrep -x slurmd) $(pgrep -x slurmctld) 2>/dev/null || true  # started with another node size: restart
    while pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null; do sleep 0.2; done
fi
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 40); do
    sinfo -h -o %T 2>/dev/null | grep -q -E "idle|mix|alloc" && break
    sleep 0.5
done
sinfo -h -o "%P %T %N"
