# tools/lib.sh: what tools/test and tools/demo share. Sourced, never run; defining
# functions and two variables is all it does.
#   SPSD_BUILD_DIR   build folder, relative to the repository root or absolute (default: build)

# shellcheck disable=SC2034  # SPSD_ROOT is for the scripts that source this file
SPSD_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPSD_BUILD_DIR=${SPSD_BUILD_DIR:-build}

# The Debian 12 packages that building, testing and running the examples need.
# CUDA is optional: Debian has no CUDA 12+, so it is used when /usr/local/cuda has it.
# dataset-fashion-mnist: the data of examples/07_train_mlp and its tests (they fall back to a
# generated stand-in without it). fortunes: the text examples/08_gpt trains on (same fallback).
# iproute2 and nftables: the multihost tests' hosts, links and packet loss (tools/multihost).
# cmake: the install test's CMake consumer (find_package(spsd)). doxygen: the `docs` target, the
# API reference (docs/build.md), and the test that every public entity has a comment.
# coinor-libcbc3: COIN-OR CBC, which a compiled step's exact layout search loads at run time
# (CompileOptions::exact_seconds, docs/compile.md) and its tests use; nothing builds against it.
SPSD_PACKAGES=(meson ninja-build pkg-config g++ libboost-mpi-dev openmpi-bin libopenmpi-dev catch2
               libopenblas-dev zlib1g-dev dataset-fashion-mnist nlohmann-json3-dev fortunes
               iproute2 nftables cmake doxygen coinor-libcbc3)

spsd_say() { printf 'tools/%s: %s\n' "${0##*/}" "$*" >&2; }

# The packages of SPSD_PACKAGES that dpkg does not list as installed, one per line.
spsd_missing_packages() {
  local p
  for p in "${SPSD_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || echo "$p"
  done
}

# Installs the missing packages; touches nothing (no apt-get update either) when none is missing.
spsd_install_packages() {
  if ! command -v dpkg-query >/dev/null; then
    spsd_say "not a Debian-like system: make sure the equivalents of these are installed: ${SPSD_PACKAGES[*]}"
    return 0
  fi
  local missing
  mapfile -t missing < <(spsd_missing_packages)
  [ ${#missing[@]} -eq 0 ] && return 0
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { spsd_say "missing packages ${missing[*]}, and no sudo to install them"; return 1; }
    as_root=(sudo)
  fi
  spsd_say "installing ${missing[*]}"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# What the benchmarks alone need, never a test or an example: PyTorch for bench/train_torch.py,
# which bench/run_all runs beside bench/train (Debian 12's is 1.13, CPU only).
SPSD_BENCH_PACKAGES=(python3-torch)

# Installs the missing ones of SPSD_BENCH_PACKAGES (dynamic scoping: spsd_install_packages sees
# the local list).
spsd_install_bench_packages() {
  local SPSD_PACKAGES=("${SPSD_BENCH_PACKAGES[@]}")
  spsd_install_packages
}

# Meson finds nvcc on PATH; the CUDA toolkit's installer puts it in /usr/local/cuda/bin.
spsd_cuda_path() {
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
}

# Configures SPSD_BUILD_DIR: a new folder gets `meson setup [ARGS]`; a configured one is left
# to ninja, which re-runs meson when a meson.build changed (ARGS, if any, go to meson configure);
# a folder whose configuration broke is set up again with --reconfigure.
spsd_configure() {
  local dir=$SPSD_BUILD_DIR
  if [ -f "$dir/build.ninja" ]; then
    [ $# -eq 0 ] || meson configure "$dir" "$@"
  elif [ -f "$dir/meson-private/coredata.dat" ]; then
    meson setup --reconfigure "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
}

# Meson (1.0 in Debian 12) gives nvcc no dependency-file arguments, so ninja does not know which
# headers a .cu file includes and would keep its object after a header changed: a stale vtable or
# struct layout, i.e. crashes. Objects of cuda/ older than the newest header go first.
spsd_drop_stale_cuda_objects() {
  local dir=$1 newest
  [ -d "$dir" ] || return 0
  newest=$(find "$SPSD_ROOT/include" "$SPSD_ROOT/src" "$SPSD_ROOT/cuda" \( -name '*.hpp' -o -name '*.cuh' \) \
    -printf '%T@\n' | sort -n | tail -1)
  [ -n "$newest" ] || return 0
  find "$dir" -name '*.cu.o' ! -newermt "@$newest" -delete
}

spsd_build() {
  spsd_drop_stale_cuda_objects "$SPSD_BUILD_DIR"
  ninja -C "$SPSD_BUILD_DIR"
}

# Everything before running: packages, CUDA on PATH, configure, build. ARGS go to spsd_configure.
# Run from SPSD_ROOT.
spsd_setup() {
  spsd_install_packages || { spsd_say "installing packages failed"; return 1; }
  spsd_cuda_path
  spsd_configure "$@" || { spsd_say "meson setup of $SPSD_BUILD_DIR failed"; return 1; }
  spsd_build || { spsd_say "the build in $SPSD_BUILD_DIR failed"; return 1; }
}

# The sanitizer runtime options of `tools/test --sanitize` (docs/testing.md), exported so that
# meson test, mpirun and every rank inherit them. Leaks are checked, except those of Open MPI's
# own allocations (tools/lsan.supp names only its libraries); UBSan stops at the first finding.
# MPI ranks get tools/lsan_keep_modules.c preloaded (SPSD_RANK_PRELOAD, read by tools/mpirun),
# so Open MPI's components stay loaded for the leak check; ASan is then not first in the library
# list, which is harmless here (the shim allocates nothing), hence verify_asan_link_order=0.
# Allocation and free stacks are kept 8 frames deep instead of 30 (malloc_context_size): the
# planner and boxing allocate often, and recording deep stacks took 14% of a sanitized test's
# time (sim-ops-reduce 52 s -> 45 s); 8 frames still reach the spsd function that allocated.
# Options already set in the environment come after ours, so they win. Returns non-zero when
# the shim cannot be compiled.
spsd_sanitizer_env() {
  local shim=$SPSD_ROOT/$SPSD_BUILD_DIR/lsan-keep-modules.so
  [[ $SPSD_BUILD_DIR = /* ]] && shim=$SPSD_BUILD_DIR/lsan-keep-modules.so
  mkdir -p "$(dirname "$shim")" &&
    cc -shared -fPIC -O2 -o "$shim" "$SPSD_ROOT/tools/lsan_keep_modules.c" || return 1
  export SPSD_RANK_PRELOAD=$shim
  export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:malloc_context_size=8${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export LSAN_OPTIONS="suppressions=$SPSD_ROOT/tools/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
}
