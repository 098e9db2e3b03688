#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs
# each for a given time, starting from the checked-in seeds.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, all)
#
# New inputs go to a scratch corpus outside the source tree
# ($ISOMETRY_FUZZ_WORK, default ${TMPDIR:-/tmp}/isometry-fuzz/<target>/),
# so runs accumulate coverage without touching fuzz/corpus/. A crash, leak,
# sanitizer report or timeout leaves its input in $ISOMETRY_FUZZ_WORK/
# artifacts/ and makes the script exit 1 after all targets ran.
# To reproduce: build-fuzz/fuzz/<target> <artifact>.
# The targets run $(nproc) at a time (each is one process on one core, for
# SECONDS of wall time); ISOMETRY_FUZZ_BUILD_ONLY=1 only builds them
# (scripts/test.sh builds them early, in its background lane).
set -euo pipefail

seconds=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ISOMETRY_FUZZ_BUILD:-$root/build-fuzz}
work=${ISOMETRY_FUZZ_WORK:-${TMPDIR:-/tmp}/isometry-fuzz}
all=(ring_entry_fuzzer local_frame_fuzzer request_fuzzer layout_fuzzer datatype_text_fuzzer config_fuzzer)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

cxx=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
cc=${FUZZ_CC:-$(command -v clang-14 || command -v clang || true)}
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "fuzz.sh: clang is needed (apt-get install clang-14)" >&2
  exit 2
fi

# Tests off, CUDA off: only the libraries the fuzzers link are built.
# Warnings are errors in the gcc build; clang's own set is not enforced here.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CUDA_COMPILER= \
  -DISOMETRY_FUZZ=ON -DISOMETRY_BUILD_TESTS=OFF -DISOMETRY_WERROR=OFF \
  -DISOMETRY_UNITY_BATCH_SIZE=32 >/dev/null  # from scratch: see scripts/test.sh
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)"

[ "${ISOMETRY_FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# One target: its libFuzzer log in $work/<target>.log, its row of the table
# in $work/<target>.row, a finding as exit 1.
run_target() {
  local t=$1 corpus="$work/$1" log="$work/$1.log" start rc ran runs result
  mkdir -p "$corpus"
  start=$(date +%s)
  set +e
  # -timeout: one input may take 10 s at most (a hang is a finding too).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" "$corpus" "$root/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  ran=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    result="no finding"
  else
    result="FINDING (exit $rc): see $log and $work/artifacts/"
  fi
  printf '%-20s %8s %12s  %s\n' "$t" "$ran" "${runs:-?}" "$result" >"$work/$t.row"
  if [ $rc -ne 0 ]; then
    grep -m3 -E '^==[0-9]+==ERROR|runtime error|fuzz finding|Timeout|deadly signal' "$log" \
      | sed 's/^/    /' >>"$work/$t.row" || true
    return 1
  fi
}

mkdir -p "$work/artifacts"
jobs=$(nproc)
for t in "${targets[@]}"; do
  rm -f "$work/$t.row"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
done
wait
# The verdict comes from the rows (a reaped job's exit status is not kept
# reliably across wait -n): a finding, or a target that left no row, fails.
found=0
printf '%-20s %8s %12s  %s\n' target seconds runs result
for t in "${targets[@]}"; do
  if [ -f "$work/$t.row" ]; then
    cat "$work/$t.row"
    if grep -q FINDING "$work/$t.row"; then found=1; fi
  else
    printf '%-20s %8s %12s  %s\n' "$t" ? ? "NO RESULT (its runner failed)"
    found=1
  fi
done
exit $found
