"""The unit's SystemCallFilter= against the real daemon. isometryd runs
under a seccomp filter that allows exactly what systemd/isometryd.service
allows (tests/install/syscall_filter.py: the groups expanded by
systemd-analyze, any other call kills the process) and does real work: local
copies with `isoctl copy --verify`, DSK file copies both ways (io_uring), a
copy between two processes' private ranges (CMA: process_vm_readv/writev
through a pidfd), a copy between two daemons on loopback, `isoctl status`
and GET /metrics. Every copy must be byte-exact and every daemon alive at
the end, so a call dropped from the unit fails here (not first in
production).

Release lane only (tests/CMakeLists.txt): a sanitizer runtime makes calls
of its own. Exits 77 with the reason when systemd-analyze or
python3-seccomp is missing.

ISOMETRY_SYSCALL_TRACE=FILE runs the daemons under `strace -f -c` instead
of the filter and writes the calls they made to FILE.PID: how the unit's
list was found (docs/operations/systemd.md, "System calls").
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyfixture"))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
from isometryd_process import IsometrydProcess, daemon_section  # noqa: E402
from ports import free_port  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
BUILD_DIR = os.environ.get("ISOMETRY_BUILD_DIR", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
TRACE = os.environ.get("ISOMETRY_SYSCALL_TRACE", "")
LAUNCHER = os.path.join(HERE, "syscall_filter.py")
PRIVATE_PEER = os.path.join(HERE, "..", "python", "private_peer.py")
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "128MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"
staging = "32MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"

[[channel]]
name = "cma0"
kind = "cma"

[metrics]
listen = "127.0.0.1:{metrics_port}"
"""
BYTE = [("v", 1)]


def unit_path():
    """The unit as installed (configured); ISOMETRY_UNIT overrides it."""
    return os.environ.get("ISOMETRY_UNIT") or os.path.join(BUILD_DIR, "systemd",
                                                           "isometryd.service")


def why_skip():
    """None when the test can run, else why not."""
    if not (ISOMETRYD and BUILD_DIR and PYTHONPATH):
        return "ISOMETRYD, ISOMETRY_BUILD_DIR and ISOMETRY_PYTHONPATH are not set (ctest sets them)"
    if TRACE:
        return None if shutil.which("strace") else "ISOMETRY_SYSCALL_TRACE needs strace"
    if not shutil.which("systemd-analyze"):
        return "no systemd-analyze on this machine (Debian's systemd package)"
    probe = subprocess.run(["/usr/bin/python3", "-c", "import seccomp"], capture_output=True)
    if probe.returncode != 0:
        return "no python3-seccomp (scripts/install-deps.sh installs it)"
    return None


def filtered_daemon(directory):
    """A script that runs isometryd under the unit's filter (or strace): the
    fixtures take it for the daemon binary."""
    script = os.path.join(directory, "isometryd-filtered")
    if TRACE:
        inner = f'exec strace -D -f -qq -c -U name,calls -o "{TRACE}.$$" "{ISOMETRYD}" "$@"'
    else:
        inner = f'exec /usr/bin/python3 "{LAUNCHER}" --unit "{unit_path()}" -- "{ISOMETRYD}" "$@"'
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n{inner}\n")
    os.chmod(script, stat.S_IRWXU)
    return script


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       timeout=120, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


class UnitSyscallFilterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = why_skip()
        if reason:
            raise unittest.SkipTest(reason)
        if PYTHONPATH not in sys.path:
            sys.path.insert(0, PYTHONPATH)
        # isometry_daemon_config lives beside the real binary, not the script.
        os.environ.setdefault("ISOMETRY_DAEMON_CONFIG",
                              os.path.join(BUILD_DIR, "tools", "common", "isometry_daemon_config"))
        cls.work = tempfile.mkdtemp(prefix="iso-syscalls-")
        cls.daemon_binary = filtered_daemon(cls.work)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def start_daemon(self):
        directory = tempfile.mkdtemp(prefix="d-", dir=self.work)
        os.mkdir(os.path.join(directory, "dsk"))
        self.metrics_port = free_port()
        config = os.path.join(directory, "isometryd.toml")
        with open(config, "w") as f:
            f.write(daemon_section(directory, ISOMETRYD, log_level="info")
                    + CONFIG.format(dir=directory, metrics_port=self.metrics_port))
        daemon = IsometrydProcess(self.daemon_binary, config,
                                  os.path.join(directory, "isometryd.log"),
                                  os.path.join(directory, "grpc.sock"))
        self.addCleanup(daemon.close)
        try:
            daemon.start(timeout_s=60)
        except AssertionError as e:
            raise AssertionError(f"{e}\n(-31 is SIGSYS: a call outside the unit's "
                                 "SystemCallFilter=; strace -f shows which)") from None
        return directory, daemon

    def assertStopsCleanly(self, daemon):
        self.assertTrue(daemon.alive(), f"the daemon died under the filter:\n{daemon.log_text()}")
        rc = daemon.stop(timeout_s=30)
        self.assertEqual(rc, 0, f"exit status {rc} (-31 is SIGSYS: a call outside the "
                         f"unit's SystemCallFilter=):\n{daemon.log_text()}")

    def test_local_dsk_and_private_copies_and_status_under_the_filter(self):
        import isometry

        directory, daemon = self.start_daemon()
        sock = daemon.socket
        isoctl = os.path.join(BUILD_DIR, "tools", "isoctl", "isoctl")
        out = run([isoctl, "--socket", sock, "copy", "--extents", "64x1024",
                   "--fields", "a:4,b:8", "--dst-layout", "x,y,F", "--verify", "--repeat", "3"])
        self.assertIn("done", out)
        self.assertIn("transfers completed", run([isoctl, "--socket", sock, "status"]))

        data = os.urandom(3 << 20)
        with open(os.path.join(directory, "dsk", "in.bin"), "wb") as f:
            f.write(data)
        n = len(data)
        with isometry.Client(sock, name="syscalls",
                             local_socket=os.path.join(directory, "local.sock")) as c:
            # DSK -> SYS -> DSK: disk_read and disk_write (io_uring).
            a = c.allocate("sys0", n)
            pool = c.register_instance(a, [(0, n)], BYTE, "F,x")
            src = c.register_instance(0, [(0, n)], BYTE, "F,x", memory="dsk0", file="in.bin")
            self.assertIn("disk_read0", c.copy(src, pool).path)
            self.assertEqual(b"".join(c.read(a, o, min(1 << 20, n - o))
                                      for o in range(0, n, 1 << 20)), data)
            dst = c.register_instance(0, [(0, n)], BYTE, "F,x", memory="dsk0", file="out.bin")
            self.assertIn("disk_write0", c.copy(pool, dst).path)
            with open(os.path.join(directory, "dsk", "out.bin"), "rb") as f:
                self.assertEqual(f.read(), data)

            # Another process's private range -> mine (CMA through a pidfd).
            peer = subprocess.Popen(
                ["/usr/bin/python3", PRIVATE_PEER, sock, os.path.join(directory, "local.sock"),
                 str(1 << 20)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=PYTHONPATH))
            try:
                word, _, rid = peer.stdout.readline().strip().partition(" ")
                self.assertEqual(word, "range")
                theirs_bytes = os.urandom(1 << 20)
                peer.stdin.write("set " + theirs_bytes.hex() + "\n")
                peer.stdin.flush()
                self.assertEqual(peer.stdout.readline().strip(), "ok")
                theirs = c.register_instance(private_range=int(rid), bounds=[(0, 1 << 20)],
                                             fields=BYTE, layout="F,x")
                mine = bytearray(1 << 20)
                ours = c.register_instance(private_range=c.register_private(mine),
                                           bounds=[(0, 1 << 20)], fields=BYTE, layout="F,x")
                info = c.copy(theirs, ours)
                self.assertIn("cma0", info.path)
                self.assertEqual(bytes(mine), theirs_bytes)
                # A pool -> their private range (process_vm_writev).
                c.write(a, 0, data[: 1 << 20])
                part = c.register_instance(a, [(0, 1 << 20)], BYTE, "F,x")
                c.copy(part, theirs)
                peer.stdin.write("dump\n")
                peer.stdin.flush()
                self.assertEqual(bytes.fromhex(peer.stdout.readline().strip()), data[: 1 << 20])
            finally:
                peer.stdin.write("exit\n")
                peer.stdin.flush()
                peer.wait(timeout=20)

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=10) as r:
            self.assertIn("isometry_", r.read().decode())
        self.assertStopsCleanly(daemon)

    def test_a_copy_between_two_daemons_under_the_filter(self):
        os.environ.setdefault("ISOMETRY_PYTHONPATH", PYTHONPATH)
        import cluster_fixture

        cluster = cluster_fixture.Cluster(self.daemon_binary, ["a", "b"], root=self.work,
                                          pool="64MiB")
        try:
            cluster.start()
            info, sent, back = cluster.copy_bytes("a", "b", 5 << 20)
            self.assertEqual(info.state, "done", info)
            self.assertEqual(back, sent)
            info, sent, back = cluster.copy_bytes("b", "a", 1 << 20)
            self.assertEqual(back, sent)
            for node in cluster.nodes:
                self.assertTrue(node.process.alive(), f"{node.name} died:\n{node.log_text()}")
        finally:
            cluster.stop_checked(self)


class ContainerProfileTest(unittest.TestCase):
    """The container's seccomp profile (deploy/container/isometryd-seccomp.json,
    which podman and Kubernetes read) allows exactly the calls the daemon
    runs under above, and refuses the rest with the unit's errno."""

    def test_the_committed_profile_follows_the_unit(self):
        if not shutil.which("systemd-analyze"):
            self.skipTest("no systemd-analyze on this machine (Debian's systemd package)")
        root = os.path.join(HERE, "..", "..")
        script = os.path.join(root, "scripts", "seccomp_profile.py")
        committed = os.path.join(root, "deploy", "container", "isometryd-seccomp.json")
        unit = os.path.join(root, "systemd", "isometryd.service")
        r = subprocess.run([sys.executable, script, "--unit", unit, "--check", committed],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(committed) as f:
            profile = json.load(f)
        allowed = subprocess.run([sys.executable, LAUNCHER, "--unit", unit, "--print", "--",
                                  "/bin/true"], check=True, capture_output=True,
                                 text=True).stdout.split()
        self.assertEqual(profile["syscalls"], [{"names": allowed, "action": "SCMP_ACT_ALLOW"}])
        self.assertEqual((profile["defaultAction"], profile["defaultErrnoRet"]),
                         ("SCMP_ACT_ERRNO", 1))  # SystemCallErrorNumber=EPERM
        for call in ("io_uring_setup", "io_uring_enter", "io_uring_register",
                     "process_vm_readv", "process_vm_writev", "memfd_create", "pidfd_open"):
            self.assertIn(call, allowed)
        for call in ("ptrace", "mount", "kexec_load", "bpf", "init_module"):
            self.assertNotIn(call, allowed)
        # A unit that changed its list makes the committed file stale.
        with tempfile.TemporaryDirectory() as d:
            narrower = os.path.join(d, "isometryd.service")
            with open(unit) as f, open(narrower, "w") as out:
                out.write(f.read() + "SystemCallFilter=~io_uring_setup\n")
            r = subprocess.run([sys.executable, script, "--unit", narrower, "--check", committed],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("regenerate it", r.stderr)


if __name__ == "__main__":
    unittest.main()
