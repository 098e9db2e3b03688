#!/usr/bin/env bash
# Builds the OCI image of isometryd from Debian packages only, and tests it
# (docs/operations/containers.md). Run as root on Debian 12, from anywhere.
#
#   scripts/build-image.sh [--debs DIR] [--out DIR] [--tag NAME] [--uid N]
#                          [--test] [--kube] [--twice] [--no-build]
#
#   --debs DIR   the project's .deb files (default: build-deb/ in the
#                repository, as scripts/build-packages.sh leaves them)
#   --out DIR    rootfs tarball, OCI archive, logs (default:
#                /var/tmp/isometry-image; never inside the repository)
#   --tag NAME   image name (default: localhost/isometry:<package version>)
#   --uid N      uid and gid of the user and group isometry (default 10470)
#   --test       run the image with podman: the daemon in one container,
#                isoctl status and a Python copy from a second container
#                that shares the socket volume as an unprivileged client;
#                then a file round trip through a DSK memory with the
#                daemon under its own seccomp profile (io_uring allowed:
#                deploy/container/isometryd-seccomp.json); then a CMA copy
#                from that client to the daemon run as
#                deploy/kubernetes/overlays/cma runs it
#   --kube       validate deploy/kubernetes offline (kustomize build and the
#                API schemas of python3-kubernetes) and try `podman kube
#                play` of the rendered DaemonSet
#   --twice      build the rootfs twice and compare (reproducibility)
#   --no-build   use the image already built (with --test or --kube)
#
# The rootfs is mmdebstrap's bookworm from the host's Debian mirror plus the
# packages of --debs (their dependencies from the mirror); buildah commits
# it with SOURCE_DATE_EPOCH (default: the date of debian/changelog's top
# entry) as every timestamp. Prints each step's time; exits non-zero on the
# first failure, and says what the machine lacks when podman cannot run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
debs=$root/build-deb
out=/var/tmp/isometry-image
tag=
uid=10470
test=0
kube=0
twice=0
build=1
while (($#)); do
  case "$1" in
    --debs) debs=$(realpath "$2"); shift ;;
    --out) out=$(realpath -m "$2"); shift ;;
    --tag) tag=$2; shift ;;
    --uid) uid=$2; shift ;;
    --test) test=1 ;;
    --kube) kube=1 ;;
    --twice) twice=1 ;;
    --no-build) build=0 ;;
    -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$uid" =~ ^[1-9][0-9]*$ ]] || { echo "build-image: --uid wants a number" >&2; exit 2; }
case "$out/" in "$root"/*) echo "build-image: --out must be outside the repository" >&2; exit 2 ;; esac

start=$SECONDS
step() { printf '\n== [%dm%02ds] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }
fail() { echo "build-image: FAILED: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
mkdir -p "$out"

version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -l "$root/debian/changelog" -S Timestamp)}
tag=${tag:-localhost/isometry:$version}

step "tools"
need=(mmdebstrap buildah podman runc catatonit python3-yaml python3-kubernetes)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) && apt-get install -y --no-install-recommends "${missing[@]}"
echo "podman $(podman --version | awk '{print $3}'), buildah $(buildah --version | awk '{print $3}')," \
  "mmdebstrap $(mmdebstrap --version | awk '{print $2}'), SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"

source "$root/scripts/bookworm_chroot.sh"

# make_rootfs TARBALL: bookworm (essential + apt) with the user isometry at
# a fixed uid/gid made before the packages (systemd-sysusers then keeps
# it), the packages, the container config, and /run/isometry owned by it.
make_rootfs() {
  local tarball=$1 pkgs=() in_chroot=() f p
  for p in isometryd isoctl libisometry-client0 python3-isometry; do
    f=$(ls "$debs/${p}"_*.deb 2>/dev/null | head -1)
    [[ -n "$f" ]] || fail "no package $p in $debs (run scripts/build-packages.sh first)"
    pkgs+=("$f")
    in_chroot+=("/tmp/debs/$(basename "$f")")
  done
  local hooks=(
    --customize-hook="mkdir -p \"\$1/tmp/debs\""
    --customize-hook="copy-in ${pkgs[*]} /tmp/debs"
    --customize-hook="chroot \"\$1\" groupadd --system --gid $uid isometry"
    --customize-hook="chroot \"\$1\" useradd --system --uid $uid --gid $uid --no-create-home \
      --home-dir /var/lib/isometry --shell /usr/sbin/nologin --comment 'Isometry data transfer daemon' isometry"
    # The standalone sysusers and tmpfiles satisfy the packages' need for
    # them without pulling systemd into the image.
    --customize-hook="chroot \"\$1\" apt-get install -y --no-install-recommends \
      systemd-standalone-sysusers systemd-standalone-tmpfiles ${in_chroot[*]}"
    --customize-hook="rm -rf \"\$1/tmp/debs\""
    --customize-hook="copy-in $root/deploy/container/isometryd.toml /etc/isometry"
    --customize-hook="chmod 0644 \"\$1/etc/isometry/isometryd.toml\""
    # Nothing of the build host's network or name: the same tar on any host.
    --customize-hook="rm -f \"\$1/etc/resolv.conf\" \"\$1/etc/hostname\""
    # /run is emptied below, all but the socket directory (the volume's
    # first mount copies its owner and mode).
    --customize-hook="find \"\$1/run\" -mindepth 1 -maxdepth 1 ! -name isometry -exec rm -rf {} +"
    --customize-hook="install -d -m 0750 -o $uid -g $uid \"\$1/run/isometry\" \"\$1/var/lib/isometry\""
  )
  mmdebstrap --variant=apt --quiet --skip=cleanup/run --format=tar "${hooks[@]}" \
    bookworm "$tarball" "${bookworm_sources[@]}" >"$out/mmdebstrap.log" 2>&1 ||
    { tail -30 "$out/mmdebstrap.log"; fail "mmdebstrap (see $out/mmdebstrap.log)"; }
}

if ((build)); then
  step "rootfs: mmdebstrap bookworm + isometryd, isoctl, libisometry-client0, python3-isometry from $debs"
  t0=$SECONDS
  make_rootfs "$out/rootfs.tar"
  echo "rootfs.tar: $(du -h "$out/rootfs.tar" | cut -f1), sha256 $(sha256sum "$out/rootfs.tar" | cut -c1-16)..." \
    "($((SECONDS - t0)) s)"
  if ((twice)); then
    step "rootfs again, for reproducibility"
    make_rootfs "$out/rootfs2.tar"
    if cmp -s "$out/rootfs.tar" "$out/rootfs2.tar"; then
      echo "reproducible: the two rootfs tarballs are identical"
    else
      diff <(tar -tvf "$out/rootfs.tar" | sort -k6) <(tar -tvf "$out/rootfs2.tar" | sort -k6) | head -20 || true
      fail "the two rootfs tarballs differ"
    fi
    rm -f "$out/rootfs2.tar"
  fi

  step "image: buildah commit --timestamp $SOURCE_DATE_EPOCH -> $tag"
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah add --quiet "$ctr" "$out/rootfs.tar" / >/dev/null
  buildah config \
    --user "$uid:$uid" \
    --workingdir /var/lib/isometry \
    --env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    --env ISOMETRY_SOCKET=/run/isometry/grpc.sock \
    --cmd '["/usr/sbin/isometryd", "--config", "/etc/isometry/isometryd.toml"]' \
    --port 9464/tcp \
    --volume /run/isometry \
    --stop-signal SIGTERM \
    --label org.opencontainers.image.title=isometry \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.description="isometryd, isoctl and the Python client from Debian packages" \
    --label io.isometry.uid="$uid" \
    "$ctr"
  buildah commit --quiet --format oci --timestamp "$SOURCE_DATE_EPOCH" --rm "$ctr" "$tag" >"$out/image-id"
  trap - EXIT
  rm -f "$out/isometry-oci.tar"
  podman save --quiet --format oci-archive -o "$out/isometry-oci.tar" "$tag"
  echo "image $tag: id $(cut -c1-19 "$out/image-id"), $(podman image inspect "$tag" --format '{{.Size}}' |
    awk '{printf "%.0f MiB", $1 / 1048576}'), OCI archive $out/isometry-oci.tar"
fi
podman image exists "$tag" || fail "no image $tag (build it first: drop --no-build)"

# What `podman run` needs on this machine: a hard RLIMIT_NOFILE/NPROC below
# podman's defaults (no CAP_SYS_RESOURCE to raise them) needs --ulimit at
# or under the host's; crun refuses a cgroup v1/v2 hybrid, runc does not.
run_opts=()
if ! grep -qw cgroup2 <(stat -f -c %T /sys/fs/cgroup) && [[ -d /sys/fs/cgroup/unified ]]; then
  run_opts+=(--runtime runc)
fi
nofile=$(ulimit -Hn)
if [[ "$nofile" != unlimited ]] && ((nofile < 1048576)); then
  run_opts+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=8192:8192")
fi

if ((test)); then
  step "podman: the daemon in one container, clients in another (options: ${run_opts[*]:-none})"
  vol=isometry-run-test
  cleanup_test() {
    podman rm -f -t 3 isometry-test-daemon >/dev/null 2>&1 || true
    podman volume rm -f "$vol" >/dev/null 2>&1 || true
  }
  cleanup_test
  trap cleanup_test EXIT
  podman volume create "$vol" >/dev/null
  podman run -d --name isometry-test-daemon "${run_opts[@]}" -v "$vol:/run/isometry" "$tag" >/dev/null ||
    fail "podman run of the daemon (see the podman error above; docs/operations/containers.md)"
  client=(podman run --rm -i "${run_opts[@]}" -v "$vol:/run/isometry" --user 1000:1000 --group-add "$uid" "$tag")
  up=0
  for _ in $(seq 60); do
    if podman exec isometry-test-daemon test -S /run/isometry/grpc.sock 2>/dev/null &&
      podman exec isometry-test-daemon test -S /run/isometry/isometry.sock 2>/dev/null; then
      up=1; break
    fi
    [[ "$(podman inspect -f '{{.State.Running}}' isometry-test-daemon)" == true ]] || break
    sleep 0.5
  done
  ((up)) || { podman logs isometry-test-daemon | tail -30; fail "isometryd did not come up"; }
  duid=$(stat -c %u "/proc/$(podman inspect -f '{{.State.Pid}}' isometry-test-daemon)")
  [[ "$duid" == "$uid" ]] || fail "isometryd runs as uid $duid, not isometry ($uid)"
  echo "isometryd up, as uid $duid (isometry), sockets in the volume $vol"
  podman exec isometry-test-daemon stat -c '%U:%G %a %n' /run/isometry/grpc.sock /run/isometry/isometry.sock
  "${client[@]}" isoctl status >"$out/status.txt" 2>&1 || { cat "$out/status.txt"; fail "isoctl status"; }
  sed 's/^/    /' "$out/status.txt" | head -14
  echo "isoctl status from a second container (uid 1000, group $uid): ok"
  if podman run --rm "${run_opts[@]}" -v "$vol:/run/isometry" --user 1001:1001 "$tag" \
    isoctl status >/dev/null 2>&1; then
    fail "a client outside the group isometry could connect"
  fi
  echo "a second container without the group isometry is refused: ok"
  "${client[@]}" python3 - <"$root/deploy/container/copy_check.py" || fail "Python copy"
  podman stop -t 10 isometry-test-daemon >/dev/null
  rc=$(podman inspect -f '{{.State.ExitCode}}' isometry-test-daemon)
  podman logs isometry-test-daemon >"$out/isometryd.log" 2>&1
  ((rc == 0)) || { tail -20 "$out/isometryd.log"; fail "isometryd exited $rc on SIGTERM"; }
  echo "podman stop: isometryd exited 0 (log: $out/isometryd.log)"

  # io_uring: podman's default seccomp profile refuses it (the disk
  # channels are then absent); the daemon's own profile, its unit's
  # system-call list (scripts/seccomp_profile.py), allows it.
  # A DSK memory on a volume, a file round trip from the client container.
  if grep -q "io_uring refused" "$out/isometryd.log"; then
    echo "under podman's default seccomp profile: $(grep -o 'channel kind disk_read: absent[^"]*' \
      "$out/isometryd.log" | head -1 | cut -c1-110)"
  fi
  podman rm -f isometry-test-daemon >/dev/null
  podman volume rm -f "$vol" isometry-files-test >/dev/null 2>&1 || true
  podman volume create "$vol" >/dev/null
  { cat "$root/deploy/container/isometryd.toml"
    printf '\n[[memory]]\nname = "dsk0"\nkind = "DSK"\ndirectory = "/srv/isometry"\n'
    printf '\n[[channel]]\nname = "disk_read0"\nkind = "disk_read"\n'
    printf '\n[[channel]]\nname = "disk_write0"\nkind = "disk_write"\n'; } >"$out/isometryd-dsk.toml"
  chmod 0644 "$out/isometryd-dsk.toml"
  profile=$root/deploy/container/isometryd-seccomp.json
  "$root/scripts/seccomp_profile.py" --check "$profile" ||
    fail "the seccomp profile is stale"
  podman run -d --name isometry-test-daemon "${run_opts[@]}" -v "$vol:/run/isometry" \
    -v isometry-files-test:/srv/isometry:U -v "$out/isometryd-dsk.toml:/etc/isometry/dsk.toml:ro" \
    --security-opt seccomp="$profile" "$tag" /usr/sbin/isometryd --config /etc/isometry/dsk.toml \
    >/dev/null || fail "podman run of the daemon under its seccomp profile"
  for _ in $(seq 60); do
    podman exec isometry-test-daemon test -S /run/isometry/grpc.sock 2>/dev/null && break
    sleep 0.5
  done
  podman logs isometry-test-daemon >"$out/isometryd-seccomp.log" 2>&1
  if grep -q "io_uring refused" "$out/isometryd-seccomp.log"; then
    tail -20 "$out/isometryd-seccomp.log"; fail "io_uring refused under the daemon's seccomp profile"
  fi
  echo "under deploy/container/isometryd-seccomp.json: $(grep -o 'channel kind disk_read: [a-z]*' \
    "$out/isometryd-seccomp.log" | head -1)"
  "${client[@]}" python3 - <"$root/deploy/container/disk_check.py" ||
    { podman logs isometry-test-daemon | tail -20; fail "DSK copy under the seccomp profile"; }
  podman stop -t 10 isometry-test-daemon >/dev/null
  rc=$(podman inspect -f '{{.State.ExitCode}}' isometry-test-daemon)
  podman logs isometry-test-daemon >"$out/isometryd-seccomp.log" 2>&1
  ((rc == 0)) || { tail -20 "$out/isometryd-seccomp.log"; fail "isometryd exited $rc under the profile"; }
  if grep -qiE "operation not permitted|EPERM" "$out/isometryd-seccomp.log"; then
    grep -iE "operation not permitted|EPERM" "$out/isometryd-seccomp.log" | head -5
    fail "a system call was refused under the seccomp profile"
  fi
  echo "podman stop: isometryd exited 0 under its seccomp profile, no call refused"
  podman volume rm -f isometry-files-test >/dev/null

  # CMA as deploy/kubernetes/overlays/cma runs it: the host's pid namespace,
  # root with four capabilities, setpriv to isometry keeping two ambient.
  podman rm -f isometry-test-daemon >/dev/null
  podman volume rm -f "$vol" >/dev/null && podman volume create "$vol" >/dev/null
  { cat "$root/deploy/container/isometryd.toml"
    printf '\n[[channel]]\nname = "cma0"\nkind = "cma"\nthreads = 2\n'; } >"$out/isometryd-cma.toml"
  chmod 0644 "$out/isometryd-cma.toml"
  podman run -d --name isometry-test-daemon "${run_opts[@]}" -v "$vol:/run/isometry" \
    -v "$out/isometryd-cma.toml:/etc/isometry/cma.toml:ro" --pid host --user 0 --cap-drop ALL \
    --cap-add SETUID,SETGID,SYS_PTRACE,DAC_OVERRIDE --security-opt no-new-privileges "$tag" \
    /usr/bin/setpriv --reuid="$uid" --regid="$uid" --clear-groups \
    --inh-caps=-all,+sys_ptrace,+dac_override --ambient-caps=-all,+sys_ptrace,+dac_override -- \
    /usr/sbin/isometryd --config /etc/isometry/cma.toml >/dev/null
  for _ in $(seq 60); do
    podman exec isometry-test-daemon test -S /run/isometry/isometry.sock 2>/dev/null && break
    sleep 0.5
  done
  dpid=$(podman inspect -f '{{.State.Pid}}' isometry-test-daemon)
  echo "CMA daemon: $(grep -E '^(Uid|CapEff|CapAmb|NoNewPrivs)' "/proc/$dpid/status" | tr -s '\t' ' ' | paste -sd';')"
  [[ "$(stat -c %u "/proc/$dpid")" == "$uid" ]] || fail "the CMA daemon does not run as isometry"
  "${client[@]}" python3 - <"$root/deploy/container/cma_check.py" ||
    { podman logs isometry-test-daemon | tail -20; fail "CMA copy"; }
  cleanup_test
  trap - EXIT
fi

if ((kube)); then
  step "Kubernetes manifests: kustomize build, schema check"
  "$root/deploy/kubernetes/validate.sh" --out "$out" || fail "manifest validation"
  step "podman kube play of the rendered DaemonSet (what podman $(podman --version | awk '{print $3}') accepts)"
  if podman kube play --help 2>/dev/null | grep -q -- '--replace'; then
    "$root/deploy/kubernetes/podman_play.sh" "$out" "$tag" "$uid" "${run_opts[@]}" ||
      fail "podman kube play"
  else
    echo "podman has no 'kube play' (podman 4.3: 'play kube')"
  fi
fi
step "done ($((SECONDS - start)) s)"
