#!/usr/bin/env bash
# From a fresh clone to a running isometryd: installs the packages that
# build and run it (scripts/install-deps.sh --quickstart), builds only the
# daemon, isoctl, the clients and the examples (Release; no tests, no
# benchmarks, no CUDA kernels: scripts/test.sh builds those), checks the
# runtime with the local demo, then runs isometryd in the foreground on its
# embedded single-node default config (sockets in /run/isometry). Ctrl-C
# stops it. From another shell: build-release/tools/isoctl/isoctl status
#
# Set ISOMETRY_QUICKSTART_NO_RUN=1 to stop after the demo (timed runs).
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
step() { printf 'quickstart [%3ds] %s\n' "$((SECONDS - start))" "$*"; }

step "1/4 packages (a few minutes on a fresh machine, nothing when present)"
scripts/install-deps.sh --quickstart
step "2/4 configure build-release"
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DISOMETRY_BUILD_TESTS=OFF \
  -DISOMETRY_BUILD_BENCH=OFF -DISOMETRY_CUDA=OFF >/dev/null
step "3/4 build (a few minutes on 2 cores; ninja counts the steps)"
cmake --build build-release -j "$(nproc)"
step "4/4 the local demo"
./build-release/examples/local_copy
step "ready"
if [[ -n "${ISOMETRY_QUICKSTART_NO_RUN:-}" ]]; then
  exit 0
fi
echo "isometryd: embedded default config; try 'build-release/tools/isoctl/isoctl status' from another shell"
exec ./build-release/daemon/isometryd
