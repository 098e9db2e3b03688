#!/usr/bin/env bash
# Installs the Debian 12 packages Isometry needs. Idempotent: packages
# already present are left alone, and apt is not even asked when nothing is
# missing. Run as root (or through sudo).
#
#   scripts/install-deps.sh               everything: build, tests, fuzzing,
#                                         benchmarks and their peers
#   scripts/install-deps.sh --quickstart  only what builds and runs isometryd,
#                                         isoctl and the C++ and Python clients
#                                         (scripts/quickstart.sh: a fraction
#                                         of the download)
set -euo pipefail

case "${1:-}" in
  "") quickstart=0 ;;
  --quickstart) quickstart=1 ;;
  -h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "install-deps: unknown option '$1' (see --help)" >&2
    exit 2
    ;;
esac

# What builds and runs the daemon, isoctl and the clients.
packages=(
  # toolchain
  build-essential g++ cmake ninja-build pkg-config git
  lld                             # the linker (ISOMETRY_LINKER; docs/guides/install.md, "Build options")
  # wire contract and services
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3-grpcio python3-protobuf
  pybind11-dev python3-pybind11 python3-dev  # the Python client's native extension (isometry._native)
  # channels
  liburing-dev libibverbs-dev
  # daemon plumbing
  libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev libsystemd-dev libxxhash-dev
  nlohmann-json3-dev              # isoctl's --json
  libyaml-dev                     # isoctl's -o yaml (libyaml's emitter)
  libncurses-dev                  # isoctl top's full screen
  help2man                        # man pages from --help
  libssl-dev                      # cluster TLS and HMACs
)
# What the tests, fuzzing and benchmarks add.
if ((quickstart == 0)); then
  packages+=(
    clang-format clang-tidy librdmacm-dev
    # fuzzing (scripts/fuzz.sh): clang 14 with libFuzzer and the sanitizers
    clang-14 libclang-rt-14-dev
    openssl                         # scripts/make-test-ca.sh (TLS tests)
    # tests (iproute2: ip netns, veth and tc for the two-host cluster test;
    # nftables: a port blocked between the two hosts)
    catch2 python3-pytest iproute2 nftables
    python3-seccomp strace          # the unit's syscall filter, run for real (unit_syscalls_test)
    python3-numpy                   # NumPy views of mapped allocations (test_python_native)
    python3-torch                   # torch.from_dlpack of a mapped allocation (test_python_native)
    python3-mypy                    # mypy --strict over the Python client and a typed example (python_types)
    python3-venv python3-setuptools # pip install of the Python client into a venv (python_pip_install)
    zsh fish                        # isoctl's completion scripts, checked by isoctl_test
    python3-pyte                    # the terminal emulator top_screen_test reads isoctl top with
    python3-yaml                    # reads isoctl -o yaml back (isoctl_output_test)
    etcd-server etcd-client         # [cluster.etcd] membership (tests/cluster/test_cluster_etcd.py)
    prometheus                      # promtool and a real Prometheus for the alert rules (test_prometheus)
    # benchmark peers (measured in the same run as Isometry)
    ucx-utils libucx-dev mpich libmpich-dev openmpi-bin libopenmpi-dev fio iperf3
    # ScaLAPACK pdgemr2d, the M:N redistribution reference (tests and benchmarks only)
    libscalapack-mpich-dev
    # benchmark charts (tools/bench/plot.py)
    python3-matplotlib
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
