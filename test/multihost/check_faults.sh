#!/usr/bin/env bash
# Network faults between two hosts (docs/testing.md, "Several hosts"), on hosts h0 and h1 made by
# tools/multihost, 2 ranks each, SPSD_TIMEOUT_S=2:
#   shaped   both hosts' links limited to 50 Mbit/s (tc tbf) and 2% of their packets dropped
#            (nftables): 2x2 training still equals one process's (SKIP of this case only where
#            nft is missing)
#   cut      h1's link taken down (at the switch) while the ranks loop all-reduces: every rank's
#            spsd::Error names all_reduce and the other host's ranks, within the timeout plus
#            the 1 s probe; mpirun ends by itself once TCP gives up on h1 (tcp_retries2 4: ~6 s)
#   frozen   h1's ranks stopped with SIGSTOP in the same loop: h0's ranks' errors name them, and
#            the job ends (Open MPI's daemon on h1 kills the stopped ranks)
#   ckpt     h1's link cut while the ranks save checkpoints one after another: every checkpoint
#            directory either loads with exactly its save's values or has no manifest and does
#            not load (multihost_job verify), never torn
# Each job is bounded (MPIEXEC_TIMEOUT and timeout); afterwards no process may remain on the
# hosts. Prints the time from each fault to each rank's error. Exits 77 (SKIP) saying why where
# the namespaces cannot be made, 1 on a failure.
#   usage: check_faults.sh MULTIHOST MULTIHOST_JOB
set -uo pipefail

fail() { echo "check_faults: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: check_faults.sh MULTIHOST MULTIHOST_JOB"
multihost=$1 job=$2
mpirun=$(dirname "$multihost")/mpirun
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-faults.XXXXXX")
hosts=$tmp/hosts
trap '"$multihost" down "$hosts"; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
timeout_s=2
# A host cut off leaves mpirun waiting for its daemon there until TCP gives up retransmitting
# (net.ipv4.tcp_retries2: 15 tries, about 15 minutes, by default). The hosts here give up after
# 4 (about 6 s): after the ranks' errors, which must come first.
tcp_retries=4

now() { date +%s%3N; }
secs() { echo "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

"$multihost" up "$hosts" 2
status=$?
[ $status -eq 77 ] && exit 77
[ $status -eq 0 ] || fail "making the hosts (exit status $status)"
# set_retries: the hosts' TCP retransmission bound (per network namespace).
set_retries() {
  local h
  for h in h0 h1; do
    "$multihost" exec "$hosts" $h sh -c "echo $tcp_retries >/proc/sys/net/ipv4/tcp_retries2" || fail "setting tcp_retries2 on $h"
  done
}
set_retries
# fresh_hosts: new hosts for the next case (a link brought back up did not always carry new
# connections at once, and no shaping may remain).
fresh_hosts() { "$multihost" down "$hosts" && "$multihost" up "$hosts" 2 && set_retries || fail "remaking the hosts"; }

# start NAME ARGS...: starts the job in the background (bounded: 60 s); sets $pid and $log, and
# $report, the folder the ranks write their errors into.
start() {
  local name=$1
  shift
  log=$tmp/$name.log report=$tmp/$name.report
  mkdir -p "$report"
  MULTIHOST_REPORT=$report SPSD_TIMEOUT_S=$timeout_s MPIEXEC_TIMEOUT=60 timeout -k 5 70 \
    "$multihost" mpirun "$hosts" -x MULTIHOST_REPORT -np 4 "$job" "$@" >"$log" 2>&1 &
  pid=$!
  local _
  for _ in $(seq 300); do
    grep -q "multihost_job: ready" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "$name: the job ended before it was ready"; }
    sleep 0.1
  done
  cat "$log" >&2
  fail "$name: not ready within 30 s"
}

# finish NAME FAULT_MS: waits for the job; fails if it took more than 30 s after the fault.
finish() {
  wait "$pid"
  local status=$? ended
  ended=$(now)
  echo "check_faults: $1: the job ended $(secs $((ended - $2))) s after the fault (exit status $status)"
  [ "$status" -ne 0 ] || { cat "$log" >&2; fail "$1: the job exited 0"; }
  [ $((ended - $2)) -lt 30000 ] || { cat "$log" >&2; fail "$1: the job ended only $(secs $((ended - $2))) s after the fault"; }
}

# expect_error NAME RANK FAULT_MS TEXT...: rank RANK's report holds one spsd::Error containing every TEXT,
# at most timeout + probe + 1.5 s after the fault. A rank cut off from mpirun may still be writing
# it when mpirun has ended (it ends as soon as the ranks it reaches abort): wait until that bound.
expect_error() {
  local name=$1 r=$2 fault=$3 line at
  shift 3
  while [ ! -s "$report/rank-$r.txt" ] && [ $(($(now) - fault)) -le $((timeout_s * 1000 + 2500)) ]; do sleep 0.1; done
  line=$(cat "$report/rank-$r.txt" 2>/dev/null)
  [ -n "$line" ] || { cat "$log" >&2; fail "$name: rank $r reported no spsd::Error"; }
  for text in "$@"; do
    grep -qF -- "$text" <<<"$line" || { echo "$line" >&2; fail "$name: rank $r's error lacks \"$text\""; }
  done
  at=$(sed -n 's/.*spsd::Error at \([0-9]*\) ms.*/\1/p' <<<"$line" | head -1)
  echo "check_faults: $name: rank $r's error came $(secs $((at - fault))) s after the fault"
  [ $((at - fault)) -le $((timeout_s * 1000 + 2500)) ] || fail "$name: rank $r's error came $(secs $((at - fault))) s after the fault"
}

# No process of the job may remain on either host once it ended (Open MPI reaps within seconds).
no_leftovers() {
  local _ h
  for _ in $(seq 50); do
    [ -z "$("$multihost" pids "$hosts" h0)$("$multihost" pids "$hosts" h1)" ] && return 0
    sleep 0.2
  done
  for h in h0 h1; do "$multihost" pids "$hosts" $h | xargs -r ps -o pid,stat,cmd -p >&2; done
  fail "$1: processes still run on the hosts 10 s after the job ended"
}

peers_of() { [ "$1" -lt 2 ] && echo "[2, 3]" || echo "[0, 1]"; }

# 1. A slow, lossy link: the results do not change.
if "$multihost" shape "$hosts" h0 50mbit 2 && "$multihost" shape "$hosts" h1 50mbit 2; then
  begin=$(now)
  MPIEXEC_TIMEOUT=120 timeout -k 5 150 "$multihost" mpirun "$hosts" -np 4 "$job" train >"$tmp/shaped.log" 2>&1 ||
    { cat "$tmp/shaped.log" >&2; fail "shaped: training over the slow, lossy link"; }
  grep -q "multihost_job: 3 steps of 2d training on 4 ranks equal one process's" "$tmp/shaped.log" || fail "shaped: no parity line"
  echo "check_faults: shaped: 2d training equal to one process's over 50 Mbit/s links dropping 2%:" \
    "$(secs $(($(now) - begin))) s, $(($("$multihost" dropped "$hosts" h0) + $("$multihost" dropped "$hosts" h1))) packets dropped"
  fresh_hosts
else
  [ $? -eq 77 ] || fail "shaping the links"
  echo "check_faults: shaped: SKIPPED (see above); the other cases run"
fi

# 2. The link cut in the middle of all-reduces.
start cut collectives
sleep 0.3
fault=$(now)
"$multihost" link "$hosts" h1 down
finish cut "$fault"
for r in 0 1 2 3; do
  expect_error cut $r "$fault" "all_reduce: no completion within $timeout_s s on communicator(world ranks [0, 1, 2, 3], rank $r)" \
    "no answer within 1 s from world ranks $(peers_of $r) (dead, stopped, unreachable or busy elsewhere)"
done
no_leftovers cut
fresh_hosts

# 3. h1's ranks frozen in the middle of all-reduces.
start frozen collectives
sleep 0.3
fault=$(now)
frozen=$(pgrep -f -- "^$job collectives" | while read -r p; do
  "$multihost" pids "$hosts" h1 | grep -qx "$p" && echo "$p"; done)
[ "$(echo "$frozen" | wc -w)" -eq 2 ] || fail "frozen: found ranks '$frozen' on h1, expected 2"
kill -STOP $frozen
finish frozen "$fault"
for r in 0 1; do
  expect_error frozen $r "$fault" "all_reduce: no completion within $timeout_s s on communicator(world ranks [0, 1, 2, 3], rank $r)" \
    "no answer within 1 s from world ranks [2, 3]"
done
no_leftovers frozen
fresh_hosts

# 4. The link cut while checkpoints are saved.
start ckpt checkpoints "$tmp/ckpt"
sleep 0.3
fault=$(now)
"$multihost" link "$hosts" h1 down
finish ckpt "$fault"
for r in 0 1 2 3; do expect_error ckpt $r "$fault" "no completion within $timeout_s s"; done
no_leftovers ckpt
"$multihost" exec "$hosts" h0 "$mpirun" -np 1 "$job" verify "$tmp/ckpt" >"$tmp/verify.log" 2>&1 ||
  { cat "$tmp/verify.log" >&2; fail "ckpt: a checkpoint is torn, or none is complete"; }
grep "checkpoints complete" "$tmp/verify.log"
grep -q " 0 torn" "$tmp/verify.log" || fail "ckpt: verify printed no count"
echo "check_faults: every fault ended every job with the errors expected"
