#!/usr/bin/env bash
# Proves that an installed spsd is a CMake package: installs the build into a temporary prefix,
# builds examples/01_placement.cpp out of tree with test/install/consumer/CMakeLists.txt
# (find_package(spsd CONFIG REQUIRED), target_link_libraries(... spsd::spsd)), CMAKE_PREFIX_PATH
# naming that prefix, and runs it on two ranks under tools/mpirun.
#   usage: check_cmake.sh SOURCE_ROOT BUILD_ROOT
set -euo pipefail
CHECK=check_cmake
. "$(dirname "${BASH_SOURCE[0]}")/install_common.sh"
for tool in cmake ninja; do command -v "$tool" >/dev/null || fail "$tool is not installed"; done

install_spsd
config=$(find "$root" -name spsdConfig.cmake | head -n 1)
[ -n "$config" ] || fail "meson install put no spsdConfig.cmake under $root"
[ -f "$(dirname "$config")/spsdConfigVersion.cmake" ] || fail "no spsdConfigVersion.cmake next to $config"

mkdir "$tmp/app"
cp "$src/test/install/consumer/CMakeLists.txt" "$src/examples/01_placement.cpp" "$tmp/app/"
cmake -S "$tmp/app" -B "$tmp/app/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log" >&2; fail "cmake could not configure the consumer with CMAKE_PREFIX_PATH=$prefix"; }
# find_package must have taken the package just installed, not one elsewhere on the machine.
found=$(sed -n 's/^spsd_DIR:PATH=//p' "$tmp/app/build/CMakeCache.txt")
[ "$found" = "$(dirname "$config")" ] || fail "find_package(spsd) found $found, not $(dirname "$config")"
cmake --build "$tmp/app/build" >"$tmp/compile.log" 2>&1 ||
  { cat "$tmp/compile.log" >&2; fail "cmake --build of the consumer failed"; }
no_tree_paths "$tmp/app/build/build.ninja"

run_consumer "$tmp/app/build/01_placement"
echo "$CHECK: installed spsd builds and runs an out-of-tree program with find_package(spsd) from $found"
