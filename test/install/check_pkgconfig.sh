#!/usr/bin/env bash
# Proves that an installed spsd is complete for a consumer: installs the build into a temporary
# prefix, builds examples/01_placement.cpp out of tree with nothing but
# `g++ $(pkg-config --cflags --libs spsd)`, and runs it on two ranks under tools/mpirun.
#   usage: check_pkgconfig.sh SOURCE_ROOT BUILD_ROOT
set -euo pipefail
CHECK=check_pkgconfig
. "$(dirname "${BASH_SOURCE[0]}")/install_common.sh"
for tool in pkg-config g++; do command -v "$tool" >/dev/null || fail "$tool is not installed"; done

install_spsd
pc=$(find "$root" -path '*/pkgconfig/spsd.pc' | head -n 1)
[ -n "$pc" ] || fail "meson install put no pkgconfig/spsd.pc under $root"

# Make the installed spsd.pc point into $root. Its prefix (and any absolute libdir or
# includedir) is rewritten: pkg-config --define-prefix would guess the prefix one level too
# deep for Debian's lib/x86_64-linux-gnu, and PKG_CONFIG_SYSROOT_DIR or --define-variable
# would also move the system packages spsd.pc requires (ompi-cxx).
sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/#\1=$root/#" "$pc"
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags spsd) || fail "pkg-config --cflags spsd failed"
libs=$(pkg-config --libs spsd) || fail "pkg-config --libs spsd failed"
echo "$cflags $libs" >"$tmp/flags"
no_tree_paths "$tmp/flags"

# Build the example in a folder of its own, away from the source and build trees.
mkdir "$tmp/app"
cp "$src/examples/01_placement.cpp" "$tmp/app/"
cd "$tmp/app"
# shellcheck disable=SC2086  # pkg-config output is a list of flags
g++ -o 01_placement 01_placement.cpp $cflags $libs >"$tmp/compile.log" 2>&1 ||
  { cat "$tmp/compile.log" >&2; fail "g++ 01_placement.cpp \$(pkg-config --cflags --libs spsd) failed, with: $cflags $libs"; }

run_consumer ./01_placement
echo "$CHECK: installed spsd builds and runs an out-of-tree program with: g++ $cflags $libs"
