#!/usr/bin/env bash
# Installs what is missing, builds Isometry (Release), checks the runtime
# with the local demo, then runs isometryd in the foreground on its
# embedded single-node default config (sockets in /run/isometry). Ctrl-C
# stops it. From another shell: build-release/tools/isoctl/isoctl status
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DISOMETRY_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j "$(nproc)"
./build-release/examples/local_copy
echo "isometryd: embedded default config; try 'build-release/tools/isoctl/isoctl status' from another shell"
exec ./build-release/daemon/isometryd
