"""The Python client's types (issue #55): ``mypy --strict`` passes over the
package's public modules and a typed user program
(client/python/examples/typed_example.py), and flags a program that
misuses the API, so the annotations are really checked, not Any.

It checks the package as the build assembles it (ISOMETRY_PYTHONPATH,
<build>/python/isometry, next to the generated stubs), with the mypy
settings of client/python/pyproject.toml. Skips (77, with the reason)
where mypy is not installed (Debian's python3-mypy;
scripts/install-deps.sh installs it).
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)  # client/python
CONFIG = os.path.join(PROJECT, "pyproject.toml")
EXAMPLE = os.path.join(PROJECT, "examples", "typed_example.py")
PACKAGE_ROOT = os.environ.get("ISOMETRY_PYTHONPATH", "")
# The hand-written modules; the generated isometry_pb2* carry no types.
PUBLIC_MODULES = ["__init__", "active", "arrays", "client", "datatype", "distributed", "errors",
                  "futures", "instances", "local", "native", "records", "ring", "transfers"]

try:
    import mypy.api  # noqa: F401

    NO_MYPY = ""
except ImportError as e:
    NO_MYPY = f"mypy is not installed ({e}); install Debian's python3-mypy"
if NO_MYPY:
    print(f"test_python_types: skipped: {NO_MYPY}", file=sys.stderr)

# Each line is a mistake mypy must report against the package's types.
MISUSE = """\
import isometry

def misuse(c: isometry.Client) -> None:
    c.allocate(4096, "sys0")                       # arguments swapped
    n: str = c.read(1, 0, 8)                       # read returns bytes
    c.copy(1, 2, wait="yes")                       # wait is a bool
    t: str = c.copy(1, 2, wait=False)              # an int transfer id
    e: isometry.NotFound = isometry.Unavailable("UNAVAILABLE", "x")
    isometry.connect(local_socket=3)
"""
MISUSE_LINES = {4, 5, 6, 7, 8, 9}


def run_mypy(*files, cwd):
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", CONFIG,
                        "--no-error-summary", "--cache-dir", os.path.join(cwd, ".mypy_cache"),
                        *files],
                       cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr


@unittest.skipIf(NO_MYPY, NO_MYPY)
class MypyStrictTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(PACKAGE_ROOT and os.path.isfile(
            os.path.join(PACKAGE_ROOT, "isometry", "isometry_pb2.py")),
            f"ISOMETRY_PYTHONPATH={PACKAGE_ROOT!r} does not hold the built package "
            "(<build>/python)")
        self.tmp = tempfile.TemporaryDirectory(prefix="isometry-mypy-")
        self.addCleanup(self.tmp.cleanup)

    def test_package_and_typed_example_pass(self):
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE_ROOT, "isometry", "py.typed")),
                        "the build did not put the py.typed marker in the package")
        modules = [os.path.join("isometry", m + ".py") for m in PUBLIC_MODULES]
        rc, out = run_mypy(*modules, EXAMPLE, cwd=PACKAGE_ROOT)
        self.assertEqual(rc, 0, f"mypy --strict failed:\n{out}")

    def test_misuse_is_reported(self):
        program = os.path.join(self.tmp.name, "misuse.py")
        with open(program, "w") as f:
            f.write(MISUSE)
        rc, out = run_mypy(program, cwd=PACKAGE_ROOT)
        self.assertEqual(rc, 1, out)
        flagged = {int(line.split(":")[1]) for line in out.splitlines()
                   if line.startswith(program + ":") and ": error:" in line}
        self.assertEqual(flagged, MISUSE_LINES, f"mypy reported:\n{out}")


if __name__ == "__main__":
    unittest.main()
