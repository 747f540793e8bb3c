#!/usr/bin/env bash
# The live Slurm test of `specmoe slurm`: a one-node cluster on localhost, a real job array and a
# real dependent merge job, the generated scripts run unchanged.
#   1. installs Debian's slurm-wlm and munge when missing (root; apt-get);
#   2. starts munged, slurmctld and slurmd in a temporary folder with a generated slurm.conf
#      (2 CPUs, no accounting, private ports and munge socket), touching no system configuration;
#   3. runs a small synth sweep in one process (`specmoe run`), then through
#      `specmoe slurm --array 3 --submit`, and checks that the merged report equals the single
#      process one in tokens and counts (`specmoe compare`);
#   4. submits it again, cancels one array task mid-run (scancel, after its first run was saved),
#      checks that the merge job is left unable to run and that `specmoe merge` refuses the
#      unfinished shard, recovers with `specmoe slurm --resubmit`, checks that only that task
#      reran (its finished run skipped by --resume) and that the report is again the same;
#   5. stops every daemon and job it started, on success and on failure (trap).
# Environment: SPECMOE (the binary, default build/specmoe, built when missing), SLURM_TEST_KEEP=1
# keeps the temporary folder, SLURM_TEST_REPEATS (default 150) sizes the runs: the cancel must land
# while the cancelled task still has runs to do.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start_s=$(date +%s)
say() { echo "slurm-test: $*"; }
fail() {
  echo "slurm-test: FAIL: $*" >&2
  exit 1
}

# --- 1. packages -------------------------------------------------------------------------------
need_install=0
for tool in slurmctld slurmd sbatch squeue scancel scontrol sinfo munged; do
  command -v "$tool" >/dev/null 2>&1 || need_install=1
done
[ "$(id -u)" = 0 ] || fail "run as root: the test cluster's slurmd runs as root (and installing needs it)"
if [ "$need_install" = 1 ]; then
  say "installing slurm-wlm and munge"
  # The packages' services must not start: this test runs its own daemons with its own config.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  install_rc=0
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge; } ||
    install_rc=$?
  if [ "$own_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  [ "$install_rc" = 0 ] || fail "apt-get could not install slurm-wlm and munge (exit $install_rc)"
fi

SPECMOE=${SPECMOE:-$root/build/specmoe}
if [ ! -x "$SPECMOE" ]; then
  say "building $SPECMOE"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target specmoe >/dev/null
fi
SPECMOE=$(readlink -f "$SPECMOE")

# --- 2. a one-node cluster ---------------------------------------------------------------------
tmp=$(mktemp -d /tmp/specmoe-slurm-test.XXXXXX)
chmod 755 "$tmp"
conf=$tmp/slurm.conf
munge_socket=$tmp/munge/munge.socket
# Every process this test starts carries SLURM_CONF=$conf; the cleanup finds leftovers by it.
S() { SLURM_CONF=$conf "$@"; }

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [ -f "$conf" ] && [ -f "$tmp/slurmctld.pid" ]; then
    S scancel --user="$(id -un)" >/dev/null 2>&1
    for _ in $(seq 1 50); do
      [ -z "$(S squeue --noheader 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  local pids=()
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [ -f "$f" ] && pids+=("$(cat "$f")")
  done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  # Whatever else carries this cluster's SLURM_CONF (job steps, a task's specmoe): our children.
  local left=()
  for p in /proc/[0-9]*; do
    local pid=${p#/proc/}
    [ "$pid" = $$ ] && continue
    if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "SLURM_CONF=$conf"; then left+=("$pid"); fi
  done
  [ ${#left[@]} -gt 0 ] && kill "${left[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${pids[@]}" "${left[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}" "${left[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null; done
  if [ "$rc" != 0 ]; then
    echo "slurm-test: logs of the failed run:" >&2
    for f in "$tmp"/log/*.log "$tmp"/sweep*/logs/*.out; do
      [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
    done
  fi
  if [ "${SLURM_TEST_KEEP:-0}" = 1 ]; then
    echo "slurm-test: kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p
  for p in $(seq "$1" $(($1 + 200))); do
    if port_free "$p" && [ "$p" != "${2:-}" ]; then
      echo "$p"
      return
    fi
  done
  fail "no free TCP port from $1"
}
ctld_port=$(pick_port $((16817 + RANDOM % 500)))
slurmd_port=$(pick_port $((ctld_port + 1)) "$ctld_port")

mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log"
chmod 700 "$tmp/munge/" && dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
chmod 755 "$tmp/munge"  # clients reach the socket through this folder
cat >"$conf" <<EOF
# Generated by scripts/slurm-test.sh: a one-node cluster on localhost, no accounting.
ClusterName=specmoetest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

S munged --force --socket="$munge_socket" --key-file="$tmp/munge/munge.key" --pid-file="$tmp/munge/munged.pid" \
  --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/log/munged.log" || fail "munged did not start"
S slurmctld -f "$conf" || fail "slurmctld did not start"
S slurmd -f "$conf" -N localhost || fail "slurmd did not start"
for i in $(seq 1 100); do
  state=$(S sinfo --noheader --format=%T 2>/dev/null || true)
  [ "$state" = idle ] && break
  [ "$i" = 100 ] && fail "the node did not come up (sinfo: '${state}')"
  sleep 0.2
done
say "cluster up: slurmctld :$ctld_port, slurmd :$slurmd_port ($(S sinfo --version)), $(( $(date +%s) - start_s ))s"

# --- helpers -----------------------------------------------------------------------------------
# Waits until none of the given job ids is in the queue (bounded).
wait_gone() {
  local deadline=$(($(date +%s) + ${WAIT_S:-240}))
  while :; do
    local q
    q=$(S squeue --noheader --array --format='%i %T %r' --jobs="$(IFS=,; echo "$*")" 2>/dev/null || true)
    [ -z "$q" ] && return 0
    [ "$(date +%s)" -ge "$deadline" ] && { S squeue; fail "jobs $* still queued after ${WAIT_S:-240}s"; }
    sleep 0.3
  done
}
job_field() { S scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
expect_same_report() {  # the merged report vs the single-process one: tokens and counts
  local out
  out=$("$SPECMOE" compare "$tmp/single" "$1/all/report.json") || { echo "$out"; fail "$1/all differs from the single-process run"; }
  grep -q "^0 flagged difference(s)" <<<"$out" || { echo "$out"; fail "compare did not report 0 flagged differences"; }
  grep -q "configurations differ" <<<"$out" && { echo "$out"; fail "$1/all has another config hash"; }
  local n
  n=$(grep -c '^run ' <<<"$out")
  [ "$n" = 9 ] || { echo "$out"; fail "expected 9 runs in the comparison, got $n"; }
  return 0
}

# --- 3. a sweep through Slurm ------------------------------------------------------------------
export SPECMOE_CACHE_DIR=$tmp/cache  # synth models; the jobs inherit it (sbatch exports the environment)
cat >"$tmp/sweep.toml" <<EOF
# 9 runs on the tiny synth pair; a task of --array 3 runs 3 of them.
[experiment]
name = "slurm-live"
seed = 7
repeats = ${SLURM_TEST_REPEATS:-150}
warmup = 0
threads = 1

[models.target]
synth = "tiny"
seed = 3

[models.draft]
synth = "tiny-draft"
seed = 3

[prompts]
list = ["Once upon a time", "abc abc abc abc"]

[sampling]
max_tokens = 40

[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"

[[strategy]]
name = "model"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"

[sweep]
draft_max = [1, 2]
temperature = [0.0, 0.7, 1.0]
EOF
t0=$(date +%s)
"$SPECMOE" run "$tmp/sweep.toml" -o "$tmp/single" --threads 1 --quiet
say "single-process run: $(( $(date +%s) - t0 ))s"

t0=$(date +%s)
out=$(S "$SPECMOE" slurm "$tmp/sweep.toml" --array 3 -o "$tmp/sweep1" --cpus-per-task 1 --time 10 --submit)
echo "$out"
array=$(sed -n 's/^submitted array job \([0-9]*\) .*/\1/p' <<<"$out")
merge=$(sed -n 's/.* and merge job \([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$array" ] && [ -n "$merge" ] || fail "no job ids in: $out"
dep=$(job_field "$merge" Dependency)
case "$dep" in afterok:"${array}"_\**|"(null)") ;; *) fail "merge job $merge: dependency '$dep', expected afterok:$array" ;; esac
wait_gone "$array" "$merge"
[ "$(job_field "$merge" JobState)" = COMPLETED ] || fail "merge job $merge ended $(job_field "$merge" JobState)"
expect_same_report "$tmp/sweep1"
for k in 0 1 2; do
  grep -q "shard $((k + 1))/3" "$tmp/sweep1/logs/shard-$k.out" || fail "task $k's log does not show its shard"
done
say "sweep through Slurm (array $array, merge $merge): merged report = single-process report, $(( $(date +%s) - t0 ))s"

# --- 4. a cancelled task, recovered ------------------------------------------------------------
t0=$(date +%s)
out=$(S "$SPECMOE" slurm "$tmp/sweep.toml" --array 3 -o "$tmp/sweep2" --cpus-per-task 1 --submit)
echo "$out"
array=$(sed -n 's/^submitted array job \([0-9]*\) .*/\1/p' <<<"$out")
merge=$(sed -n 's/.* and merge job \([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$array" ] && [ -n "$merge" ] || fail "no job ids in: $out"
# Task 1 owns 3 runs; cancel it once its first run is saved, while it works on the second.
deadline=$(($(date +%s) + 240))
until compgen -G "$tmp/sweep2/shard-1/runs/*.json" >/dev/null; do
  [ "$(date +%s)" -ge "$deadline" ] && fail "task 1 saved no run within 240s"
  sleep 0.02
done
S scancel "${array}_1"
wait_gone "$array"
done_runs=$(compgen -G "$tmp/sweep2/shard-1/runs/*.json" | wc -l)
[ "$done_runs" -ge 1 ] && [ "$done_runs" -lt 3 ] ||
  fail "task 1 had $done_runs of 3 runs when cancelled: not mid-run (raise SLURM_TEST_REPEATS)"
saved_sums=$(cd "$tmp/sweep2/shard-1/runs" && md5sum -- *.json)
say "cancelled task 1 with $done_runs of its 3 runs saved"
for _ in $(seq 1 50); do
  [ "$(job_field "$merge" Reason)" = DependencyNeverSatisfied ] && break
  sleep 0.2
done
[ "$(job_field "$merge" JobState)" = PENDING ] && [ "$(job_field "$merge" Reason)" = DependencyNeverSatisfied ] ||
  fail "merge job $merge: $(job_field "$merge" JobState) $(job_field "$merge" Reason), expected stranded"
if msg=$("$SPECMOE" merge "$tmp"/sweep2/shard-{0,1,2} -o "$tmp/partial-check" 2>&1); then
  fail "merge accepted an unfinished shard"
fi
grep -q "sweep2/shard-1 (shard 2/3): incomplete" <<<"$msg" || fail "merge's refusal does not name the shard: $msg"

out=$(S "$SPECMOE" slurm --resubmit "$tmp/sweep2")
echo "$out"
grep -q "^cancelled merge job $merge " <<<"$out" || fail "--resubmit did not cancel the stranded merge job $merge"
rerun=$(sed -n 's/^submitted array job \([0-9]*\) (tasks 1)$/\1/p' <<<"$out")
merge2=$(sed -n 's/^submitted merge job \([0-9]*\) .*/\1/p' <<<"$out")
[ -n "$rerun" ] && [ -n "$merge2" ] || fail "--resubmit should rerun task 1 alone and submit a merge job"
wait_gone "$rerun" "$merge2"
[ "$(job_field "$merge" JobState)" = CANCELLED ] || fail "merge job $merge ended $(job_field "$merge" JobState)"
[ "$(job_field "$merge2" JobState)" = COMPLETED ] || fail "merge job $merge2 ended $(job_field "$merge2" JobState)"
# --resume kept the runs saved before the cancel as they were (not redone) and added the rest.
(cd "$tmp/sweep2/shard-1/runs" && md5sum --quiet -c - <<<"$saved_sums") || fail "the rerun redid finished runs"
[ "$(compgen -G "$tmp/sweep2/shard-1/runs/*.json" | wc -l)" = 3 ] || fail "the rerun did not finish task 1's runs"
[ "$(grep -c '^specmoe: task 1 ' "$tmp/sweep2/logs/shard-1.out")" = 2 ] || fail "task 1 did not run exactly twice"
for k in 0 2; do
  [ "$(grep -c "^specmoe: task $k " "$tmp/sweep2/logs/shard-$k.out")" = 1 ] || fail "task $k ran again"
done
expect_same_report "$tmp/sweep2"
out=$(S "$SPECMOE" slurm --resubmit "$tmp/sweep2")
grep -q "^nothing to resubmit" <<<"$out" || fail "a finished sweep was resubmitted: $out"
say "recovered with --resubmit (array $rerun, merge $merge2): merged report = single-process report, $(( $(date +%s) - t0 ))s"
say "PASS in $(( $(date +%s) - start_s ))s"
