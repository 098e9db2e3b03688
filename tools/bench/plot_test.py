"""tools/bench/plot.py on a canned `isometry_bench --json` run
(testdata/bench_sample.jsonl: a contiguous size sweep, latency rows with
percentiles, client_to_client rows against peers)."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "plot.py")
SAMPLE = os.path.join(HERE, "testdata", "bench_sample.jsonl")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, PLOT, *args], input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


class PlotTest(unittest.TestCase):
    def test_help(self):
        done = run("--help")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("isometry_bench --json", done.stdout)
        self.assertIn("--out-dir", done.stdout)

    def test_no_rows_is_an_error(self):
        done = run(stdin="not json\n")
        self.assertEqual(done.returncode, 1)
        self.assertIn("no isometry_bench JSON rows", done.stderr)

    def test_writes_pngs(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("matplotlib is missing: apt-get install python3-matplotlib")
        with tempfile.TemporaryDirectory() as out, open(SAMPLE, encoding="utf-8") as f:
            done = run("-o", out, stdin=f.read())  # from standard input
            self.assertEqual(done.returncode, 0, done.stderr)
            expected = {"throughput_contiguous_sys_sys.png", "ratios.png", "latency_cdf.png"}
            self.assertEqual(set(os.listdir(out)), expected)
            self.assertEqual(sorted(os.path.basename(p) for p in done.stdout.split()),
                             sorted(expected))
            for name in expected:
                with open(os.path.join(out, name), "rb") as png:
                    self.assertEqual(png.read(8), PNG_MAGIC, name)
            again = os.path.join(out, "from_file")
            done = run(SAMPLE, "--out-dir", again)  # and from a file
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(set(os.listdir(again)), expected)


if __name__ == "__main__":
    unittest.main()
