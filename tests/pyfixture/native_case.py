"""A unittest case with a private isometryd and the Python client's native
path, for the suites of tests/python that test it (test_python_native,
test_python_in_process): each test gets its own daemon (CONFIG, under a
temporary directory named PREFIX...), self.c a native client and self.g a
gRPC one; the daemon must exit 0 on SIGTERM at the end.

A subclass sets CONFIG and PREFIX; `isometry` is the package module, which
the suite imports (or leaves None when it cannot: the case then fails
naming why). Skipped where the extension isometry._native is not built.
CaseHelpers alone gives other suites the same assertions.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

from isometryd_process import IsometrydProcess

DAEMON = dict(log_level="warn", shutdown_grace_ms=2000)


class CaseHelpers:
    """Assertions of the suites that run a daemon (a mixin of a
    unittest.TestCase whose `isometry` is the package module)."""

    isometry = None       # the package module, set by the suite

    def assertFails(self, code, fn, *args, **kwargs):
        with self.assertRaises(self.isometry.IsometryError) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception

    def wait_for(self, predicate, what, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.02)


class NativeCase(CaseHelpers, unittest.TestCase):
    CONFIG = ""
    PREFIX = "isometry-py-"
    import_error = None   # why the package could not be imported

    def setUp(self):
        if self.isometry is None:
            self.fail(f"cannot import the isometry package ({self.import_error}); set "
                      "ISOMETRY_PYTHONPATH to build/python and run with /usr/bin/python3")
        if not self.isometry.native_available():
            self.skipTest(self.isometry.native_unavailable_reason())
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                os.environ["ISOMETRYD"], self.CONFIG, self.PREFIX, daemon=DAEMON)
        except AssertionError as e:
            self.fail(str(e))
        self.socket = self.daemon.socket
        self.local = os.path.join(self.dir, "local.sock")
        self.clients = []
        self.c = self.client("native")
        self.g = self.client("grpc", native=False, local=False)

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.daemon.stop(timeout_s=30)
        log = self.daemon.log_text()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0, f"isometryd exited with {rc} on SIGTERM:\n{log}")

    def client(self, name, native=True, local=True, **kwargs):
        """A client of this test's daemon, closed at its end."""
        c = self.isometry.Client(self.socket, name=name, connect_timeout=10,
                                 local_socket=self.local if local else None, native=native,
                                 **kwargs)
        self.clients.append(c)
        return c

    def kill_while_copying(self, script, ready):
        """Runs `script` (argv: the gRPC socket, the local socket) in another
        Python process until it prints `ready` and the daemon has taken a few
        of its copies, then kills it with SIGKILL; the daemon's status
        (self.g's) from before it started."""
        base = self.g.status()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.Popen([sys.executable, "-c", script, self.socket, self.local],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            line = proc.stdout.readline()
            self.assertEqual(line.strip(), ready, proc.stderr.read() if not line else line)
            self.wait_for(lambda: self.g.status().transfers_submitted > base.transfers_submitted + 3,
                          "the doomed process's copies")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        return base
