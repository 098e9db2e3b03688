#!/usr/bin/env bash
# Runs a command against a private isometryd: run_with_daemon.sh ISOMETRYD CMD...
# The command finds the daemon through ISOMETRY_LOCAL_SOCKET and
# ISOMETRY_SOCKET (gRPC). The daemon must exit 0 on SIGTERM afterwards.
set -euo pipefail
daemon=$1; shift
dir=$(mktemp -d /tmp/isometry-run-XXXXXX)
trap 'kill -9 "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/isometryd.toml" <<TOML
[daemon]
local_socket = "$dir/local.sock"
grpc_socket = "$dir/grpc.sock"
state_dir = "$dir/state"
log_level = "warn"
calibrate = false
[[memory]]
name = "sys0"
pool = "256MiB"
[[channel]]
name = "memcpy0"
TOML
"$daemon" -c "$dir/isometryd.toml" &
pid=$!
for _ in $(seq 500); do [[ -S "$dir/grpc.sock" && -S "$dir/local.sock" ]] && break; sleep 0.01; done
export ISOMETRY_LOCAL_SOCKET="$dir/local.sock" ISOMETRY_SOCKET="$dir/grpc.sock"
status=0
"$@" || status=$?
kill -TERM "$pid"
wait "$pid" || { echo "isometryd exited with $? on SIGTERM" >&2; exit 1; }
exit "$status"
