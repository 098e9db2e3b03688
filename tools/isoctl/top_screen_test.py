"""`isoctl top`'s full screen driven in a pseudo-terminal against a real
isometryd: keys in, screen out (issue #54, item 1).

The terminal is 80x24 (TIOCSWINSZ before isoctl starts), TERM=xterm,
UTF-8. What isoctl writes is fed to pyte, a VT100 emulator (Debian's
python3-pyte), and the tests read its screen: the pane tabs, headers and
rows, the status line. Run by ctest with ISOMETRYD and ISOCTL set (see
isoctl_test.py); without pyte every test skips and says why.
"""

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
import unittest

from isoctl_test import COMMAND_TIMEOUT_S, ISOCTL, IsoctlTest

try:
    import pyte
except ImportError:  # scripts/install-deps.sh installs python3-pyte
    pyte = None

NO_PYTE = "python3-pyte is not installed (apt-get install python3-pyte): no terminal emulator"
if pyte is None:
    print(f"top_screen_test: skipped: {NO_PYTE}", file=__import__("sys").stderr)

# Long enough for a loaded machine; every wait polls and ends early.
SCREEN_TIMEOUT_S = 20
# Down as an xterm sends it in the keypad mode curses turns on (kcud1).
DOWN, ESC = "\x1bOB", "\x1b"
# 2 MiB/s: start_slow_copy's 32 MiB copy stays in flight for ~16 s.
SLOWER_CHANNEL = 'request_size = "1MiB"\nrate_limit = "2MiB"'


if pyte is not None:

    class VtScreen(pyte.Screen):
        """pyte's screen with what xterm's terminfo lets ncurses send and pyte
        0.8 lacks: REP (repeat the last character, CSI n b), SU and SD (scroll
        the region up or down, CSI n S / CSI n T)."""

        last = ""

        def draw(self, data):
            super().draw(data)
            if data:
                self.last = data[-1]

        def repeat_last(self, count=1, *args, **kwargs):
            if self.last:
                self.draw(self.last * max(count, 1))

        def _scroll(self, count, up):
            top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
            y, x = self.cursor.y, self.cursor.x
            self.cursor.y = bottom if up else top
            for _ in range(max(count, 1)):
                self.index() if up else self.reverse_index()
            self.cursor.y, self.cursor.x = y, x

        def scroll_up(self, count=1, *args, **kwargs):
            self._scroll(count, up=True)

        def scroll_down(self, count=1, *args, **kwargs):
            self._scroll(count, up=False)

    class VtStream(pyte.ByteStream):
        csi = dict(pyte.ByteStream.csi, b="repeat_last", S="scroll_up", T="scroll_down")


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """isoctl on the slave side of a pty; its output read into a pyte screen."""

    def __init__(self, argv, rows=24, cols=80, term="xterm"):
        self.master, slave = os.openpty()
        set_size(slave, rows, cols)
        env = dict(os.environ, TERM=term, LANG="C.UTF-8", LC_ALL="C.UTF-8")
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
            # The pty is the session's controlling terminal, so a resize
            # sends isoctl SIGWINCH.
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.screen = VtScreen(cols, rows)
        self.stream = VtStream(self.screen)
        self.raw = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.1)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the slave side closed
                return
            if not data:
                return
            with self.lock:
                self.raw += data
                self.stream.feed(data)

    def lines(self):
        with self.lock:
            return list(self.screen.display)

    def text(self):
        return "\n".join(self.lines())

    def send(self, keys):
        os.write(self.master, keys.encode())

    def resize(self, rows, cols):
        with self.lock:
            self.screen.resize(rows, cols)
        set_size(self.master, rows, cols)

    def wait_for(self, test, what, timeout=SCREEN_TIMEOUT_S):
        """Polls until test(lines) holds; fails with the screen if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if test(self.lines()):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"screen never showed {what}; exit {self.proc.poll()}; screen:\n"
                             + self.text())

    def wait_text(self, needle, timeout=SCREEN_TIMEOUT_S):
        self.wait_for(lambda lines: any(needle in line for line in lines), repr(needle), timeout)

    def quit(self):
        self.send("q")
        code = self.proc.wait(timeout=COMMAND_TIMEOUT_S)
        self.reader.join(timeout=5)
        return code

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.reader.join(timeout=5)
        os.close(self.master)


@unittest.skipIf(pyte is None, NO_PYTE)
class TopScreenTest(IsoctlTest):
    channel_extra = SLOWER_CHANNEL

    def top(self, *args, operator=True, **kw):
        token = os.path.join(self.daemon.dir, "state", "operator.token") if operator else ""
        t = Terminal([ISOCTL, "--socket", self.daemon.socket, "--operator-token", token, "top",
                      "--interval-ms", "200", *args], **kw)
        self.addCleanup(t.close)
        return t

    def recent(self, transfer_id):
        for t in self.json("transfers", "--recent")["transfers"]:
            if t["id"] == transfer_id:
                return t
        return None

    def test_panes_keys_and_resize(self):
        proc, copy = self.start_slow_copy()
        t = self.top()
        t.wait_text("[1 Channels]")
        t.wait_text("memcpy0")
        lines = t.lines()
        self.assertRegex(lines[0], r"^isoctl top  \d\d:\d\d:\d\d  every 200 ms  unix:/")
        # At 80 columns the less needed columns give way (KIND among the
        # first when the figures are wide); EDGES stays, cut to fit.
        self.assertRegex(lines[3], r"^CHANNEL\s+(KIND\s+)?IN-FLIGHT\s+QUEUED\s+CURRENT\s+UTIL\s")
        self.assertIn("EDGES", lines[3])
        self.assertNotIn("REQUESTS", lines[3])
        self.assertRegex(lines[4], r"^memcpy0\s+(memcpy\s+)?\d+/\d+\s")

        t.send("2")
        t.wait_text("[2 Transfers]")
        t.wait_text(f"{copy['id']}  running")
        self.assertRegex(t.text(), r"ID\s+STATE\s+(PRIO\s+)?SIZE\s+DONE\s+RATE\s+PREDICTED")
        t.send("\r")  # Enter: the selected transfer's hops
        t.wait_text(f"hops of transfer {copy['id']}")
        t.wait_for(lambda lines: any(l.startswith("  0  memcpy0  sys0->sys0") for l in lines),
                   "hop 0")
        t.wait_text("rate: predicted ")
        t.send(ESC)
        t.wait_text("PREDICTED")

        t.send("3")
        t.wait_text("[3 Peers]")
        t.wait_text("has no peers (a single node)")
        t.send("4")
        t.wait_text("[4 Memories]")
        t.wait_for(lambda lines: any(l.startswith("sys0  ") for l in lines), "the sys0 row")
        t.send("\t")
        t.wait_text("[1 Channels]")

        # s sorts by the first column, A to Z; r reverses it.
        t.send("s")
        t.wait_text("CHANNEL ^")
        t.send("r")
        t.wait_text("CHANNEL v")
        # A filter nothing matches, then no filter.
        t.send("/zzz\r")
        t.wait_text("no rows match the filter 'zzz'")
        t.wait_text("filter: zzz")
        t.send("/\x7f\x7f\x7f\r")
        t.wait_for(lambda lines: lines[4].startswith("memcpy0"), "memcpy0 again")

        t.send("?")
        t.wait_text("isoctl top: keys")
        t.send("x")  # any key closes the help
        t.wait_text("CHANNEL v")
        t.send("p")
        t.wait_text("PAUSED")
        t.send("p")
        t.wait_for(lambda lines: "PAUSED" not in lines[0], "the pause ending")

        # A wider window: redrawn to it.
        t.resize(30, 120)
        t.wait_for(lambda lines: len(lines) == 30 and "[1 Channels]" in lines[2]
                   and "REQUESTS" in lines[3] and lines[4].startswith("memcpy0"),
                   "the 120-column table, every column in it")
        self.assertEqual(t.quit(), 0)
        # The normal screen is back (xterm's rmcup).
        self.assertIn(b"\x1b[?1049l", bytes(t.raw))
        # A transfer still running at SIGTERM makes the daemon exit 1.
        self.ok("cancel", copy["id"])
        proc.communicate(timeout=COMMAND_TIMEOUT_S)

    def test_cancel_needs_the_operator_token(self):
        _, copy = self.start_slow_copy()
        # Another client's transfer, no token: the daemon refuses, the
        # status line says why and the transfer runs on.
        t = self.top(operator=False)
        t.wait_text("[1 Channels]")
        t.send("2")
        t.wait_text(f"{copy['id']}  running")
        t.send("c")
        t.wait_text(f"cancel {copy['id']} refused: PERMISSION_DENIED: ")
        # Ctrl-C ends it as q does, with success and the screen restored.
        t.send("\x03")
        self.assertEqual(t.proc.wait(timeout=COMMAND_TIMEOUT_S), 0)
        t.reader.join(timeout=5)
        self.assertIn(b"\x1b[?1049l", bytes(t.raw))
        self.assertEqual(self.json("transfers", copy["id"])["state"], "running")

        # With the token: j/k move the selection (one transfer: it stays),
        # c cancels it and the pane empties.
        t = self.top()
        t.wait_text("[1 Channels]")
        t.send("2")
        t.wait_text(f"{copy['id']}  running")
        t.send(DOWN + "k")
        t.send("c")
        t.wait_text(f"cancel requested for transfer {copy['id']}")
        t.wait_text("no transfers in flight")
        deadline = time.monotonic() + SCREEN_TIMEOUT_S
        while (ended := self.recent(copy["id"])) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIsNotNone(ended, "the cancelled copy is not among the recent transfers")
        self.assertEqual(ended["state"], "cancelled")

        # The daemon goes away: the last snapshot stays, and line 2 says why.
        self.stop_daemon()
        t.wait_text("refresh failed (showing the last snapshot): ")
        self.assertIn("isometryd", t.lines()[1])
        self.assertEqual(t.quit(), 0)

    def test_frames_where_there_is_no_full_screen(self):
        # --once on a terminal: one frame, printed, no screen control.
        t = self.top("--once")
        self.assertEqual(t.proc.wait(timeout=COMMAND_TIMEOUT_S), 0)
        t.reader.join(timeout=5)
        out = bytes(t.raw).decode()
        self.assertNotIn("\x1b", out)
        self.assertEqual(out.count("memcpy0"), 1)
        self.assertIn("CHANNEL", out)

        # TERM=dumb: frames (the frame printer's own redraw), no alternate screen.
        t = self.top("--iterations", "2", term="dumb")
        self.assertEqual(t.proc.wait(timeout=COMMAND_TIMEOUT_S), 0)
        t.reader.join(timeout=5)
        out = bytes(t.raw)
        self.assertNotIn(b"\x1b[?1049h", out)
        self.assertEqual(out.count(b"memcpy0"), 2)

        # stdout a pipe: frames, with nothing to clear.
        r = subprocess.run([ISOCTL, "--socket", self.daemon.socket, "top", "--iterations", "2",
                            "--interval-ms", "20"], capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\x1b", r.stdout)
        self.assertEqual(r.stdout.count("memcpy0"), 2)


if __name__ == "__main__":
    unittest.main()
