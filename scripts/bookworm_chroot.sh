# Sourced by the scripts that make a Debian 12 system with mmdebstrap
# (package_chroot_test.sh, build-image.sh, quickstart_timing.sh):
#   mirror, bookworm_sources  the host's Debian mirrors (deb822 or one-line
#                             sources), or deb.debian.org, as apt lines for
#                             mmdebstrap
#   make_chroot DIR VARIANT   a fresh bookworm in DIR, with /proc, /sys,
#                             /dev and /dev/pts mounted and no service
#                             started by maintainer scripts (no init runs)
#   release_chroot DIR        unmounts those; fails while any mount remains
#                             under DIR, so a caller never removes through
#                             one (/dev is the host's)
# shellcheck shell=bash
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
security=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep security | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
security=${security:-http://deb.debian.org/debian-security}
# shellcheck disable=SC2034 # used by the scripts that source this
bookworm_sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main"
  "deb $security bookworm-security main")

make_chroot() {
  local dir=$1 variant=$2
  rm -rf "$dir"
  mmdebstrap --variant="$variant" --quiet bookworm "$dir" "${bookworm_sources[@]}" || return 1
  mount -t proc proc "$dir/proc"
  mount --bind /sys "$dir/sys"
  mount --bind /dev "$dir/dev"
  mount --bind /dev/pts "$dir/dev/pts"
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod +x "$dir/usr/sbin/policy-rc.d"
}

release_chroot() {
  local dir=$1 m
  for m in dev/pts dev sys proc; do
    if mountpoint -q "$dir/$m"; then umount -l "$dir/$m"; fi
  done
  ! grep -q " $dir/" /proc/mounts
}
