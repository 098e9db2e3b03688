#!/usr/bin/env bash
# Builds the Debian packages of Isometry (debian/; docs/operations/packages.md)
# and checks them with lintian. Run as root on Debian 12, from anywhere.
#
#   scripts/build-packages.sh [--out DIR] [--worktree] [--chroot-test] [--keep-chroot]
#
#   --out DIR       where the .deb, .buildinfo, .changes, build.log and
#                   lintian.txt go (default: build-deb/ in the repository)
#   --worktree      build the working tree as it is (uncommitted changes
#                   included); default: the committed tree (git archive HEAD)
#   --chroot-test   then install the packages into a fresh Debian 12 chroot
#                   (mmdebstrap), start the installed daemon there as its
#                   user, run isoctl status, a Python copy and a C++ program
#                   built with pkg-config against the installed library,
#                   upgrade isometryd over a changed config and purge it
#   --keep-chroot   leave the chroot in DIR/chroot for a look
#
# Installs what it needs from apt (build dependencies, lintian, mmdebstrap)
# when missing. Prints each step's time; exits non-zero on a failed build,
# a lintian error or warning, or a failed chroot check.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-deb
worktree=0
chroot_test=0
keep_chroot=0
while (($#)); do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift ;;
    --worktree) worktree=1 ;;
    --chroot-test) chroot_test=1 ;;
    --keep-chroot) keep_chroot=1 ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-packages: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

start=$SECONDS
step() { printf '\n== [%dm%02ds] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }
fail() {
  echo "build-packages: FAILED: $*" >&2
  [[ -n "${work:-}" ]] && echo "build-packages: the source and build tree stay in $work" >&2
  exit 1
}

export DEBIAN_FRONTEND=noninteractive
step "build dependencies"
tools=(dpkg-dev debhelper lintian fakeroot)
((chroot_test)) && tools+=(mmdebstrap)
missing=()
for p in "${tools[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
if ! (cd "$root" && dpkg-checkbuilddeps >/dev/null 2>&1); then
  (cd "$root" && apt-get build-dep -y --no-install-recommends ./)
fi

version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
mkdir -p "$out"
work=$(mktemp -d /tmp/isometry-deb.XXXXXX)
src=$work/isometry-$version
mkdir -p "$src"
if ((worktree)) || ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  step "source: the working tree $root"
  tar -C "$root" --exclude='./build*' --exclude='./obj-*' --exclude=./.git \
    --exclude=./.pybuild --exclude='./debian/tmp' -cf - . | tar -x -C "$src"
else
  step "source: git archive HEAD ($(git -C "$root" rev-parse --short HEAD))"
  git -C "$root" archive --format=tar HEAD | tar -x -C "$src"
fi

step "dpkg-buildpackage -b -us -uc (log: $out/build.log)"
build_start=$SECONDS
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.buildinfo "$out"/*.changes
# The system's PATH only: a python3 of pyenv or a venv first on PATH would
# build the Python package for the wrong interpreter (or fail without its
# "build" module).
if ! (cd "$src" && env PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg-buildpackage -b -us -uc -j"$(nproc)") \
  >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  fail "dpkg-buildpackage (see $out/build.log)"
fi
build_s=$((SECONDS - build_start))
cp "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$out"/
cp "$work"/*.ddeb "$out"/ 2>/dev/null || true
ls -l "$out"/*.deb
echo "build: ${build_s} s"

step "lintian (report: $out/lintian.txt)"
changes=$(ls "$out"/*.changes)
set +e
lintian --display-info --show-overrides --fail-on error,warning "$changes" >"$out/lintian.txt" 2>&1
lintian_rc=$?
set -e
cat "$out/lintian.txt"
for kind in E W I O; do
  printf '%s: %s  ' "$kind" "$(grep -c "^$kind: " "$out/lintian.txt" || true)"
done
echo "(O: overridden; each override gives its reason in debian/*.lintian-overrides)"
((lintian_rc == 0)) || fail "lintian reports errors or warnings (rc $lintian_rc)"

if ((chroot_test)); then
  step "chroot test"
  "$root/scripts/package_chroot_test.sh" "$out" "$work/chroot" "$keep_chroot"
fi

((keep_chroot)) || rm -rf "$work"
step "done: packages in $out (build ${build_s} s)"
