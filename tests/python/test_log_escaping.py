"""Logs an attacker writes (issue #11, class 5), against a real isometryd.

A client names DSK files; when a transfer on one fails, its message (with
the file name) reaches the daemon's log. A name with a newline must not
forge a log line, and a client failing transfers in a loop must not flood
the log: after 20 "transfer N failed" lines in 10 s the rest are counted
and reported as one "suppressed K similar" line.
"""

import os
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402
from test_python_client import _IMPORT_ERROR, ISOMETRYD  # noqa: E402

if _IMPORT_ERROR is None:
    import isometry

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="info", shutdown_grace_ms=1000)
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
staging = 0
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"

[[channel]]
name = "disk_read0"
kind = "disk_read"

[[channel]]
name = "disk_write0"
kind = "disk_write"
"""

FORGED = "[info] session 7 closed: client 'root'"
BURST = 25  # failures in one burst; the limit is 20 lines per 10 s
ROWS, COLS = 7, 100_000


class LogEscapingTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({_IMPORT_ERROR})")
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-logesc-", dirs=["dsk"], daemon=DAEMON
        )
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(self.daemon.close)
        self.c = isometry.Client(self.daemon.socket, name="log-test", connect_timeout=10)
        self.addCleanup(self.c.close)
        a = self.c.allocate("sys0", ROWS * COLS)
        self.src = self.c.register_instance(a, [ROWS, COLS], [("f", 1)], "F,x,y")

    def fail_transfers(self, names):
        """Starts slow SYS -> DSK transposes to `names` (1-byte runs on the
        disk hop), then puts a directory with a file in it at each target,
        so every commit (the rename at the end) fails after the start."""
        ids = []
        for name in names:
            target = os.path.join(self.dir, "dsk", name)
            for _attempt in range(5):
                dst = self.c.register_instance(
                    0, [ROWS, COLS], [("f", 1)], "F,y,x", memory="dsk0", file=name)
                t = self.c.copy(self.src, dst, via=[("sys0", "F,x,y")], wait=False)
                try:
                    os.mkdir(target)
                except FileExistsError:
                    # The copy won the race and committed before the
                    # directory went in: take its file away and go again.
                    self.assertEqual(self.c.wait(t, timeout_ms=120_000).state, "done")
                    os.unlink(target)
                    continue
                ids.append(t)
                break
            else:
                self.fail(f"every copy to {name!r} committed before a directory could block it")
            open(os.path.join(target, "keep"), "w").close()
        for t in ids:
            info = self.c.wait(t, timeout_ms=120_000, check=False)
            self.assertEqual(info.state, "failed", info)

    def failed_lines(self, log):
        return [l for l in log.splitlines() if "] transfer " in l and " failed: " in l]

    def test_client_file_names_cannot_forge_or_flood_log_lines(self):
        names = [f"f{i}\n{FORGED}" for i in range(BURST)]
        self.fail_transfers(names)
        time.sleep(0.2)
        log = self.daemon.log_text(tail=None)
        # No line of the log is the forged one; the name is there, escaped.
        for line in log.splitlines():
            self.assertFalse(line.startswith(FORGED), f"forged line in the log:\n{log}")
        lines = self.failed_lines(log)
        self.assertTrue(lines, log)
        self.assertIn("\\x0a" + FORGED, lines[0])
        # The burst is cut at 20 lines; the rest counted, not written.
        self.assertEqual(len(lines), 20, log)
        self.assertNotIn("suppressed", log)
        # The next failure after the interval reports what was dropped.
        time.sleep(10.2)
        self.fail_transfers(["after\nthe interval"])
        time.sleep(0.2)
        log = self.daemon.log_text(tail=None)
        self.assertIn(f"suppressed {BURST - 20} similar 'transfer failed' lines", log)
        self.assertEqual(len(self.failed_lines(log)), 21, log)
        # The daemon serves on.
        self.assertEqual(self.c.status().node, 0)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.log_text())


if __name__ == "__main__":
    unittest.main()
