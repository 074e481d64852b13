# What the install checks share (check_pkgconfig.sh, check_cmake.sh); sourced, never run.
# The sourcing script sets CHECK (its name, for messages) and passes its arguments on:
#   . install_common.sh SOURCE_ROOT BUILD_ROOT
# Afterwards src and build are absolute, tmp is a temporary folder removed on exit, and
# install_spsd, run_consumer and no_tree_paths are defined.

fail() { echo "$CHECK: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: $CHECK.sh SOURCE_ROOT BUILD_ROOT"
src=$(cd "$1" && pwd) || fail "no source root $1"
build=$(cd "$2" && pwd) || fail "no build root $2"
command -v meson >/dev/null || fail "meson is not installed"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-$CHECK.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Installs the build as a user would, but under $tmp/root (meson's --destdir); sets root to it
# and prefix to the folder under it that holds include/spsd.
install_spsd() {
  root=$tmp/root
  meson install -C "$build" --destdir "$root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install -C $build --destdir $root failed"; }
  local header
  header=$(find "$root" -path '*/include/spsd/spsd.hpp' | head -n 1)
  [ -n "$header" ] || fail "meson install put no include/spsd/spsd.hpp under $root"
  prefix=${header%/include/spsd/spsd.hpp}
}

# Fails when a file of the consumer's build ($@) names the spsd build or source tree: an install
# that works only next to its build is what the check is there to catch.
no_tree_paths() {
  local hits
  hits=$(grep -l -e "$build/" -e "$src/include" -e "$src/src" "$@" 2>/dev/null || true)
  [ -z "$hits" ] || fail "the consumer's build refers to the spsd build or source tree: $hits"
}

# Runs the consumer PROGRAM on two ranks (one when the build has no MPI): rank 0 prints the box
# each rank reports.
run_consumer() {
  local program=$1 run want expected
  if grep -q 'define SPSD_HAVE_MPI 1' "$prefix/include/spsd/core/config.hpp"; then
    run=("$src/tools/mpirun" -np 2 "$program") want=("rank 0 of 2" "rank 1 reports box")
  else
    run=("$program") want=("rank 0 of 1" "rank 0 reports box")
  fi
  MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120} "${run[@]}" >"$tmp/run.log" 2>&1 ||
    { cat "$tmp/run.log" >&2; fail "${run[*]} exited with an error"; }
  for expected in "${want[@]}"; do
    grep -q "$expected" "$tmp/run.log" || { cat "$tmp/run.log" >&2; fail "the example's output has no line with '$expected'"; }
  done
}
