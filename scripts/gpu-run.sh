#!/usr/bin/env bash
# Runs the GPU checks from scripts/gpu-bundle.sh's .gpu/bundle.tar.xz on a
# machine with a GPU: every GPU test case (in parallel, 90 s each), then
# gpu_bench (--json), then isometryd on its embedded default config with
# `isoctl channels` and two `isoctl plan`s. Everything goes to OUT_DIR:
# log.txt, gpu_bench.json, daemon.log. Where no GPU is visible the tests
# and gpu_bench exit 77 with the probe's reason, which the log shows.
# Usage: bash .gpu/gpu-run.sh OUT_DIR
set -u
out=${1:?usage: gpu-run.sh OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
exec >>"$out/log.txt" 2>&1
t0=$(date +%s)
say() { echo "=== $* [$(($(date +%s) - t0)) s]"; }
say "start: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
root=$(mktemp -d)
tar -xJf "$here/bundle.tar.xz" -C "$root"
export LD_LIBRARY_PATH=$root/lib
bin=$root/bin
cd "$root"
cases=(
  "[#cuda_channel_test]~[may_skip]" "[#cuda_channel_test][host_device_round_trip]"
  "[#cuda_channel_test][device_to_device]" "[#cuda_channel_test][wrong_endpoints]"
  "[#cuda_channel_test][priority]" "[#gpu_runtime_test][host_gpu_host]"
  "[#gpu_runtime_test][gpu_gpu]" "[#gpu_runtime_test][dsk_fbm]"
  "[#gpu_runtime_test][gpu_priority]" "[#channel_factory_test]" "[#gpu_planner_test]"
  "[#gpu_emulated_test]" "[#cuda_lowering_test]" "[#gpu_config_test]")
# Explicit pids: a bare `wait` would also wait for any process
# substitution of the caller's.
pids=()
for i in "${!cases[@]}"; do
  (timeout 90 "$bin/unit_tests" -# "${cases[$i]}" >"$root/t$i.log" 2>&1
   echo "rc=$?" >>"$root/t$i.log") &
  pids+=($!)
done
wait "${pids[@]}"
for i in "${!cases[@]}"; do
  echo "--- ${cases[$i]}"
  grep -v '\[info\]' "$root/t$i.log" | tail -25
done
say gpu_bench
timeout 120 "$bin/gpu_bench" --json >"$out/gpu_bench.json"
echo "rc=$?"
say isometryd
sock=$root/run
mkdir -p "$sock"
# The embedded default, with its sockets and state under $root.
"$bin/isometryd" --print-default-config |
  sed -e "s|/run/isometry/|$sock/|" -e "s|\"/var/lib/isometry\"|\"$root/state\"|" \
    >"$root/isometryd.toml"
mkdir -p "$root/state"
timeout 40 "$bin/isometryd" --config "$root/isometryd.toml" >"$out/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 30); do [[ -S $sock/grpc.sock ]] && break; sleep 1; done
ctl() { timeout 10 "$bin/isoctl" --socket "$sock/grpc.sock" "$@"; echo "rc=$?"; }
ctl channels
ctl plan sys0 gpu0 --extents 134217728 --fields f:8
ctl plan sys0 gpu0 --extents 4194304 --fields a:4,b:4,c:4,d:4,e:4,f:4,g:4,h:4 \
  --src-layout x,F --dst-layout F,x
kill "$daemon"
wait "$daemon"
grep -E 'GPU|gpu|calibration' "$out/daemon.log" | head -40
say end
