"""The docstring examples of the isometry package, run as doctests against
a real isometryd (issue #55): every ``>>>`` example of every module, with
the daemon's default socket paths in them (/run/isometry/grpc.sock and
/run/isometry/isometry.sock) pointed at a private daemon's. An example
whose output changes, or that raises, fails the test; so does a package
with fewer examples than the modules below hold.

Run by ctest (python_doctests) with ISOMETRYD and ISOMETRY_PYTHONPATH set.
"""

import doctest
import importlib
import os
import shutil
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

import isometry  # noqa: E402

CONFIG = ONE_SYS_MEMORY + """
[[channel]]
name = "cma0"
kind = "cma"
"""
MODULES = ["__init__", "active", "arrays", "client", "datatype", "distributed", "errors",
           "futures", "instances", "local", "native", "records", "ring", "transfers"]
# The docstrings that hold examples (at least): a test that found none of
# them would pass without running anything.
EXPECTED = {"isometry.client", "isometry.client.connect", "isometry.datatype",
            "isometry.arrays", "isometry.futures"}
GRPC, LOCAL = "/run/isometry/grpc.sock", "/run/isometry/isometry.sock"


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class DoctestsTest(unittest.TestCase):
    def setUp(self):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-doctests-", daemon=dict(log_level="warn"))
        local = os.path.join(self.dir, "local.sock")
        self.paths = {GRPC: self.daemon.socket, LOCAL: local}
        # connect()'s default local socket is the daemon's default path.
        defaults = isometry.connect.__defaults__
        isometry.connect.__defaults__ = (self.daemon.socket, local)
        self.addCleanup(setattr, isometry.connect, "__defaults__", defaults)

    def tearDown(self):
        self.daemon.stop()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_docstring_examples(self):
        finder = doctest.DocTestFinder(exclude_empty=True)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        found, report = set(), []
        for name in MODULES:
            module = importlib.import_module("isometry" + ("" if name == "__init__" else "." + name))
            for test in finder.find(module):
                for example in test.examples:
                    for default, path in self.paths.items():
                        example.source = example.source.replace(default, path)
                found.add(test.name)
                runner.run(test, out=report.append)
        self.assertTrue(EXPECTED <= found, f"no examples found in {sorted(EXPECTED - found)}")
        results = runner.summarize(verbose=False)
        self.assertEqual(results.failed, 0, "".join(report))
        self.assertGreaterEqual(results.attempted, 19)  # as the modules hold today


if __name__ == "__main__":
    unittest.main()
