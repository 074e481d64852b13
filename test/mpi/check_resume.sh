#!/usr/bin/env bash
# Training resumed in another world size and plan (docs/checkpoints.md): 4 processes train 6 steps
# on a 2x2 mesh uninterrupted, and 3 steps then save model, optimizer and schedule; 2 processes
# (tensor plan) and 3 (data plan) resume for steps 3-5. The first 3 losses must equal the
# uninterrupted run's exactly, the resumed ones within 1e-5 relative (other layouts sum in other
# orders); resuming the model alone must differ (the comparison can fail). Exits 0 when all hold.
#   usage: check_resume.sh MPIRUN RESUME_TRAINING
set -uo pipefail

fail() { echo "check_resume: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: check_resume.sh MPIRUN RESUME_TRAINING"
mpirun=$1 program=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-resume.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run() {  # NP OUT ARGS...: the losses ("STEP VALUE" lines) of one job into OUT
  local np=$1 out=$2
  shift 2
  "$mpirun" -np "$np" "$program" "$@" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "mpirun -np $np $*"; }
  grep '^loss ' "$tmp/log" | cut -d' ' -f2- > "$out"
}
# Rows of a and b for the steps both hold: equal within rel (0: exactly), else print the step.
compare() {  # A B REL
  join "$1" "$2" | awk -v rel="$3" '{ d = $2 - $3; if (d < 0) d = -d; m = $3 < 0 ? -$3 : $3;
    if (d > rel * (m > 1 ? m : 1)) { print "step " $1 ": " $2 " vs " $3; bad = 1 } n++ }
    END { if (n == 0) { print "no common steps"; bad = 1 } exit bad }'
}

run 4 "$tmp/straight" 2d 0 6
run 4 "$tmp/first" 2d 0 3 save "$tmp/ckpt"
[ "$(wc -l < "$tmp/first")" -eq 3 ] || fail "the first run printed $(wc -l < "$tmp/first") losses, not 3"
compare "$tmp/first" "$tmp/straight" 0 || fail "the first 3 steps differ from the uninterrupted run"
for job in "2 tensor" "3 data"; do
  set -- $job
  run "$1" "$tmp/resumed-$1" "$2" 3 6 resume "$tmp/ckpt"
  [ "$(wc -l < "$tmp/resumed-$1")" -eq 3 ] || fail "the run resumed on $1 ranks printed the wrong number of losses"
  compare "$tmp/resumed-$1" "$tmp/straight" 1e-5 || fail "resumed on $1 ranks ($2), the losses differ"
done
run 2 "$tmp/model-only" tensor 3 6 resume "$tmp/ckpt" model-only
compare "$tmp/model-only" "$tmp/straight" 1e-5 > /dev/null && fail "resuming the model alone gave the same losses"
echo "check_resume: saved on 4 ranks (2d) after 3 steps, resumed on 2 (tensor) and 3 (data): the uninterrupted losses"
