"""What the hardened unit asks of the daemon itself, tested without systemd
(this machine's PID 1 may not be it), the way the unit runs it: as a user
other than root and without capabilities (setpriv), or on a read-only
directory (a bind mount in a private mount namespace, what
ProtectSystem=strict makes of a path without ReadWritePaths=).

- Without CAP_SYS_PTRACE (the unit grants it only through the opt-in
  drop-in share/isometry/isometryd-cma.conf) the daemon says at start, in
  one line, whom it reaches; with it (root, as the other tests run) it
  says nothing.
- Without any capability, the daemon still reaches the private memory of a
  client of another uid: the client passes its own /proc/self/mem with
  RegisterPrivate (a file of mode 0600 the daemon could open only with
  CAP_SYS_PTRACE and CAP_DAC_OVERRIDE), and the copy lands in it.
- `--check-config` fails, naming the directory and the user, when a DSK
  memory's directory is not writable by the daemon's user.

Exits 77 with the reason when not run as root (it changes users).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyfixture"))
from attack_case import NOBODY, as_uid  # noqa: E402
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess, daemon_section  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
CLIENT_UID = 4242  # neither root nor the daemon's user (nobody)
# Run as CLIENT_UID over the local socket: private memory of its own, a
# copy from a pool allocation into it, its bytes checked.
PRIVATE_COPY = """
import sys
sys.path.insert(0, sys.argv[1])
import isometry
n = 4096
with isometry.Client(sys.argv[2], local_socket=sys.argv[3], name="other-uid") as c:
    mine = bytearray(n * 4)
    rng = c.register_private(mine)
    a = c.allocate("sys0", n * 4)
    pattern = bytes((i * 7 + 3) % 251 for i in range(n * 4))
    c.write(a, 0, pattern)
    src = c.register_instance(a, [n], [("v", 4)], "F,x")
    dst = c.register_instance(private_range=rng, bounds=[n], fields=[("v", 4)], layout="F,x")
    info = c.copy(src, dst)
    assert info.state == "done", info
    assert bytes(mine) == pattern, "the private memory differs from the source"
    print("copied")
"""
# Run as CLIENT_UID: the files it passes are not its own (another process's
# /proc/<pid>/mem and maps, then plain files): the daemon must not use them,
# and without any capability it cannot open the client's own, so it refuses.
FOREIGN_FILES = """
import os, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import isometry
import isometry.instances as instances
child = subprocess.Popen(["sleep", "60"])
tmp = tempfile.TemporaryFile()
cases = {
    "another process's": lambda: [os.open(f"/proc/{child.pid}/mem", os.O_RDWR),
                                  os.open(f"/proc/{child.pid}/maps", os.O_RDONLY)],
    "plain files": lambda: [os.dup(tmp.fileno()), os.dup(tmp.fileno())],
}
try:
    with isometry.Client(sys.argv[2], local_socket=sys.argv[3], name="foreign") as c:
        for name, files in cases.items():
            instances.own_address_space = files
            try:
                c.register_private(bytearray(4096))
                print(f"{name}: accepted")
            except isometry.IsometryError as e:
                print(f"{name}: refused {e.code}")
finally:
    child.kill()
"""
CMA = ONE_SYS_MEMORY + """
[[channel]]
name = "cma0"
kind = "cma"
"""
DSK = ONE_SYS_MEMORY + """
[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"

[[channel]]
name = "disk_write0"
kind = "disk_write"
"""
LOST = "without CAP_SYS_PTRACE: copies to and from clients' private memory (CMA) reach"


def why_skip():
    if not ISOMETRYD:
        return "ISOMETRYD is not set (ctest sets it)"
    if os.geteuid() != 0:
        return "not root: the tests start the daemon as another user"
    if not shutil.which("setpriv"):
        return "no setpriv (util-linux)"
    return None


class UnitDaemonTest(unittest.TestCase):
    def setUp(self):
        reason = why_skip()
        if reason:
            self.skipTest(reason)
        self.fresh_dir()

    def fresh_dir(self):
        self.dir = tempfile.mkdtemp(prefix="iso-unitd-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)

    def write_config(self, template, owner=0, extra=()):
        """The daemon's config in self.dir, which `owner` then owns (its
        sockets and state go there); `extra` as daemon_section's."""
        config = os.path.join(self.dir, "isometryd.toml")
        with open(config, "w") as f:
            f.write(daemon_section(self.dir, ISOMETRYD, log_level="info", extra=extra)
                    + template.format(dir=self.dir))
        os.chmod(config, 0o644)
        os.chown(self.dir, owner, owner)
        return config

    def start(self, config, prefix=()):
        daemon = IsometrydProcess(ISOMETRYD, config, os.path.join(self.dir, "isometryd.log"),
                                  os.path.join(self.dir, "grpc.sock"), prefix=prefix)
        self.addCleanup(daemon.close)
        daemon.start(timeout_s=60)
        return daemon

    def test_without_the_capability_the_daemon_says_what_it_lost(self):
        config = self.write_config(CMA, owner=NOBODY)
        daemon = self.start(config, prefix=as_uid(NOBODY))
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())
        log = daemon.log_text(tail=None)
        lines = [line for line in log.splitlines() if LOST in line]
        self.assertEqual(len(lines), 1, log)
        # This machine's Yama policy decides whom it still reaches.
        self.assertIn("reach every client that passes its own /proc/self/mem and maps", lines[0])
        self.assertRegex(lines[0], r"of other clients, (only clients running as nobody "
                                   r"\(uid 65534\)|no client at all \(kernel\.yama\.ptrace_scope [12])")
        self.assertIn("isometryd-cma.conf", lines[0])

    def test_with_the_capability_or_without_cma_it_says_nothing(self):
        config = self.write_config(CMA)
        daemon = self.start(config)  # root: CAP_SYS_PTRACE is effective
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())
        self.assertNotIn(LOST, daemon.log_text(tail=None))
        self.fresh_dir()
        config = self.write_config(ONE_SYS_MEMORY, owner=NOBODY)
        daemon = self.start(config, prefix=as_uid(NOBODY))  # nothing needs it
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())
        self.assertNotIn("without CAP_SYS_PTRACE", daemon.log_text(tail=None))

    def test_a_client_of_another_uid_is_reached_without_any_capability(self):
        if not PYTHONPATH:
            self.skipTest("ISOMETRY_PYTHONPATH is not set (ctest sets it)")
        probe = subprocess.run([*as_uid(CLIENT_UID), sys.executable, "-c",
                                f"import sys; sys.path.insert(0, {PYTHONPATH!r}); import isometry"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            self.skipTest(f"uid {CLIENT_UID} cannot import the client from {PYTHONPATH}: "
                          f"{probe.stderr.strip()[-200:]}")
        # Sockets any uid may open: the client is neither root nor nobody.
        config = self.write_config(CMA, owner=NOBODY, extra=(("socket_mode", '"0666"'),))
        daemon = self.start(config, prefix=as_uid(NOBODY))  # no capability at all
        local = os.path.join(self.dir, "local.sock")
        r = subprocess.run([*as_uid(CLIENT_UID), sys.executable, "-c", PRIVATE_COPY, PYTHONPATH,
                            daemon.socket, local], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{daemon.log_text()}")
        self.assertEqual(r.stdout.strip(), "copied")
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())

    def test_files_that_are_not_the_clients_own_are_not_used(self):
        if not PYTHONPATH:
            self.skipTest("ISOMETRY_PYTHONPATH is not set (ctest sets it)")
        # Sockets any uid may open: the client is neither root nor nobody.
        config = self.write_config(CMA, owner=NOBODY, extra=(("socket_mode", '"0666"'),))
        daemon = self.start(config, prefix=as_uid(NOBODY))
        r = subprocess.run([*as_uid(CLIENT_UID), sys.executable, "-c", FOREIGN_FILES, PYTHONPATH,
                            daemon.socket, os.path.join(self.dir, "local.sock")],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 and "ModuleNotFoundError" in r.stderr:
            self.skipTest(f"uid {CLIENT_UID} cannot import the client from {PYTHONPATH}")
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{daemon.log_text()}")
        self.assertEqual(r.stdout.splitlines(), ["another process's: refused PERMISSION_DENIED",
                                                 "plain files: refused PERMISSION_DENIED"],
                         daemon.log_text())
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())

    def check_config(self, config, prefix=()):
        return subprocess.run([*prefix, ISOMETRYD, "--config", config, "--check-config"],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=60)

    def test_check_config_names_a_dsk_directory_the_user_cannot_write(self):
        dsk = os.path.join(self.dir, "dsk")
        os.mkdir(dsk, 0o755)  # root's, as the daemon's user finds it
        config = self.write_config(DSK, owner=NOBODY)
        r = self.check_config(config, prefix=as_uid(NOBODY))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"key 'memory.directory': DSK memory 'dsk0': directory '{dsk}' is not "
                      "writable by user nobody (uid 65534): Permission denied", r.stderr)
        os.chown(dsk, NOBODY, NOBODY)
        r = self.check_config(config, prefix=as_uid(NOBODY))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_check_config_names_a_read_only_dsk_directory(self):
        if not shutil.which("unshare"):
            self.skipTest("no unshare (util-linux)")
        dsk = os.path.join(self.dir, "dsk")
        os.mkdir(dsk, 0o755)
        config = self.write_config(DSK)
        # A private mount namespace: the read-only bind mount goes with it.
        script = (f'mount --bind "{dsk}" "{dsk}" && mount -o remount,bind,ro "{dsk}" && '
                  f'exec "{ISOMETRYD}" --config "{config}" --check-config')
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        if "mount" in r.stderr and r.returncode not in (0, 2):
            self.skipTest(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"directory '{dsk}' is not writable by user root (uid 0): ", r.stderr)
        self.assertIn(f"add ReadWritePaths={dsk}", r.stderr)
        self.assertEqual(self.check_config(config).returncode, 0)


if __name__ == "__main__":
    unittest.main()
