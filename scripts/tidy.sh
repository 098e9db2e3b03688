#!/usr/bin/env bash
# clang-tidy with the checked-in .clang-tidy over every translation unit of
# ours (core, layout, config, planner, net, channels, proto's hand-written code,
# daemon, client, tools, tests, examples, fuzz targets), $(nproc) at a time.
# Generated protobuf code and third-party headers are not checked.
# Exits non-zero on any finding (.clang-tidy: WarningsAsErrors '*').
# Usage: scripts/tidy.sh [BUILD_DIR [run-clang-tidy options, e.g. -fix]]
# (BUILD_DIR default build-tidy; configured here, only the generated proto
# headers are built: no compilation needed)
# Cost: a unit that includes gRPC costs several times a small one. Most of
# it is the checks' AST matchers, which walk every declaration of the unit,
# the standard library, gRPC and protobuf included (the header filter only
# drops findings there, after the work), and no check dominates
# (docs/benchmarks/design-measurements.md, "Build and tests"), so none
# is dropped: scripts/test.sh instead runs this script in a background lane
# at nice 19 beside the builds and tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${1:-build-tidy}
shift || true

# clang's own command lines (no g++-only flags for clang-tidy to trip on),
# and the fuzz targets configured too so that fuzz/ is checked.
# Batches of 32 sources, not the build's 8: most of a batch's cost is
# walking the headers it includes, once a batch, so fewer batches cost less
# (docs/benchmarks/design-measurements.md, "Build and tests").
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DISOMETRY_FUZZ=ON -DISOMETRY_UNITY_BATCH_SIZE=32 >/dev/null
# Sources that include the generated stubs need their headers.
ninja -C "$dir" proto/gen/isometry.pb.h proto/gen/isometry.grpc.pb.h \
  proto/gen/isometry_peer.pb.h proto/gen/isometry_peer.grpc.pb.h \
  proto/gen/reflection_v1.pb.h proto/gen/reflection_v1.grpc.pb.h \
  proto/gen/etcd_v3.pb.h proto/gen/etcd_v3.grpc.pb.h >/dev/null

ours='core|layout|config|planner|redistribution|active|procmem|net|channels|proto|daemon|client|tools|tests|examples|fuzz'
# Sources: ours only (the generated .pb.cc live under the build directory).
# Unity batches (ISOMETRY_UNITY_BUILD, on by default): a multi-file target's
# .cc files reach clang-tidy inside the batch files CMake writes
# ($dir/.../Unity/unity_N_cxx.cxx, 8 sources each), and are checked there as
# included files under the header filter. The gRPC, protobuf and standard
# headers a batch includes are then parsed and walked once, not 8 times:
# 8 of daemon/cluster's gRPC units take 26 s of CPU in one batch against
# ~20 s for one of them alone. Two things change for those files:
# bugprone-suspicious-include would flag every line of a batch file (it is
# off; scripts/check_layering.py refuses an #include of a source file in our
# code instead), and misc-unused-using-decls looks at main files only, so it
# covers the one-file targets (examples, fuzz targets, test workers) and a
# run with -DISOMETRY_UNITY_BUILD=OFF, not the libraries and the test
# programs (tests/CMakeLists.txt: unit_tests and integration_tests are
# batches of test files too) in CI.
# CUDA kernels (channels/cuda/*.cu) are left out on purpose: clang-tidy-14
# cannot parse the CUDA 13 headers nvcc compiles them with; their host
# side (*.cc against the runtime API) is checked like everything else.
# Headers: ours only, anchored at this checkout, so that a third-party path
# that happens to contain /config/ or /core/ is never reported.
mapfile -t files < <(/usr/bin/python3 - "$dir/compile_commands.json" "$root" "$ours" <<'PY'
import json, re, sys
db, root, ours = sys.argv[1], sys.argv[2], sys.argv[3]
own = re.compile("^" + re.escape(root) + "/(" + ours + r")/.*\.(cc|cpp)$")
included = re.compile('^#include "' + re.escape(root) + "/(" + ours + ")/", re.M)
for entry in json.load(open(db)):
    path = entry["file"]
    batch = re.search(r"/Unity/unity_[0-9]+_cxx\.cxx$", path)
    if own.match(path) or (batch and included.search(open(path).read())):
        print("^" + re.escape(path) + "$")
PY
)
run-clang-tidy-14 -clang-tidy-binary clang-tidy-14 -p "$dir" -j "$(nproc)" -quiet \
  -checks=-bugprone-suspicious-include -header-filter="^$root/($ours)/" "$@" "${files[@]}"
