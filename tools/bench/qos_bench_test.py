"""tools/bench/qos_bench.py against this build's daemon and Python client:
one short round, its JSON rows as isometry_bench writes them, and a clear
error for a missing daemon. ISOMETRYD and ISOMETRY_PYTHONPATH name them
(ctest sets both). No figure is asserted: a busy machine moves them."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "qos_bench.py")
ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300, check=False)


class QosBenchTest(unittest.TestCase):
    def setUp(self):
        if not ISOMETRYD or not PYTHONPATH:
            self.skipTest("ISOMETRYD and ISOMETRY_PYTHONPATH are not set")

    def test_json_rows(self):
        done = run("--isometryd", ISOMETRYD, "--pythonpath", PYTHONPATH, "--rounds", "1",
                   "--window", "0.5", "--small", "100", "--fg-gap-us", "500", "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        # Without the client's native extension (the sanitizer build) the
        # rows over the rings are left out, and the script says why.
        ring = [] if "no rows over the rings" in done.stderr else [
            "qos_foreground_ring_64KiB", "qos_background_left_ring",
            "qos_background_cpu_left_ring"]
        self.assertEqual([r["scenario"] for r in rows],
                         ["qos_share_memcpy", "qos_share_disk", "qos_share_tcp",
                          "qos_foreground_64KiB", "qos_foreground_tcp_64KiB",
                          "qos_foreground_cpu_floor_64KiB",
                          "qos_background_left", "qos_background_cpu_left", *ring,
                          "qos_overhead_memcpy_256MiB",
                          "qos_overhead_disk_64MiB", "qos_overhead_tcp_256MiB"])
        for r in rows:
            self.assertEqual(r["rounds"], 1)
            self.assertGreater(r["value"], 0)
            self.assertEqual(r["machine"]["cpus"], os.cpu_count())
            self.assertEqual((r["inline_bytes"], r["bg_nice"], r["fg_gap_us"]), (0, "idle", 500))
        self.assertIn("round 1: shares memcpy", done.stderr)
        self.assertIn("round 1: tcp share", done.stderr)
        # Where the CPUs went while bg was loaded: every round says it.
        self.assertIn("the daemon's bulk threads", done.stderr)

    def test_a_missing_daemon_is_named(self):
        done = run("--isometryd", "/nonexistent/isometryd")
        self.assertEqual(done.returncode, 2)
        self.assertIn("no daemon binary at /nonexistent/isometryd", done.stderr)

    def test_a_bad_background_nice_value_is_refused(self):
        done = run("--isometryd", ISOMETRYD, "--bg-nice", "fast")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--bg-nice: 0 to 19, or idle (not 'fast')", done.stderr)

    def test_a_negative_inline_size_is_refused(self):
        done = run("--isometryd", ISOMETRYD, "--inline-bytes", "-1")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--inline-bytes: 0 or more (not -1)", done.stderr)

    def test_a_gap_out_of_range_is_refused(self):
        done = run("--isometryd", ISOMETRYD, "--fg-gap-us", "-5")
        self.assertEqual(done.returncode, 2)
        self.assertIn("--fg-gap-us: 0 to 1000000 (not -5)", done.stderr)


if __name__ == "__main__":
    unittest.main()
