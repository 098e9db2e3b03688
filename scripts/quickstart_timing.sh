#!/usr/bin/env bash
# Times the README's quick start on a fresh Debian 12 system: a chroot made
# with mmdebstrap from the host's Debian mirror (Debian's required and
# important packages: what a minimal install has), a fresh clone of this
# repository's HEAD copied into it, then `scripts/quickstart.sh` as root
# there, until `isoctl status` answers the daemon it started
# (docs/benchmarks/README.md, "Quick start", records the runs). As root:
#
#   scripts/quickstart_timing.sh [CHROOT_DIR]    (default /var/tmp/isometry-quickstart)
#
# Prints the quick start's own step lines, the wall and CPU time to `isoctl
# status` answering, and the machine. The chroot is removed afterwards.
# Run it on an otherwise idle machine: it is a measurement.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
c=$(realpath -m "${1:-/var/tmp/isometry-quickstart}")
case "$c/" in "$root"/*) echo "quickstart_timing: CHROOT_DIR must be outside the repository" >&2; exit 2 ;; esac
[[ $(id -u) == 0 ]] || { echo "quickstart_timing: run as root (mmdebstrap, chroot)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || apt-get install -y --no-install-recommends mmdebstrap >/dev/null

fail() { echo "quickstart_timing: FAILED: $*" >&2; exit 1; }
in_chroot() { chroot "$c" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive "$@"; }
daemon=
cleanup() {
  set +e
  if [[ -n "$daemon" ]]; then
    kill "$daemon" 2>/dev/null
    wait "$daemon" 2>/dev/null
  fi
  if release_chroot "$c"; then
    rm -rf "$c"
  else
    echo "quickstart_timing: $c still has mounts; left in place" >&2
  fi
}
trap cleanup EXIT

source "$root/scripts/bookworm_chroot.sh"
echo "== a fresh Debian 12 (mmdebstrap bookworm, required + important, from $mirror)"
make_chroot "$c" important || fail "mmdebstrap"
echo "   $(in_chroot dpkg-query -f '.\n' -W | wc -l) packages installed"

echo "== a fresh clone of HEAD ($(git -C "$root" rev-parse --short HEAD)) in /root/isometry"
git clone --quiet --no-local "$root" "$c/root/isometry"

echo "== scripts/quickstart.sh, timed until isoctl status answers"
isoctl=/root/isometry/build-release/tools/isoctl/isoctl
log=$c/root/quickstart.log
# CPU: the whole machine's busy time over the run (it should be idle
# besides), from /proc/stat's first line, in clock ticks.
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
t0=$(date +%s.%N)
busy0=$(busy)
# exec all the way down, so that $! is the daemon quickstart.sh ends in.
(exec chroot "$c" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  DEBIAN_FRONTEND=noninteractive bash -c 'cd /root/isometry && exec scripts/quickstart.sh' \
  >"$log" 2>&1) &
daemon=$!
answered=
while kill -0 "$daemon" 2>/dev/null; do
  if [[ -x "$c$isoctl" ]] && in_chroot "$isoctl" status >"$c/root/status.txt" 2>&1; then
    answered=$(date +%s.%N)
    break
  fi
  sleep 1
done
grep '^quickstart \[' "$log" | sed 's/^/   /'
[[ -n "$answered" ]] || { tail -30 "$log"; fail "the quick start ended before isoctl status answered"; }
head -3 "$c/root/status.txt" | sed 's/^/   isoctl status: /'
cpu=$(( ($(busy) - busy0) / $(getconf CLK_TCK) ))
wall=$(printf '%.0f' "$(echo "$answered - $t0" | bc)")
printf '== fresh clone to isoctl status answering: %d s (%d min %02d s), %d CPU-seconds on the machine\n' \
  "$wall" $((wall / 60)) $((wall % 60)) "$cpu"
echo "   machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
  "$(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
