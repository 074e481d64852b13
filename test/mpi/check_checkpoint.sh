#!/usr/bin/env bash
# Checkpoints across world sizes under MPI (docs/checkpoints.md): 4 processes save the reference
# checkpoint, then 1, 2, 3 and 4 processes each load it in every layout of their ranks (bit-equal
# to the values it was made from) and check that damaged copies fail on every rank. Exits 0 when
# every job did.
#   usage: check_checkpoint.sh MPIRUN CHECKPOINT_RESHARD
set -uo pipefail

fail() { echo "check_checkpoint: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: check_checkpoint.sh MPIRUN CHECKPOINT_RESHARD"
mpirun=$1 program=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-checkpoint.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$mpirun" -np 4 "$program" save "$tmp/ckpt" || fail "saving on 4 ranks"
[ -f "$tmp/ckpt/manifest" ] || fail "no manifest after saving"
for n in 1 2 3 4; do
  mkdir -p "$tmp/scratch-$n"
  "$mpirun" -np "$n" "$program" load "$tmp/ckpt" "$tmp/scratch-$n" || fail "loading on $n ranks"
done
echo "check_checkpoint: saved on 4 ranks, loaded on 1, 2, 3 and 4"
