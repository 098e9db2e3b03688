#!/usr/bin/env bash
# The installed packages in a clean Debian 12 (scripts/build-packages.sh
# --chroot-test; docs/operations/packages.md). As root:
#
#   scripts/package_chroot_test.sh DEBS_DIR CHROOT_DIR [KEEP]
#
# Makes CHROOT_DIR with mmdebstrap from the host's Debian mirror, installs
# the packages of DEBS_DIR there with apt (their dependencies from the
# mirror), then, with no systemd running: the isometry user and directories
# exist; the installed isometryd runs as that user on the installed config;
# isoctl status answers; as a user in the group isometry, a Python copy
# through the daemon is right and a C++ program built with pkg-config
# against libisometry-client-dev copies and is linked to
# libisometry-client.so.0; a newer isometryd installed over a
# changed config keeps the change; purge removes the config, the user,
# the group, /var/lib/isometry and /run/isometry. Any failure exits 1.
# Single quotes below pass ${Version} and $(pkg-config ...) to the chroot unexpanded.
# shellcheck disable=SC2016
set -euo pipefail

debs=$(realpath "$1")
c=$(realpath -m "$2")
keep=${3:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
export DEBIAN_FRONTEND=noninteractive

start=$SECONDS
say() { printf '  [%dm%02ds] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }
fail() { echo "chroot test: FAILED: $*" >&2; exit 1; }
in_chroot() { chroot "$c" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive "$@"; }

daemon_pid=
cleanup() {
  set +e
  if [[ -n "$daemon_pid" ]]; then
    kill "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
  fi
  if ! release_chroot "$c"; then
    echo "chroot test: $c still has mounts; left in place" >&2
  elif ((!keep)); then
    rm -rf "$c"
  fi
}
trap cleanup EXIT

source "$root/scripts/bookworm_chroot.sh"
say "mmdebstrap bookworm from $mirror"
make_chroot "$c" apt || fail "mmdebstrap"
mkdir -p "$c/tmp/debs"
cp "$debs"/*.deb "$c/tmp/debs/"
rm -f "$c"/tmp/debs/*-dbgsym_*.deb

say "apt-get install the packages (and g++, pkgconf to build a program against them)"
in_chroot apt-get update -q >/dev/null
debs_in_chroot=()
for p in isometryd isoctl libisometry-client0 libisometry-client-dev python3-isometry; do
  f=$(ls "$c/tmp/debs/${p}"_*.deb) || fail "no package $p in $debs"
  debs_in_chroot+=("/tmp/debs/$(basename "$f")")
done
in_chroot apt-get install -y -q --no-install-recommends g++ pkgconf "${debs_in_chroot[@]}" \
  >"$c/tmp/install.log" 2>&1 || { tail -30 "$c/tmp/install.log"; fail "install"; }

in_chroot getent passwd isometry >/dev/null || fail "no user isometry after install"
uid=$(in_chroot id -u isometry)
for d in /var/lib/isometry /run/isometry; do
  [[ "$(stat -c %u "$c$d" 2>/dev/null)" == "$uid" ]] || fail "$d missing or not the user's"
done
[[ -f "$c/etc/isometry/isometryd.toml" ]] || fail "no /etc/isometry/isometryd.toml"
grep -qx /etc/isometry/isometryd.toml "$c/var/lib/dpkg/info/isometryd.conffiles" ||
  fail "the config is not a conffile"
say "installed: user isometry, its directories, the config as a conffile"

start_daemon() {
  rm -f "$c"/run/isometry/*.sock  # a stale socket must not pass for a live daemon
  chroot "$c" /usr/bin/setpriv --reuid=isometry --regid=isometry --init-groups \
    /usr/sbin/isometryd --config /etc/isometry/isometryd.toml >"$c/tmp/isometryd.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do
    [[ -S "$c/run/isometry/grpc.sock" && -S "$c/run/isometry/isometry.sock" ]] && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.2
  done
  cat "$c/tmp/isometryd.log"
  fail "isometryd did not come up"
}
stop_daemon() {
  kill "$daemon_pid"
  wait "$daemon_pid" || true
  daemon_pid=
}

start_daemon
[[ "$(stat -c %u "/proc/$daemon_pid")" == "$uid" ]] || fail "isometryd does not run as isometry"
say "isometryd runs as the user isometry (uid $uid)"
in_chroot isoctl status >"$c/tmp/status.txt" 2>&1 || { cat "$c/tmp/status.txt"; fail "isoctl status"; }
sed 's/^/    /' "$c/tmp/status.txt" | head -12

cat >"$c/tmp/first_copy.py" <<'EOF'
import struct
from isometry import Client

N = 1000
ENTRY = struct.Struct("<idB")
with Client("/run/isometry/grpc.sock", name="chroot-test") as c:
    src = c.allocate("sys0", N * ENTRY.size)
    dst = c.allocate("sys0", N * ENTRY.size)
    c.write(src, 0, b"".join(ENTRY.pack(i, i * 0.5, i % 251) for i in range(N)))
    fields = [("id", 4), ("mass", 8), ("flag", 1)]
    aos = c.register_instance(src, [N], fields, "F,x")
    soa = c.register_instance(dst, [N], fields, "x,F")
    info = c.copy(aos, soa, wait=True)
    ids = struct.unpack_from(f"<{N}i", c.read(dst, 0, soa.total_bytes), 0)
    assert list(ids) == list(range(N)), "wrong ids"
    print(f"python copy: {info.bytes} bytes via {info.path or 'direct'}")
EOF
# The clients run as an ordinary user in the group isometry, as on a node
# (the sockets are 0660, group isometry).
in_chroot useradd --create-home --groups isometry alice
as_alice() { in_chroot setpriv --reuid=alice --regid=alice --init-groups "$@"; }
as_alice python3 /tmp/first_copy.py || fail "python copy (as alice, in group isometry)"

cp "$root/tests/install/consumer/consumer.cc" "$c/tmp/consumer.cc"
in_chroot sh -c 'g++ -O1 /tmp/consumer.cc -o /tmp/consumer $(pkg-config --cflags --libs isometry-client)' ||
  fail "building a C++ program with pkg-config isometry-client"
in_chroot readelf -d /tmp/consumer 2>/dev/null | grep -q 'libisometry-client.so.0' ||
  in_chroot ldd /tmp/consumer | grep -q 'libisometry-client.so.0' || fail "consumer not linked to libisometry-client.so.0"
as_alice /tmp/consumer /run/isometry/isometry.sock /run/isometry/grpc.sock | sed 's/^/  C++ consumer: /'
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "C++ consumer (as alice)"
stop_daemon

# An upgrade: the same isometryd repacked as a newer version, installed
# over a config the operator changed. dpkg keeps the change (the shipped
# config did not change; had it, dpkg would ask, or keep it with
# --force-confold).
echo "# changed by the chroot test" >>"$c/etc/isometry/isometryd.toml"
old=$(in_chroot dpkg-query -W -f='${Version}' isometryd)
new="$old+upgradetest1"
rm -rf "$c/tmp/repack" && mkdir -p "$c/tmp/new"
dpkg-deb -R "$c"/tmp/debs/isometryd_*.deb "$c/tmp/repack"
sed -i "s/^Version: .*/Version: $new/" "$c/tmp/repack/DEBIAN/control"
newer=/tmp/new/isometryd_${new}_$(dpkg --print-architecture).deb
dpkg-deb -b "$c/tmp/repack" "$c$newer" >/dev/null
in_chroot apt-get install -y -q "$newer" </dev/null >"$c/tmp/upgrade.log" 2>&1 ||
  { tail -20 "$c/tmp/upgrade.log"; fail "upgrade"; }
[[ "$(in_chroot dpkg-query -W -f='${Version}' isometryd)" == "$new" ]] || fail "not upgraded to $new"
grep -qx "# changed by the chroot test" "$c/etc/isometry/isometryd.toml" || fail "upgrade lost the config change"
start_daemon
in_chroot isoctl status >/dev/null 2>&1 || fail "isoctl status after the upgrade"
stop_daemon
say "upgrade $old -> $new kept the changed config; the daemon starts again"

in_chroot apt-get purge -y -q isometryd >"$c/tmp/purge.log" 2>&1 || { tail -20 "$c/tmp/purge.log"; fail "purge"; }
in_chroot getent passwd isometry >/dev/null && fail "user isometry left after purge"
in_chroot getent group isometry >/dev/null && fail "group isometry left after purge"
for p in /var/lib/isometry /run/isometry /etc/isometry/isometryd.toml; do
  [[ -e "$c$p" ]] && fail "$p left after purge"
done
say "purge removed the config, user, group, state and runtime directories"
say "chroot test passed"
