#!/usr/bin/env bash
# Proves that an installed spsd is complete for a consumer: installs the build into a temporary
# prefix, builds examples/01_placement.cpp out of tree with nothing but
# `g++ $(pkg-config --cflags --libs spsd)`, and runs it on two ranks under tools/mpirun.
#   usage: check_pkgconfig.sh SOURCE_ROOT BUILD_ROOT
set -euo pipefail

fail() { echo "check_pkgconfig: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: check_pkgconfig.sh SOURCE_ROOT BUILD_ROOT"
src=$(cd "$1" && pwd) || fail "no source root $1"
build=$(cd "$2" && pwd) || fail "no build root $2"
for tool in meson pkg-config g++; do command -v "$tool" >/dev/null || fail "$tool is not installed"; done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spsd-install-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

# 1. Install, as a user would, but under $root.
meson install -C "$build" --destdir "$root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install -C $build --destdir $root failed"; }
pc=$(find "$root" -path '*/pkgconfig/spsd.pc' | head -n 1)
[ -n "$pc" ] || fail "meson install put no pkgconfig/spsd.pc under $root"

# 2. Make the installed spsd.pc point into $root. Its prefix (and any absolute libdir or
# includedir) is rewritten: pkg-config --define-prefix would guess the prefix one level too
# deep for Debian's lib/x86_64-linux-gnu, and PKG_CONFIG_SYSROOT_DIR or --define-variable
# would also move the system packages spsd.pc requires (ompi-cxx).
sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/#\1=$root/#" "$pc"
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags spsd) || fail "pkg-config --cflags spsd failed"
libs=$(pkg-config --libs spsd) || fail "pkg-config --libs spsd failed"
case "$cflags $libs" in
  *"$build"*|*"$src/include"*) fail "spsd.pc refers to the build or source tree: $cflags $libs" ;;
esac

# 3. Build the example in a folder of its own, away from the source and build trees.
mkdir "$tmp/app"
cp "$src/examples/01_placement.cpp" "$tmp/app/"
cd "$tmp/app"
# shellcheck disable=SC2086  # pkg-config output is a list of flags
g++ -o 01_placement 01_placement.cpp $cflags $libs >"$tmp/compile.log" 2>&1 ||
  { cat "$tmp/compile.log" >&2; fail "g++ 01_placement.cpp \$(pkg-config --cflags --libs spsd) failed, with: $cflags $libs"; }

# 4. Run it on two ranks (one without MPI in the build); rank 0 prints the box each rank reports.
includedir=$(pkg-config --variable=includedir spsd)
if grep -q 'define SPSD_HAVE_MPI 1' "$includedir/spsd/core/config.hpp"; then
  run=("$src/tools/mpirun" -np 2 ./01_placement) want=("rank 0 of 2" "rank 1 reports box")
else
  run=(./01_placement) want=("rank 0 of 1" "rank 0 reports box")
fi
MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-120} "${run[@]}" >"$tmp/run.log" 2>&1 ||
  { cat "$tmp/run.log" >&2; fail "${run[*]} exited with an error"; }
for expected in "${want[@]}"; do
  grep -q "$expected" "$tmp/run.log" || { cat "$tmp/run.log" >&2; fail "the example's output has no line with '$expected'"; }
done
echo "check_pkgconfig: installed spsd builds and runs an out-of-tree program with: g++ $cflags $libs"
