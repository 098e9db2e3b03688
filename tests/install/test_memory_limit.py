"""A first start under a memory limit (a container's, a unit's MemoryMax=):
the daemon calibrates its channels at start, and its measuring buffers
once came to 2 GiB on a machine whose last-level cache reads 480 MiB, so
in a pod limited to 1536 MiB the kernel killed it before it ever listened
(core/memory_limit.h, channels/calibrate.h). Here the real daemon starts
calibrating in a memory cgroup of 384 MiB, with a pool and staging that fit
it: it must come up, answer a copy, keep its peak under the limit and stop
cleanly. With pools beyond the limit it still starts (pools commit as
clients allocate) and its log names the pools, the staging and the limit. The daemon before the fix was killed there at any cache size (its
smallest areas alone were 2 x 128 MiB, twice over in one measurement).

Needs root and a memory cgroup controller it can write (v1's
/sys/fs/cgroup/memory, or v2 with memory in the root's subtree_control):
exits 77 naming what is missing. Release lane only: a sanitizer's runtime
holds memory of its own.
"""

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyfixture"))
from isometryd_process import IsometrydProcess, daemon_section  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
LIMIT = 384 << 20
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "128MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
"""


def make_cgroup(name):
    """(directory, peak file) of a new memory cgroup limited to LIMIT, or
    (None, why not)."""
    if os.geteuid() != 0:
        return None, "not root: cannot make a memory cgroup"
    v1 = "/sys/fs/cgroup/memory"
    if os.path.isfile(os.path.join(v1, "cgroup.procs")):
        d = os.path.join(v1, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "memory.limit_in_bytes"), "w") as f:
            f.write(str(LIMIT))
        return d, os.path.join(d, "memory.max_usage_in_bytes")
    root = "/sys/fs/cgroup"
    try:
        with open(os.path.join(root, "cgroup.controllers")) as f:
            if "memory" not in f.read().split():
                return None, "cgroup v2 without the memory controller"
        with open(os.path.join(root, "cgroup.subtree_control"), "w") as f:
            f.write("+memory")
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "memory.max"), "w") as f:
            f.write(str(LIMIT))
    except OSError as e:
        return None, f"cannot set up a v2 memory cgroup here: {e}"
    return d, os.path.join(d, "memory.peak")


class MemoryLimitedStartTest(unittest.TestCase):
    def start_in_cgroup(self, config_text, suffix):
        """A daemon started (calibrating) in a fresh LIMIT cgroup: (daemon,
        the cgroup's peak file)."""
        cgroup, peak_file = make_cgroup(f"isometry-test-{os.getpid()}-{suffix}")
        if cgroup is None:
            self.skipTest(peak_file)
        self.addCleanup(os.rmdir, cgroup)
        directory = tempfile.mkdtemp(prefix="iso-memlimit-")
        self.addCleanup(shutil.rmtree, directory, True)
        config = os.path.join(directory, "isometryd.toml")
        with open(config, "w") as f:
            # calibrate: a first start measures, as a fresh pod's does.
            f.write(daemon_section(directory, ISOMETRYD, log_level="info", calibrate=True)
                    + config_text)
        join = f'echo $$ > "{cgroup}/cgroup.procs" && exec "$0" "$@"'
        daemon = IsometrydProcess(ISOMETRYD, config, os.path.join(directory, "isometryd.log"),
                                  os.path.join(directory, "grpc.sock"),
                                  prefix=["/bin/sh", "-c", join])
        self.addCleanup(daemon.close)
        try:
            daemon.start(timeout_s=90)
        except AssertionError as e:
            raise AssertionError(f"{e}\n(-9 is SIGKILL: the kernel's OOM killer in a "
                                 f"{LIMIT >> 20} MiB cgroup)") from None
        self.assertIn("calibration: channel 'memcpy0'", daemon.log_text(tail=20000),
                      "the daemon did not calibrate: the test measured nothing")
        return daemon, peak_file

    def test_pools_beyond_the_limit_are_named_at_start(self):
        # Pools commit as clients allocate, so the daemon starts; the log
        # says the config cannot be filled within the limit.
        big = CONFIG.replace('pool = "128MiB"', 'pool = "1GiB"')
        daemon, _ = self.start_in_cgroup(big, "big")
        log = daemon.log_text(tail=20000)
        self.assertIn(f"client pools (1024 MiB) and staging (64 MiB) exceed the {LIMIT >> 20} MiB "
                      "this daemon may use", log)
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())

    def test_a_first_start_calibrates_within_a_small_memory_limit(self):
        if PYTHONPATH not in sys.path:
            sys.path.insert(0, PYTHONPATH)
        from isometry import Client

        daemon, peak_file = self.start_in_cgroup(CONFIG, "small")
        self.assertNotIn("exceed the", daemon.log_text(tail=20000))
        with Client(daemon.socket, name="memlimit") as c:
            src, dst = c.allocate("sys0", 1 << 20), c.allocate("sys0", 1 << 20)
            c.write(src, 0, bytes(range(256)) * 4096)
            a = c.register_instance(src, [1 << 18], [("v", 4)], "F,x")
            b = c.register_instance(dst, [1 << 18], [("v", 4)], "F,x")
            self.assertEqual(c.copy(a, b, wait=True).state, "done")
            self.assertEqual(c.read(dst, 0, 1 << 20), bytes(range(256)) * 4096)
        with open(peak_file) as f:
            peak = int(f.read().split()[0])
        self.assertLess(peak, LIMIT, "the cgroup's peak reached its limit")
        self.assertEqual(daemon.stop(timeout_s=30), 0, daemon.log_text())


if __name__ == "__main__":
    unittest.main()
