"""pip install of the Python client (issue #55): the build tree's python/
directory (<build>/python: the package next to its generated stubs, with
pyproject.toml and setup.py) installs with ``pip install
--no-build-isolation --no-index`` into a venv made with
``--system-site-packages`` (Debian's grpcio and protobuf), and the
installed package, run from elsewhere, copies through a real daemon; mypy
finds its types through the installed py.typed; the source tree, which
lacks the generated stubs, is refused with a message saying where to
install from.

Run by ctest (python_pip_install, and python_pip_install.test_installed_
package_is_typed, which skips, 77, without mypy) with ISOMETRYD and
ISOMETRY_PYTHONPATH set.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)  # client/python
sys.path.insert(0, os.path.join(PROJECT, "..", "..", "tests", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
PACKAGE_ROOT = os.environ.get("ISOMETRY_PYTHONPATH", "")
EXAMPLE = os.path.join(PROJECT, "examples", "typed_example.py")

try:
    import ensurepip  # noqa: F401  (Debian's python3-venv)

    NO_VENV = ""
except ImportError as e:
    NO_VENV = f"python3 -m venv cannot install pip here ({e}); install Debian's python3-venv"
try:
    import mypy.api  # noqa: F401

    NO_MYPY = ""
except ImportError as e:
    NO_MYPY = f"mypy is not installed ({e}); install Debian's python3-mypy"
for why in (NO_VENV, NO_MYPY):
    if why:
        print(f"test_python_pip: may skip: {why}", file=sys.stderr)


def run(args, cwd, env=None, timeout=300):
    """Runs a command with a clean Python environment (no PYTHONPATH, so
    only what pip installed is importable); returns (rc, output)."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL", "PIP_FIND_LINKS")}
    clean.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1", PYTHONNOUSERSITE="1")
    clean.update(env or {})
    r = subprocess.run(args, cwd=cwd, env=clean, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


@unittest.skipIf(NO_VENV, NO_VENV)
class PipInstallTest(unittest.TestCase):
    """One venv with the package installed, shared by the cases."""

    @classmethod
    def setUpClass(cls):
        if not PACKAGE_ROOT or not os.path.isfile(os.path.join(PACKAGE_ROOT, "pyproject.toml")):
            raise AssertionError(f"ISOMETRY_PYTHONPATH={PACKAGE_ROOT!r} is not the build's "
                                 "python/ directory (with pyproject.toml)")
        cls.tmp = tempfile.mkdtemp(prefix="isometry-pip-")
        # A copy: pip builds in the source directory, which must not be
        # the build tree other tests import from at the same time.
        cls.src = os.path.join(cls.tmp, "src")
        shutil.copytree(PACKAGE_ROOT, cls.src,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        cls.venv = os.path.join(cls.tmp, "venv")
        cls.python = os.path.join(cls.venv, "bin", "python")
        rc, out = run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                      cwd=cls.tmp)
        if rc != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise AssertionError(f"python3 -m venv failed ({rc}):\n{out}")
        cls.install_rc, cls.install_out = run(
            [cls.python, "-m", "pip", "install", "--no-build-isolation", "--no-index", cls.src],
            cwd=cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.install_rc, 0, f"pip install failed:\n{self.install_out}")

    def installed(self, expr):
        rc, out = run([self.python, "-c", f"import isometry; print({expr})"], cwd=self.tmp)
        self.assertEqual(rc, 0, out)
        return out.strip()

    def test_installed_package_copies_through_a_daemon(self):
        self.assertTrue(ISOMETRYD, "ISOMETRYD is not set (ctest sets it)")
        where = self.installed("isometry.__file__")
        self.assertTrue(where.startswith(os.path.join(self.venv, "lib")), where)
        package = os.path.dirname(where)
        for name in ("py.typed", "isometry_pb2.py", "isometry_pb2_grpc.py", "_version.py"):
            self.assertTrue(os.path.isfile(os.path.join(package, name)), f"{name} not installed")
        native_built = bool(glob.glob(os.path.join(self.src, "isometry", "_native*.so")))
        self.assertEqual(bool(glob.glob(os.path.join(package, "_native*.so"))), native_built)
        self.assertEqual(self.installed("isometry.__version__"),
                         self.installed("__import__('isometry._version').__version__"))
        # The installed package loads the extension exactly where the build
        # tree's does (a sanitizer build has none).
        rc, out = run([sys.executable, "-c", "import isometry; print(isometry.native_available())"],
                      cwd=self.tmp, env={"PYTHONPATH": PACKAGE_ROOT})
        self.assertEqual(rc, 0, out)
        self.assertEqual(self.installed("isometry.native_available()"), out.strip())
        native_loads = out.strip() == "True"

        directory, daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, ONE_SYS_MEMORY, "isometry-pip-daemon-", daemon=dict(log_level="warn"))
        try:
            rc, out = run([self.python, EXAMPLE, "--socket", daemon.socket], cwd=self.tmp)
            self.assertEqual(rc, 0, f"typed_example.py from the venv failed:\n{out}")
            self.assertIn("OK", out.splitlines())
            self.assertIn("caught by meaning: NotFound (NOT_FOUND)", out)
            transport = ("native" if native_loads else "grpc")
            rc, out = run([self.python, "-c",
                           "import isometry, sys; c = isometry.connect(sys.argv[1], "
                           "local_socket=sys.argv[2]); print(c.transport); c.close()",
                           daemon.socket, os.path.join(directory, "local.sock")], cwd=self.tmp)
            self.assertEqual((rc, out.strip()), (0, transport), out)
        finally:
            rc = daemon.stop()
            daemon.close()
            shutil.rmtree(directory, ignore_errors=True)
        self.assertEqual(rc, 0, "isometryd exited uncleanly on SIGTERM")

    @unittest.skipIf(NO_MYPY, NO_MYPY)
    def test_installed_package_is_typed(self):
        # No MYPYPATH and a cwd without the package: mypy finds the
        # installed one in the venv's site-packages through py.typed.
        rc, out = run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                       "--config-file", os.path.join(PROJECT, "pyproject.toml"),
                       "--python-executable", self.python,
                       "--cache-dir", os.path.join(self.tmp, ".mypy_cache"), EXAMPLE],
                      cwd=self.tmp, env={"MYPYPATH": ""})
        self.assertEqual(rc, 0, f"mypy --strict with the installed package:\n{out}")
        shutil.rmtree(os.path.join(self.tmp, ".mypy_cache"), ignore_errors=True)
        bad = os.path.join(self.tmp, "bad.py")
        with open(bad, "w") as f:
            f.write("import isometry\nx: int = isometry.Client().read(1, 0, 8)\n")
        rc, out = run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                       "--config-file", os.path.join(PROJECT, "pyproject.toml"),
                       "--python-executable", self.python,
                       "--cache-dir", os.path.join(self.tmp, ".mypy_cache"), bad],
                      cwd=self.tmp, env={"MYPYPATH": ""})
        self.assertEqual(rc, 1, out)
        self.assertIn('expression has type "bytes", variable has type "int"', out)

    def test_the_source_tree_is_refused_with_where_to_install_from(self):
        rc, out = run([self.python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                       PROJECT], cwd=self.tmp)
        self.assertNotEqual(rc, 0, out)
        self.assertIn("isometry_pb2.py, isometry_pb2_grpc.py, _version.py missing", out)
        self.assertIn("pip install --no-build-isolation BUILD/python", out)


if __name__ == "__main__":
    unittest.main()
