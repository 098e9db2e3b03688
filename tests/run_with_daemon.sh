#!/usr/bin/env bash
# Runs a command against a private isometryd: run_with_daemon.sh ISOMETRYD CMD...
# The command finds the daemon through ISOMETRY_LOCAL_SOCKET and
# ISOMETRY_SOCKET (gRPC). The daemon must exit 0 on SIGTERM afterwards.
# The [daemon] section comes from isometry_daemon_config ($ISOMETRY_DAEMON_CONFIG,
# else next to the daemon in the build tree), as for every other launcher.
set -euo pipefail
daemon=$1; shift
config_tool=${ISOMETRY_DAEMON_CONFIG:-$(dirname "$(dirname "$daemon")")/tools/common/isometry_daemon_config}
dir=$(mktemp -d /tmp/isometry-run-XXXXXX)
pid=""
trap 'kill -9 "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$config_tool" --dir "$dir" --log-level warn --shutdown-grace-ms default > "$dir/isometryd.toml"
cat >> "$dir/isometryd.toml" <<TOML
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
