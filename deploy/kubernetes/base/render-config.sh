#!/bin/sh
# Renders isometryd.toml.in for this node (the DaemonSet's init container
# "config"): NODE_NAME and HOST_IP come from the downward API; ISOMETRY_CMA=1
# (the cma overlay) adds the CMA channel; ISOMETRY_DSK_DIR (the disk
# overlay) adds the DSK memory dsk0 on that directory with its disk_read and
# disk_write channels; ISOMETRY_NODE_ID, when set,
# replaces the id made from the IPv4 address. Then checks the result with
# isometryd --check-config, so a bad config stops the pod before the daemon.
#
#   render-config.sh TEMPLATE OUTPUT
set -eu
[ $# -eq 2 ] || { echo "usage: render-config.sh TEMPLATE OUTPUT" >&2; exit 2; }
: "${NODE_NAME:?NODE_NAME unset (downward API spec.nodeName)}"
: "${HOST_IP:?HOST_IP unset (downward API status.hostIP)}"
id=${ISOMETRY_NODE_ID:-}
if [ -z "$id" ]; then
  case "$HOST_IP" in
    *.*.*.*)
      id=$(echo "$HOST_IP" | awk -F. '{ print $2 * 65536 + $3 * 256 + $4 }') ;;
    *)
      echo "render-config: $HOST_IP is not IPv4: set ISOMETRY_NODE_ID per node" >&2
      exit 1 ;;
  esac
fi
cma=
if [ "${ISOMETRY_CMA:-0}" = 1 ]; then
  cma='[[channel]]
name = "cma0"
kind = "cma"
threads = 2'
fi
dsk=
if [ -n "${ISOMETRY_DSK_DIR:-}" ]; then
  case "$ISOMETRY_DSK_DIR" in
    /*) ;;
    *) echo "render-config: ISOMETRY_DSK_DIR must be an absolute path" >&2; exit 1 ;;
  esac
  case "$ISOMETRY_DSK_DIR" in
    *'"'* | *'\\'*) echo "render-config: ISOMETRY_DSK_DIR may not hold quotes or backslashes" >&2; exit 1 ;;
  esac
  # Made here (as isometry, in its own state hostPath) when missing:
  # --check-config wants an existing, writable directory.
  mkdir -p -m 0750 "$ISOMETRY_DSK_DIR"
  dsk="[[memory]]
name = \"dsk0\"
kind = \"DSK\"
directory = \"$ISOMETRY_DSK_DIR\"

[[channel]]
name = \"disk_read0\"
kind = \"disk_read\"

[[channel]]
name = \"disk_write0\"
kind = \"disk_write\""
fi
# awk, not sed: the blocks span lines.
awk -v name="$NODE_NAME" -v id="$id" -v ip="$HOST_IP" -v cma="$cma" -v dsk="$dsk" '{
  gsub(/@NODE_NAME@/, name); gsub(/@NODE_ID@/, id); gsub(/@HOST_IP@/, ip)
  if ($0 == "@CMA_CHANNEL@") $0 = cma
  if ($0 == "@DSK_MEMORY@") $0 = dsk
  print
}' "$1" >"$2.tmp"
mv "$2.tmp" "$2"
echo "render-config: node $NODE_NAME, runtime.node $id, address $HOST_IP, cma ${ISOMETRY_CMA:-0}, dsk ${ISOMETRY_DSK_DIR:-none}"
exec /usr/sbin/isometryd --config "$2" --check-config
