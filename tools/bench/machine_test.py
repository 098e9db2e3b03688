#!/usr/bin/python3
"""Every benchmark row says where it was measured: isometry_bench's JSON rows
and table (tools/bench/machine.h) and the Python benchmarks' helper
(tools/bench/machine.py) give the same fields for this machine."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine  # noqa: E402

BENCH = os.environ.get("ISOMETRY_BENCH", "")


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


class MachineTest(unittest.TestCase):
    def check(self, m):
        self.assertEqual(m["cpu"], cpu_model())
        self.assertEqual(m["cpus"], os.cpu_count())
        self.assertEqual(m["kernel"], os.uname().release)
        for key in ("memcpy_gbps_1", "memcpy_gbps_2"):
            self.assertGreater(m[key], 0.01, key)
            self.assertLess(m[key], 10000, key)

    def test_python_helper(self):
        m = machine.measure()
        self.check(m)
        self.assertIn(f"machine: {m['cpu']}, {m['cpus']} CPUs", machine.line(m))

    @unittest.skipUnless(BENCH, "ISOMETRY_BENCH is not set (a build without the benchmarks: "
                                "ISOMETRY_BUILD_BENCH=OFF)")
    def test_every_isometry_bench_row(self):
        done = subprocess.run([BENCH, "--scenario", "planning", "--json"], capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertTrue(rows)
        for r in rows:
            self.check(r["machine"])
        table = subprocess.run([BENCH, "--scenario", "planning"], capture_output=True, text=True,
                               timeout=300)
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertRegex(table.stdout, r"machine: .+, \d+ CPUs, Linux .+, memcpy [0-9.]+ GB/s "
                                       r"one thread, [0-9.]+ GB/s two")


if __name__ == "__main__":
    unittest.main()
