#!/usr/bin/env bash
# Bad values in spsd's environment variables (docs/runtime.md lists them): each job runs
# env_errors on 2 ranks with one variable set wrong, and every rank must print an spsd::Error
# naming the variable and the value, and the job must fail; a job with valid values must pass.
#   usage: check_env.sh MPIRUN ENV_ERRORS
set -uo pipefail

fail() { echo "check_env: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: check_env.sh MPIRUN ENV_ERRORS"
mpirun=$1 program=$2
log=$(mktemp "${TMPDIR:-/tmp}/spsd-env.XXXXXX")
trap 'rm -f "$log" "$log".rank*.json' EXIT

# run VAR=VALUE...: the job with these variables; sets $status, output in $log.
run() {
  env "$@" MPIEXEC_TIMEOUT=60 "$mpirun" -np 2 "$program" >"$log" 2>&1
  status=$?
}

run SPSD_TIMEOUT_S=30 SPSD_SYNC=0 SPSD_INLINE_BYTES=0 SPSD_CHECK=op SPSD_LOG=boxing,dispatch SPSD_TRACE="$log.json" SPSD_CHECK_OPS=1 \
  SPSD_BOXING_REUSE=step SPSD_BOXING_REUSE_BYTES=4096 SPSD_HOST_CACHE_MB=64
[ "$status" -eq 0 ] && [ "$(grep -c ': ok$' "$log")" -eq 2 ] || { cat "$log" >&2; fail "valid values: exit $status"; }
[ -s "$log.rank0.json" ] && [ -s "$log.rank1.json" ] || fail "valid values: SPSD_TRACE wrote no $log.rank0.json and $log.rank1.json"
echo "check_env: valid values: both ranks ok"

# bad VAR VALUE TEXT: every rank names VAR, shows VALUE and TEXT, and the job fails.
bad() {
  run "$1=$2"
  local errors
  errors=$(grep -F "spsd::Error: $1" "$log" | grep -F -- "\"$2\"" | grep -cF -- "$3")
  [ "$status" -ne 0 ] && [ "$errors" -eq 2 ] ||
    { cat "$log" >&2; fail "$1=$2: exit $status, $errors of 2 ranks named the variable, the value and \"$3\""; }
  echo "check_env: $1=$2: both ranks: $(grep -m1 -o 'spsd::Error: .*' "$log")"
}
bad SPSD_TIMEOUT_S abc "positive number of seconds"
bad SPSD_TIMEOUT_S -5 "positive number of seconds"
bad SPSD_SYNC yes "must be \"1\""
bad SPSD_INLINE_BYTES -1 "number of bytes >= 0"
bad SPSD_INLINE_BYTES 12kb "number of bytes >= 0"
bad SPSD_CHECK maybe "\"on\", \"op\" or \"off\""
bad SPSD_CHECK_OPS yes "must be \"1\" or \"0\""
bad SPSD_BOXING_REUSE always "\"node\", \"step\" or \"off\""
bad SPSD_BOXING_REUSE_BYTES 1G "number of bytes >= 0"
bad SPSD_HOST_CACHE_MB 1G "whole number of MiB >= 0"
bad SPSD_HOST_CACHE_MB -1 "whole number of MiB >= 0"
bad SPSD_LOG dispach "is no topic"
bad SPSD_TRACE "" "must be a path"
bad SPSD_TRACE /nonexistent-spsd-dir/trace.json "cannot write rank"

# The local-rank variables: mpirun always sets a valid OMPI_COMM_WORLD_LOCAL_RANK for its ranks, so
# these run the program alone (an MPI singleton) with the caller's values. single VAR=VALUE...
single() {
  env -u OMPI_COMM_WORLD_LOCAL_RANK -u LOCAL_RANK OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ${SPSD_RANK_PRELOAD:+LD_PRELOAD=$SPSD_RANK_PRELOAD} "$@" timeout 60 "$program" >"$log" 2>&1
  status=$?
}
for case in "OMPI_COMM_WORLD_LOCAL_RANK abc" "OMPI_COMM_WORLD_LOCAL_RANK -1" "LOCAL_RANK 2x" "LOCAL_RANK -2"; do
  set -- $case
  single "$1=$2"
  [ "$status" -eq 3 ] && grep -qF "spsd::Error: $1: must be a non-negative integer, got \"$2\"" "$log" ||
    { cat "$log" >&2; fail "alone with $1=$2: exit $status, no error naming the variable and the value"; }
  echo "check_env: alone, $1=$2: $(grep -m1 -o 'spsd::Error: .*' "$log")"
done
single LOCAL_RANK=3
grep -q "env_errors rank 0 (local rank 3): ok" "$log" || { cat "$log" >&2; fail "alone with LOCAL_RANK=3: not read as 3"; }
single OMPI_COMM_WORLD_LOCAL_RANK=1 LOCAL_RANK=3
grep -q "env_errors rank 0 (local rank 1): ok" "$log" ||
  { cat "$log" >&2; fail "alone with both set: OMPI_COMM_WORLD_LOCAL_RANK=1 should win over LOCAL_RANK=3"; }
echo "check_env: alone, LOCAL_RANK=3 read as 3; OMPI_COMM_WORLD_LOCAL_RANK=1 wins over LOCAL_RANK=3"
echo "check_env: passed"
