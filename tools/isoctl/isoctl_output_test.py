"""isoctl's output formats and --watch, against a real isometryd.

Run as isoctl_test.py is (ctest does it; its daemon helpers are shared):

    ISOMETRYD=build/daemon/isometryd ISOCTL=build/tools/isoctl/isoctl \\
        /usr/bin/python3 -m unittest -v isoctl_output_test      # in tools/isoctl

What is held here (docs/reference/cli.md, "Output formats"): every listing
prints -o json with numbers as JSON numbers, -o yaml as the same document
(read back with python3-yaml, same values of the same types), -o wide with
more columns than the table; a bad -o is exit 2 naming the choices; and
--watch prints frames until SIGINT or SIGTERM, then exits 0 (health: with
its last verdict), redrawing a terminal and separating frames elsewhere.
"""

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
import unittest

import isoctl_test as base

try:
    import yaml
except ImportError:  # Debian python3-yaml; scripts/install-deps.sh installs it
    yaml = None

# A slow channel (a copy in flight for seconds) and a peer that never
# answers (so `peers` has a row): every listing has something to show.
CHANNEL_AND_PEER = base.SLOW_CHANNEL + """
[cluster]
node_name = "a"
secret_file = "{dir}/cluster.secret"
data_listen = "127.0.0.1:0"
peer_timeout_ms = 300
keepalive_ms = 100

[[peer]]
name = "ghost"
address = "127.0.0.1:9"
"""

# health's verdict is the exit code (the ghost peer makes it 4 or 5).
HEALTH_CODES = (0, 4, 5)

# A number printed as a string, as protobuf's own JSON prints uint64s.
NUMERIC_TEXT = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")

# Fields that must be JSON numbers (int, or float for rates and times).
NUMBERS = {
    "status": {"node": int, "uptime_s": float, "sessions": int, "transfers_submitted": int,
               "transfers_completed": int, "allocations": int, "program_cache_bytes": int},
    "memories": {"pool_capacity": int, "pool_used": int, "client_quota": int,
                 "staging_budget": int, "staging_peak": int},
    "channels": {"threads": int, "max_in_flight": int, "requests_done": int, "bytes_done": int,
                 "current_bytes_per_s": float, "rate_limit_bytes_per_s": int},
    "peers": {"node": int, "rtt_ms": float, "bytes_sent": int, "resumes": int},
    "transfers": {"id": int, "priority": int, "bytes": int, "elapsed_s": float,
                  "predicted_bytes_per_s": float, "chunks_done": int, "chunks_total": int},
    "plan": {"chunks": int, "chunk_bytes": int, "request_bytes": int},
}


def walk(value, path=""):
    """(path, key, value) for every field of a document, nested ones too."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield path, k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


# Fields that move between two calls (clocks, progress, a peer's retries):
# a document printed twice has them of the same type, not the same value.
MOVING = frozenset({
    "uptime_s", "detail", "elapsed_s", "chunks_done", "current_bytes_per_s", "peak_bytes_per_s",
    "bytes_done", "requests_done", "requests_in_flight", "queued", "state", "last_error",
    "rtt_ms", "measured_bytes_per_s",
    # A copy in flight compiles programs for its chunks as it goes.
    "program_cache_hits", "program_cache_misses", "program_cache_bytes",
})


def same(a, b, moving=frozenset()):
    """Equal, and of the same JSON types all the way down (1 != 1.0 != True);
    the fields named in `moving` only of the same type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(
            type(a[k]) is type(b[k]) if k in moving else same(a[k], b[k], moving) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y, moving) for x, y in zip(a, b))
    return a == b


def columns(text):
    """The columns of the first table header in `text` (2+ spaces apart)."""
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z][A-Za-z0-9/()%:>\- ]*", line) and "  " in line:
            return re.split(r"\s{2,}", line.strip())
    return []


class OutputTest(base.IsoctlTest):
    channel_extra = CHANNEL_AND_PEER
    daemon_extra = (("grpc_tcp", '"127.0.0.1:0"'),)

    def run_ok(self, *args, codes=(0,)):
        r = self.isoctl(*args)
        self.assertIn(r.returncode, codes,
                      f"isoctl {' '.join(map(str, args))} exited {r.returncode}\n"
                      f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r.stdout

    def listings(self, transfer_id):
        """(name in NUMBERS, argv, exit codes, whether it stands still) of
        every listing; one that stands still prints the same document twice."""
        # The copy in flight first, while it surely is (it runs for seconds).
        return [
            ("transfers", ["transfers"], (0,), False),
            ("channels", ["channels"], (0,), False),
            ("status", ["status"], (0,), False),
            ("peers", ["peers"], (0,), False),
            ("health", ["health"], HEALTH_CODES, False),
            ("memories", ["memories"], (0,), True),
            ("transfers", ["transfers", "--recent"], (0,), True),
            ("transfers", ["transfers", transfer_id], (0,), True),
            ("orphans", ["orphans"], (0,), True),
            ("plan", ["plan", "sys0", "sys0", "--extents", "4096"], (0,), True),
        ]

    def check_numbers(self, name, doc):
        for path, key, value in walk(doc):
            if isinstance(value, str) and key != "time":
                self.assertIsNone(NUMERIC_TEXT.fullmatch(value),
                                  f"{name}: {path}.{key} is a number printed as a string")
            want = NUMBERS.get(name, {}).get(key)
            if want is not None and not isinstance(value, (dict, list)):
                self.assertIs(type(value), want, f"{name}: {path}.{key} = {value!r}")

    def test_every_listing_in_every_format(self):
        if yaml is None:
            self.skipTest("no python3-yaml (scripts/install-deps.sh installs it)")
        # One ended transfer for --recent, one in flight for the rest.
        ended = self.json("copy", "--extents", "4096")["info"]["id"]
        proc, running = self.start_slow_copy()
        in_flight = None  # the first `transfers` document, taken while the copy runs
        for name, args, codes, still in self.listings(ended):
            with self.subTest(args=args):
                # Each document is its own call: the moving fields may differ.
                doc = json.loads(self.run_ok("-o", "json", *args, codes=codes))
                if in_flight is None and args == ["transfers"]:
                    in_flight = doc
                alias = json.loads(self.run_ok("--json", *args, codes=codes))
                self.assertTrue(same(alias, doc, MOVING), f"--json:\n{alias}\n-o json:\n{doc}")
                self.check_numbers(name, doc)
                from_yaml = yaml.safe_load(self.run_ok(*args, "-o", "yaml", codes=codes))
                self.assertTrue(same(from_yaml, doc, frozenset() if still else MOVING),
                                f"yaml:\n{from_yaml}\njson:\n{doc}")
                table = self.run_ok(*args, codes=codes)
                wide = self.run_ok(*args, "--output", "wide", codes=codes)
                self.assertTrue(table.strip())
                self.assertTrue(wide.strip())
        # The numbers NUMBERS names were all there, nested ones included:
        # checked in the document taken while the copy surely ran (under a
        # sanitizer on a busy machine it may have ended since).
        self.assertIn("chunks_total", json.dumps(in_flight))
        self.assertEqual(running["priority"], 5)
        self.ok("cancel", running["id"])
        proc.communicate(timeout=base.COMMAND_TIMEOUT_S)

    def test_wide_has_more_columns(self):
        ended = self.json("copy", "--extents", "4096")["info"]["id"]
        self.assertGreater(ended, 0)
        proc, running = self.start_slow_copy()
        # The copy in flight first, while it surely is (it runs for seconds).
        for args in (["transfers"], ["channels"], ["memories"], ["peers"],
                     ["transfers", "--recent"]):
            with self.subTest(args=args):
                table, wide = columns(self.ok(*args)), columns(self.ok(*args, "-o", "wide"))
                self.assertTrue(table, self.ok(*args))
                self.assertGreater(len(wide), len(table), f"{wide} vs {table}")
                self.assertEqual(wide[:len(table)], table)
        self.assertIn("priority: 5", self.ok("transfers", running["id"], "-o", "wide"))
        self.assertNotIn("priority:", self.ok("transfers", running["id"]))
        self.ok("cancel", running["id"])
        proc.communicate(timeout=base.COMMAND_TIMEOUT_S)

    def test_bad_output_is_a_usage_error(self):
        cases = [
            (["-o", "xml", "status"], "-o/--output 'xml': expected table, wide, json or yaml"),
            (["status", "--output", "JSON"], "'JSON': expected table, wide, json or yaml"),
            (["--json", "-o", "yaml", "status"], "--json is -o json; it cannot go with -o yaml"),
            (["-o", "yaml", "copy"], "-o yaml: `copy` prints table or json"),
            (["top", "--once", "-o", "wide"], "-o wide: `top` prints table or json"),
            (["status", "--watch", "0"], "--watch"),
            (["status", "-w", "soon"], "--watch"),
            (["orphans", "--free-all", "-w", "1"], "--watch lists orphans again"),
            (["copy", "--watch", "1"], "--watch"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.isoctl(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stdout, "")

    def watch(self, *args, frames=2, begun=lambda out: out.count("\n"), stop=signal.SIGINT):
        """Runs `isoctl ARGS` (a --watch) until `frames` frames began
        (`begun` counts them in the output so far), then `stop`; returns
        (exit code, stdout, stderr). A signal lets the frame being printed
        finish, so the output holds whole frames only."""
        cmd = [base.ISOCTL, "--socket", self.daemon.socket, *map(str, args)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        out = ""
        deadline = time.monotonic() + base.COMMAND_TIMEOUT_S
        while begun(out) < frames:
            self.assertLess(time.monotonic(), deadline, f"{frames} frames never came:\n{out}")
            line = proc.stdout.readline()
            if not line:
                self.fail(f"isoctl ended: {proc.wait()} {proc.stderr.read()}\n{out}")
            out += line
        proc.send_signal(stop)
        # Not communicate(): it reads the pipes' fds and would miss what
        # readline() has buffered already.
        rest, err = proc.stdout.read(), proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        return proc.wait(timeout=base.COMMAND_TIMEOUT_S), out + rest, err

    def test_watch_json_lines(self):
        code, out, err = self.watch("-o", "json", "status", "--watch", "0.2", frames=3)
        self.assertEqual(code, 0, err)
        docs = [json.loads(line) for line in out.splitlines()]
        self.assertGreaterEqual(len(docs), 3)
        for doc in docs:
            self.assertEqual(list(doc)[0], "time")
            self.assertRegex(doc["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.check_numbers("status", doc)
        self.assertGreater(docs[-1]["uptime_s"], docs[0]["uptime_s"])

    def test_watch_table_frames_on_a_pipe(self):
        code, out, err = self.watch("channels", "-w", "0.2", frames=2,
                                    begun=lambda out: out.count("--- "))
        self.assertEqual(code, 0, err)
        # No terminal: no clear-screen; frames "--- TIME" apart, a blank line before each.
        self.assertNotIn("\x1b", out)
        self.assertRegex(out, r"^--- \d{4}-\d\d-\d\dT[\d:.]+Z\n")
        frames = out.split("\n\n--- ")
        self.assertGreaterEqual(len(frames), 2)
        for frame in frames:
            self.assertRegex(frame, r"(?m)^CHANNEL\s+KIND", out)

    def test_watch_table_redraws_a_terminal(self):
        # stdout a pseudo-terminal: each frame clears the screen and redraws.
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        cmd = [base.ISOCTL, "--socket", self.daemon.socket, "memories", "-w", "0.2"]
        proc = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, text=True)
        os.close(slave)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        screen = b""
        deadline = time.monotonic() + base.COMMAND_TIMEOUT_S
        while screen.count(b"\x1b[H\x1b[2J") < 2:
            self.assertLess(time.monotonic(), deadline, f"no two redraws: {screen!r}")
            if select.select([master], [], [], 1)[0]:
                screen += os.read(master, 65536)
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=base.COMMAND_TIMEOUT_S), 0, proc.stderr.read())
        proc.stderr.close()
        frame = screen.split(b"\x1b[H\x1b[2J")[1].decode()
        self.assertRegex(frame, r"^every 0.2 s: isoctl .* memories -w 0.2  \d{4}-")
        self.assertRegex(frame, r"(?m)^MEMORY\s+KIND")
        self.assertNotIn("--- ", frame)

    def test_watch_yaml_documents(self):
        if yaml is None:
            self.skipTest("no python3-yaml (scripts/install-deps.sh installs it)")
        code, out, err = self.watch("memories", "-o", "yaml", "-w", "0.2", frames=2,
                                    begun=lambda out: out.count("---"), stop=signal.SIGTERM)
        self.assertEqual(code, 0, err)
        docs = list(yaml.safe_load_all(out))
        self.assertGreaterEqual(len(docs), 2)
        for doc in docs:
            self.assertEqual(list(doc)[0], "time")
            self.assertEqual(doc["memories"][0]["name"], "sys0")

    def test_watch_health_exits_with_the_last_verdict(self):
        # The ghost peer: degraded while connecting, then unhealthy.
        code, out, err = self.watch("-o", "json", "health", "-w", "0.2", frames=2)
        self.assertIn(code, HEALTH_CODES, err)
        self.assertGreaterEqual(len(out.splitlines()), 2)
        last = json.loads(out.splitlines()[-1])
        self.assertEqual(code, {"ok": 0, "warning": 4, "critical": 5}[last["state"]], err)


if __name__ == "__main__":
    unittest.main()
