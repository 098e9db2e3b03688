#!/usr/bin/env bash
# Packs what a GPU check needs into .gpu/ (ignored by git): the Release
# build's unit_tests, isometryd, isoctl and gpu_bench, the shared libraries
# they load (not glibc's: the GPU machine's own is used), and
# scripts/gpu-run.sh. Build with CUDA first (scripts/quickstart.sh or
# cmake -B build-release with nvcc found). Then, on a machine with a GPU
# and an x86-64 Linux whose glibc is at least this one's:
#   bash .gpu/gpu-run.sh OUT_DIR
# (with this workplace's device tool: carry [".gpu"], command
# 'bash .gpu/gpu-run.sh $OUT'). Usage: scripts/gpu-bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release}
ninja -C "$build" unit_tests isometryd isoctl gpu_bench >/dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .gpu
cp "$build/tests/unit_tests" "$build/daemon/isometryd" "$build/tools/isoctl/isoctl" \
  "$build/tools/bench/gpu_bench" "$stage/bin/"
# unit_tests keeps its symbols, for a debugger's backtrace there.
strip --strip-unneeded "$stage/bin/isometryd" "$stage/bin/isoctl" "$stage/bin/gpu_bench"
for f in "$stage"/bin/*; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf .gpu/bundle.tar.xz bin lib
cp scripts/gpu-run.sh .gpu/
echo "gpu-bundle: .gpu/bundle.tar.xz ($(du -h .gpu/bundle.tar.xz | cut -f1)) and .gpu/gpu-run.sh"
