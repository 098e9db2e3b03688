"""tools/bench/python_latency.py against this build's daemon and Python
client: one short round, its JSON rows as isometry_bench writes them (and
plot.py reads them), and clear errors for a missing daemon or package.
ISOMETRYD and ISOMETRY_PYTHONPATH name them (ctest sets both)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "python_latency.py")
ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=120, check=False)


class PythonLatencyTest(unittest.TestCase):
    def setUp(self):
        if not ISOMETRYD or not PYTHONPATH:
            self.skipTest("ISOMETRYD and ISOMETRY_PYTHONPATH are not set")

    def test_json_rows(self):
        done = run("--isometryd", ISOMETRYD, "--pythonpath", PYTHONPATH, "--rounds", "2",
                   "--iterations", "100", "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        # The native rows follow where isometry._native is built (issue #55).
        scenarios = [r["scenario"] for r in rows]
        self.assertEqual(scenarios[:2], ["latency_4KiB_grpc_python"] * 2)
        self.assertIn(scenarios[2:], ([], ["latency_4KiB_native_python"] * 2))
        self.assertEqual([r["metric"] for r in rows], ["median", "p99"] * (len(rows) // 2))
        if scenarios[2:]:
            self.assertIn("round 2: native copy median", done.stderr)
        for r in rows:
            self.assertEqual(r["rounds"], 2)
            self.assertEqual(len(r["round_values"]), 2)
            self.assertGreater(r["value"], 0)
            self.assertGreater(r["baseline_value"], 0)
            self.assertLessEqual(r["ratio_min"], r["ratio"])
            self.assertLessEqual(r["ratio"], r["ratio_max"])
            # Where it was measured (tools/bench/machine.py), on every row.
            self.assertEqual(r["machine"]["cpus"], os.cpu_count())
            self.assertEqual(r["machine"]["kernel"], os.uname().release)
            self.assertGreater(r["machine"]["memcpy_gbps_1"], 0)
            self.assertGreater(r["machine"]["memcpy_gbps_2"], 0)
        for median, p99 in zip(rows[::2], rows[1::2]):
            self.assertLessEqual(median["value"], p99["value"])
            cdf = [us for _, us in median["percentiles"]]
            self.assertEqual(cdf, sorted(cdf))
        self.assertIn("round 2:", done.stderr)

    def test_no_native_times_grpc_only(self):
        done = run("--isometryd", ISOMETRYD, "--pythonpath", PYTHONPATH, "--rounds", "1",
                   "--iterations", "100", "--json", "--no-native")
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual([r["scenario"] for r in rows], ["latency_4KiB_grpc_python"] * 2)

    def test_missing_daemon_is_a_clear_error(self):
        done = run("--isometryd", "/nonexistent/isometryd", "--pythonpath", PYTHONPATH)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no daemon binary at /nonexistent/isometryd", done.stderr)

    def test_missing_package_is_a_clear_error(self):
        done = run("--isometryd", ISOMETRYD, "--pythonpath", "/nonexistent")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("cannot import the isometry package", done.stderr)


if __name__ == "__main__":
    unittest.main()
