#!/usr/bin/env bash
# Two hosts x 2 ranks over TCP (docs/testing.md, "Several hosts"): makes hosts h0 and h1 with
# tools/multihost (network namespaces, one veth link each to a switch) and runs across them, with
# mpirun, a host file and Open MPI's TCP transport only:
#   - local ranks: 0 and 1 on each host, as Open MPI numbers them (multihost_job hosts)
#   - the boxing and op suites of the mpi tests (mpi_tests [boxing], [ops])
#   - 3 steps of 2x2 data x tensor training, equal to one process's (multihost_job train)
#   - a checkpoint saved by the 4 ranks on both hosts, loaded (every layout) by one rank on h1:
#     the hosts share the file system, as a cluster with a shared home does
# and checks that the hosts' link carried the traffic. PARTS (hosts, boxing, ops, train,
# checkpoint; default all) choose what runs. Exits 77 (SKIP) saying why where the namespaces
# cannot be made, 1 on a failure.
#   usage: check_multihost.sh MULTIHOST MPI_TESTS MULTIHOST_JOB CHECKPOINT_RESHARD [PARTS...]
set -uo pipefail

fail() { echo "check_multihost: FAILED: $*" >&2; exit 1; }
[ $# -ge 4 ] || fail "usage: check_multihost.sh MULTIHOST MPI_TESTS MULTIHOST_JOB CHECKPOINT_RESHARD [PARTS...]"
multihost=$1 mpi_tests=$2 job=$3 reshard=$4
shift 4
parts=" ${*:-hosts boxing ops train checkpoint} "
wants() { [[ $parts = *" $1 "* ]]; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-multihost.XXXXXX")
hosts=$tmp/hosts
trap '"$multihost" down "$hosts"; rm -rf "$tmp"' EXIT

"$multihost" up "$hosts" 2
status=$?
[ $status -eq 77 ] && exit 77
[ $status -eq 0 ] || fail "making the hosts (exit status $status)"

# step NAME COMMAND...: runs one job (bounded: 240 s; the op suite took 75 s on a loaded 2-core
# machine), shows its output on failure.
step() {
  local name=$1 start millis
  shift
  start=$(date +%s%3N)
  MPIEXEC_TIMEOUT=240 timeout -k 5 270 "$@" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; fail "$name"; }
  millis=$(($(date +%s%3N) - start))
  echo "check_multihost: $name: passed in $((millis / 1000)).$(printf %03d $((millis % 1000))) s"
}

before=$("$multihost" bytes "$hosts" h1)
if wants hosts; then
  step hosts "$multihost" mpirun "$hosts" -np 4 "$job" hosts
  for h in h0 h1; do
    for l in 0 1; do
      grep -q "on $h: local rank $l," "$tmp/hosts.log" || { cat "$tmp/hosts.log" >&2; fail "no rank on $h with local rank $l"; }
    done
  done
  grep "multihost_job rank" "$tmp/hosts.log" | sort
fi
wants boxing && step boxing "$multihost" mpirun "$hosts" -np 4 "$mpi_tests" '[boxing]'
wants ops && step ops "$multihost" mpirun "$hosts" -np 4 "$mpi_tests" '[ops]'
if wants train; then
  step train "$multihost" mpirun "$hosts" -np 4 "$job" train
  grep "multihost_job: 3 steps" "$tmp/train.log"
fi
if wants checkpoint; then
  step checkpoint-save "$multihost" mpirun "$hosts" -np 4 "$reshard" save "$tmp/ckpt"
  [ -f "$tmp/ckpt/manifest" ] || fail "no manifest after saving across the hosts"
  mkdir "$tmp/scratch"
  step checkpoint-load-on-h1 "$multihost" exec "$hosts" h1 "$(dirname "$multihost")/mpirun" -np 1 "$reshard" load "$tmp/ckpt" "$tmp/scratch"
  grep "checkpoint_reshard load on 1 ranks" "$tmp/checkpoint-load-on-h1.log"
fi
carried=$(($("$multihost" bytes "$hosts" h1) - before))
# The suites' traffic between the hosts runs to megabytes (hosts alone: kilobytes, but that part
# never runs alone); the runtime's own traffic alone to kilobytes.
[ "$carried" -gt 1000000 ] || fail "h1's link carried only $carried bytes: the ranks did not talk over it"
echo "check_multihost: h1's link carried $carried bytes; every job passed across 2 hosts"
