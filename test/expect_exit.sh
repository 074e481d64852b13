#!/usr/bin/env bash
# test/expect_exit.sh CODE PATTERN COMMAND...: runs COMMAND, shows its output, and passes (exit 0)
# only when COMMAND exits with status CODE and a line of its output (stdout and stderr) matches
# the extended regular expression PATTERN. For tests that must end in one particular way: meson's
# should_fail accepts any non-zero status, a crash included, and reads 77 as SKIP. Never exits 77.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 CODE PATTERN COMMAND..." >&2
  exit 2
fi
code=$1 pattern=$2
shift 2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" > "$log" 2>&1
status=$?
cat "$log"
if [ "$status" -ne "$code" ]; then
  echo "expect_exit: exit status $status, expected $code"
  exit 1
fi
if ! grep -Eq -- "$pattern" "$log"; then
  echo "expect_exit: exit status $code, but no line matches '$pattern'"
  exit 1
fi
echo "expect_exit: exit status $code and a line matching '$pattern', as expected"
