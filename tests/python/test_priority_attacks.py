"""Priority attacks on a real isometryd (issue #48, item 6).

An attacker of another uid (`nobody`) asks for a priority far above the
daemon's ceiling (refused), then floods the one rate-capped channel with
eight copies at the highest priority it may use. A victim's copy at that
same priority must get its share of the channel: its session is one share
however many transfers the attacker has queued, so it runs at about half
the channel's rate, not one ninth (the victim's time is compared with the
same copy alone, measured in the same run).

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH); as root (the
attacker runs as `nobody`).
"""

import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import (ISOMETRYD, SKIP_REASON, note_skip, nobody_process,  # noqa: E402
                         start_daemon)

_IMPORT_ERROR = None
try:
    import isometry
except ImportError as e:
    _IMPORT_ERROR = e

note_skip("test_priority_attacks")

CEILING = 10
DAEMON = dict(log_level="info", shutdown_grace_ms=500, extra=[
    ("socket_mode", '"0666"'),
    ("max_priority", CEILING),
])
# One channel, one request at a time, 64 MiB/s: its share is what a copy
# gets of it.
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "512MiB"
client_quota = "128MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 1
rate_limit = "64MiB"
"""

MIB = 1 << 20

# The attacker: refused above the ceiling, then eight 16 MiB copies at the
# ceiling, all in flight before it says "ready"; it waits for them after.
ATTACKER = r"""
import sys, isometry
sock, ceiling = sys.argv[1], int(sys.argv[2])
c = isometry.Client(sock, name="flooder")
src = c.allocate("sys0", 16 << 20)
dsts = [c.allocate("sys0", 16 << 20) for _ in range(4)]
s = c.register_instance(src, [16 << 20], [("b", 1)], "F,x")
ds = [c.register_instance(d, [16 << 20], [("b", 1)], "F,x") for d in dsts]
try:
    c.copy(s, ds[0], priority=(1 << 31) - 1)
    print("above the ceiling: OK", flush=True)
except isometry.IsometryError as e:
    print(f"above the ceiling: {e.code}: {e.message}", flush=True)
ids = [c.copy(s, ds[i % 4], priority=ceiling, wait=False) for i in range(8)]
print("ready", flush=True)
states = [c.wait(t).state for t in ids]
c.close()
print("done", " ".join(states), flush=True)
"""


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class PriorityAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        if os.geteuid() != 0:
            self.skipTest("needs root to run the attacker as nobody")
        self.dir, self.daemon = start_daemon(self, CONFIG, "isometry-priority-attack-", DAEMON)
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.victim = isometry.Client(self.socket, name="victim")
        self.addCleanup(self.victim.close)

    def victim_copy_seconds(self, s, d):
        t0 = time.monotonic()
        info = self.victim.copy(s, d, priority=CEILING)
        self.assertEqual(info.state, "done")
        return time.monotonic() - t0

    def test_a_session_is_one_share_whatever_it_queues(self):
        a = self.victim.allocate("sys0", 16 * MIB)
        b = self.victim.allocate("sys0", 16 * MIB)
        s = self.victim.register_instance(a, [16 * MIB], [("b", 1)], "F,x")
        d = self.victim.register_instance(b, [16 * MIB], [("b", 1)], "F,x")
        alone = min(self.victim_copy_seconds(s, d) for _ in range(2))
        attacker = nobody_process(ATTACKER, self.socket, CEILING, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        try:
            refused = attacker.stdout.readline()
            self.assertIn("PERMISSION_DENIED", refused)
            self.assertIn("daemon.max_priority", refused)
            self.assertEqual(attacker.stdout.readline().strip(), "ready")
            loaded = self.victim_copy_seconds(s, d)
            out, err = attacker.communicate(timeout=60)
        finally:
            if attacker.poll() is None:
                attacker.kill()
                attacker.wait()
        self.assertEqual(attacker.returncode, 0, err)
        self.assertEqual(out.split(), ["done"] + ["done"] * 8, out)
        print(f"victim's 16 MiB copy: {alone * 1e3:.0f} ms alone, {loaded * 1e3:.0f} ms beside "
              "eight 16 MiB copies of another uid", file=sys.stderr)
        # One share of two: about twice the time alone (and a request or
        # two already in flight). One share per transfer (nine) would be
        # about nine times.
        self.assertLess(loaded, 4.5 * alone,
                        f"the victim's 16 MiB copy took {loaded * 1e3:.0f} ms under the flood, "
                        f"{alone * 1e3:.0f} ms alone")


if __name__ == "__main__":
    unittest.main()
