#!/usr/bin/env bash
# Installs what is missing, checks the include layering, file sizes and
# formatting, builds, and runs every test twice: once in the Release build
# the quick start and the benchmarks use (so the tested binaries are the
# shipped ones, and a second optimised build is not compiled on top) and
# once under AddressSanitizer + UBSan; runs clang-tidy (scripts/tidy.sh:
# every finding fails, clang's -Wthread-safety included), then runs every
# libFuzzer target briefly from its seed corpus (scripts/fuzz.sh, clang).
# Each step prints its start time and the minutes so far: CI has 2 cores
# and the whole run must stay well under 45 minutes.
# Usage: scripts/test.sh            (from anywhere; as root on a fresh box)
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
step() { echo "== $* [$(date -u +%H:%M:%S), $(( ($(date +%s) - started) / 60 )) min so far]"; }

if [[ $(id -u) -eq 0 ]] || command -v sudo >/dev/null; then
  scripts/install-deps.sh
fi

step "Layering (scripts/check_layering.py)"
/usr/bin/python3 scripts/check_layering.py
step "File sizes (scripts/check_file_size.py; functions: clang-tidy below)"
/usr/bin/python3 scripts/check_file_size.py
step "clang-format (the checked-in .clang-format; zero differences)"
git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror

jobs=$(nproc)
run_suite() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

step "Release build and tests (what the quick start and the benchmarks use)"
run_suite build-release -DCMAKE_BUILD_TYPE=Release -DISOMETRY_BUILD_TESTS=ON
# clang-tidy over every translation unit; its clang-diagnostic-thread-safety
# checks are clang's -Wthread-safety over the lock annotations (CMake adds
# the flag for clang), so no separate clang build is needed. The ASan suite
# stays on g++.
# (*.cc and *.cpp only: the CUDA kernels, *.cu, are excluded there, see
# the comment in scripts/tidy.sh.)
step "clang-tidy (scripts/tidy.sh; thread-safety analysis included)"
scripts/tidy.sh build-tidy
step "ASan + UBSan build and tests"
# protect_shadow_gap=0: the CUDA driver maps memory where ASan's shadow gap
# would be, and fails to create a context otherwise (GPU machines only; a
# no-op where the GPU tests skip).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:protect_shadow_gap=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DISOMETRY_SANITIZE=ON
step "Fuzz targets, 20 s each from the seed corpus (scripts/fuzz.sh)"
scripts/fuzz.sh 20
step "All passed"
