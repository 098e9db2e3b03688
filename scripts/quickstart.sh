#!/usr/bin/env bash
# Installs what is missing, builds Isometry in Release, and runs the local
# runtime demo (examples/local_copy) on the embedded default configuration.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DISOMETRY_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j "$(nproc)"
./build-release/examples/local_copy
