#!/bin/sh
# slurm_cluster.sh start DIR | stop DIR: a one-node Slurm cluster on this host for the srun test
# (tests/distributed/test_slurm.cpp), all of it in DIR: a munge key and munged on its own socket,
# a generated slurm.conf (SLURM_CONF=DIR/slurm.conf for srun), slurmctld and slurmd as root on
# 127.0.0.1 with ports of their own, no cgroups (proctrack/linuxproc, task/none: containers seldom
# let slurmd use them). `start` waits until the node is idle, or fails with one line saying why
# (and the daemons' logs in DIR/log); `stop` ends the daemons it started, by their pid files.
set -eu
cmd=$1
dir=$2
stop() {
  for f in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
}
if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
fail() {
  echo "$1" >&2
  stop
  exit 1
}
for p in munged mungekey slurmctld slurmd srun sinfo; do
  command -v "$p" >/dev/null || fail "no $p (Debian: apt-get install slurm-wlm; scripts/install-deps.sh)"
done
[ "$(id -u)" = 0 ] || fail "slurmd runs tasks as their user only as root (this is uid $(id -u))"
mkdir -p "$dir/munge" "$dir/spool" "$dir/state" "$dir/log"
chmod 700 "$dir/munge"
mungekey -c -f -k "$dir/munge/munge.key" 2>"$dir/log/mungekey.log" || fail "mungekey failed: $(tail -1 "$dir/log/mungekey.log")"
munged --force -S "$dir/munge/sock" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/pid" \
  --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" 2>"$dir/log/munged.err" ||
  fail "munged did not start: $(tail -1 "$dir/log/munged.err")"
# Ports of this cluster's own, from the pid, so that two test runs on one host do not meet.
port=$((20000 + ($$ % 10000) * 2))
node=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
ClusterName=headlabtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=/dev/null
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -c -i 2>"$dir/log/slurmctld.err" || fail "slurmctld did not start: $(tail -1 "$dir/log/slurmctld.err")"
slurmd 2>"$dir/log/slurmd.err" || fail "slurmd did not start: $(tail -1 "$dir/log/slurmd.err")"
i=0
while [ "$(sinfo -h -o %t 2>/dev/null)" != idle ]; do
  i=$((i + 1))
  [ $i -le 300 ] || fail "the node is not idle after 30 s: $(tail -1 "$dir/log/slurmd.log" 2>/dev/null)"
  sleep 0.1
done
