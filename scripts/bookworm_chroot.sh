# Sourced by the scripts that make a Debian 12 system with mmdebstrap
# (package_chroot_test.sh, build-image.sh, quickstart_timing.sh): the
# host's Debian mirrors (deb822 or one-line sources), or deb.debian.org,
# as `mirror` and the apt lines `bookworm_sources` to pass to mmdebstrap.
# shellcheck shell=bash
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
security=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep security | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
security=${security:-http://deb.debian.org/debian-security}
# shellcheck disable=SC2034 # used by the scripts that source this
bookworm_sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main"
  "deb $security bookworm-security main")
