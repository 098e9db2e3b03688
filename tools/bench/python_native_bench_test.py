"""tools/bench/python_native_bench.py against this build's daemon and
Python client: one short round (16 MiB, 500 copies), its JSON rows as
isometry_bench writes them, and the machine on every row. No assertion
on speed (the private rows copy NumPy arrays of the test's own memory:
in the process and by the daemon's cma). Skips (77) where the extension isometry._native is not built.
ISOMETRYD and ISOMETRY_PYTHONPATH name the build (ctest sets both)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "python_native_bench.py")
ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")


class PythonNativeBenchTest(unittest.TestCase):
    def setUp(self):
        if not ISOMETRYD or not PYTHONPATH:
            self.skipTest("ISOMETRYD and ISOMETRY_PYTHONPATH are not set")

    def test_json_rows(self):
        done = subprocess.run(
            [sys.executable, SCRIPT, "--isometryd", ISOMETRYD, "--pythonpath", PYTHONPATH,
             "--rounds", "2", "--mib", "16", "--copies", "500", "--json"],
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode == 77:
            self.skipTest(done.stderr.strip())
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual([r["scenario"] for r in rows], [
            "aos_to_soa_16MiB_native_python", "private_aos_to_soa_16MiB_in_process_python",
            "private_aos_to_soa_16MiB_cma_python", "async_4KiB_x500_asyncio_python",
            "async_4KiB_x500_futures_python"])
        for r in rows[:3]:
            self.assertEqual(r["bytes"], 16 << 20)
        for r in rows:
            self.assertEqual(r["rounds"], 2)
            self.assertGreater(r["value"], 0)
            self.assertGreater(r["baseline_value"], 0)
            self.assertLessEqual(r["ratio_min"], r["ratio"])
            self.assertLessEqual(r["ratio"], r["ratio_max"])
            self.assertEqual(r["machine"]["cpus"], os.cpu_count())
        self.assertIn("round 2: AOS->SOA Python", done.stderr)

    def test_missing_daemon_is_a_clear_error(self):
        done = subprocess.run([sys.executable, SCRIPT, "--isometryd", "/nonexistent/isometryd",
                               "--pythonpath", PYTHONPATH], capture_output=True, text=True,
                              timeout=60, check=False)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("no daemon binary at /nonexistent/isometryd", done.stderr)


if __name__ == "__main__":
    unittest.main()
