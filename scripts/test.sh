#!/usr/bin/env bash
# Installs what is missing, checks the include layering, file sizes and
# formatting, builds, and runs every test twice: once in the Release build
# the quick start and the benchmarks use (so the tested binaries are the
# shipped ones, and a second optimised build is not compiled on top) and
# once under AddressSanitizer + UBSan; runs clang-tidy (scripts/tidy.sh:
# every finding fails, clang's -Wthread-safety included), then runs every
# libFuzzer target briefly from its seed corpus (scripts/fuzz.sh, clang).
# Each step prints its start time, the minutes and the CPU seconds (user +
# sys of every finished child) so far: CI has 2 cores and the whole run must
# stay well under 45 minutes.
#
# clang-tidy and the fuzz targets' clang build need no test binary, so they
# run from the start in a background lane at the lowest CPU and I/O priority
# (nice 19, idle I/O class): they get only the CPU the builds and the tests
# leave idle (the tests wait on sockets, daemons and timeouts much of the
# time), and take both cores once the ASan tests are done. Their findings
# fail the run as before, at the step that waits for the lane.
# Usage: scripts/test.sh            (from anywhere; as root on a fresh box)
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
tick=$(getconf CLK_TCK)
# CPU seconds of this shell's finished children (fields 16, 17 of its stat).
cpu() { awk -v t="$tick" '{ printf "%d", ($16 + $17) / t }' /proc/$$/stat; }
step() {
  echo "== $* [$(date -u +%H:%M:%S), $(( ($(date +%s) - started) / 60 )) min, $(cpu) CPU s so far]"
}

if [[ $(id -u) -eq 0 ]] || command -v sudo >/dev/null; then
  scripts/install-deps.sh
fi

step "Layering (scripts/check_layering.py)"
/usr/bin/python3 scripts/check_layering.py
step "File sizes (scripts/check_file_size.py; functions: clang-tidy below)"
/usr/bin/python3 scripts/check_file_size.py
step "clang-format (the checked-in .clang-format; zero differences)"
git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror

# The background lane: clang-tidy over every translation unit (scripts/tidy.sh;
# its clang-diagnostic-thread-safety checks are clang's -Wthread-safety over
# the lock annotations, CMake adds the flag for clang: no separate clang
# build needed), then the fuzz targets' clang build. Each writes its log and
# exit status under build-lane/; a failed run stops the lane (see the EXIT
# trap). *.cc and *.cpp only: the CUDA kernels, *.cu, are excluded there, see
# the comment in scripts/tidy.sh.
lane=$PWD/build-lane
rm -rf "$lane" && mkdir -p "$lane"
step "Background lane started: clang-tidy (scripts/tidy.sh), then the fuzz build"
# setsid: the lane is a process group of its own, so that the trap below
# stops all of it (run-clang-tidy and its clang-tidy processes included).
# (ionice only where the kernel lets us: it is a refinement, not a need.)
idle_io=()
if ionice -c 3 true 2>/dev/null; then idle_io=(ionice -c 3); fi
setsid -w nice -n 19 "${idle_io[@]}" bash -c '
  lane=$1
  # setsid gave the lane a session, hence a scheduler autogroup, of its
  # own where the kernel has them: nice 19 alone would then only weigh
  # within the lane, which would take half the CPU from the tests. The
  # autogroup at 19 too makes the lane take only what the rest leaves.
  if [[ -w /proc/self/autogroup ]]; then echo 19 >/proc/self/autogroup || true; fi
  stamp() { date -u +%H:%M:%S; }
  cpu() { awk -v t="$(getconf CLK_TCK)" "{ printf \"%d\", (\$16 + \$17) / t }" /proc/$$/stat; }
  echo "tidy start $(stamp)" >"$lane/times"
  scripts/tidy.sh build-tidy >"$lane/tidy.log" 2>&1
  echo $? >"$lane/tidy.rc"
  echo "tidy end $(stamp), $(cpu) CPU s" >>"$lane/times"
  ISOMETRY_FUZZ_BUILD_ONLY=1 scripts/fuzz.sh >"$lane/fuzz-build.log" 2>&1
  echo $? >"$lane/fuzz-build.rc"
  echo "fuzz build end $(stamp), $(cpu) CPU s in all" >>"$lane/times"
' lane "$lane" &
lane_pid=$!
trap 'kill -- -"$lane_pid" 2>/dev/null || true' EXIT

jobs=$(nproc)
# Both builds are from scratch, where unity batches of 32 sources cost less
# CPU than the default 8: each batch parses the gRPC, protobuf and standard
# headers once (docs/benchmarks/design-measurements.md, "Build and tests").
# The default stays 8 for a developer's edit-and-rebuild.
unity=-DISOMETRY_UNITY_BATCH_SIZE=32
run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

step "Release build and tests (what the quick start and the benchmarks use)"
run_suite build-release -DCMAKE_BUILD_TYPE=Release -DISOMETRY_BUILD_TESTS=ON "$unity"
# The ASan suite stays on g++. The benchmark programs are not built there:
# no test runs them (the Release build compiles them, clang-tidy checks them).
step "ASan + UBSan build and tests"
# protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap
# would be, and fails to create a context otherwise (GPU machines only; a
# no-op where the GPU tests skip).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -g1: line tables only, all a sanitizer's report needs (file:line in each
# frame); full -g costs more compile CPU and much larger objects.
run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DISOMETRY_SANITIZE=ON -DISOMETRY_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_DEBUG=-g1 "$unity"
step "clang-tidy and the fuzz build (background lane): waiting for them"
# Nothing else of ours is left to run: the lane back at normal priority
# (root may lower a nice value; elsewhere it simply stays low).
if [[ -w /proc/$lane_pid/autogroup ]]; then echo 0 >"/proc/$lane_pid/autogroup" || true; fi
renice -n 0 -g "$lane_pid" >/dev/null 2>&1 || true
wait "$lane_pid" || true
cat "$lane/times"
lane_ok=1
for part in tidy fuzz-build; do
  echo "-- $part: exit status $(cat "$lane/$part.rc" 2>/dev/null || echo none)"
  if [[ $(cat "$lane/$part.rc" 2>/dev/null) != 0 ]]; then
    cat "$lane/$part.log"
    lane_ok=0
  fi
done
[[ $lane_ok == 1 ]] || { echo "clang-tidy or the fuzz build failed (logs above)"; exit 1; }
step "Fuzz targets, 20 s each from the seed corpus, $(nproc) at a time (scripts/fuzz.sh)"
scripts/fuzz.sh 20
step "All passed"
