"""End-to-end tests of isoctl against a real isometryd.

Run with Debian's interpreter (stdlib only); ctest does this for you:

    ISOMETRYD=build/daemon/isometryd ISOCTL=build/tools/isoctl/isoctl \\
        /usr/bin/python3 -m unittest -v isoctl_test      # in tools/isoctl

ISOMETRYD and ISOCTL name the two binaries; without them every test is
skipped, and the reason is printed. Each test starts its own daemon with a
config in a fresh temporary directory (sockets and state_dir inside it) and
stops it with SIGTERM, requiring exit status 0.

What isoctl promises and these tests hold it to: --json prints the daemon's
responses as JSON (proto field names, every scalar field; integers of
every width as JSON numbers, "<" and ">" unescaped), and the exit code says who failed:
0 success, 1 the daemon said no, 2 usage error, 3 no daemon on the socket.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "pyfixture")
)
from isometryd_process import IsometrydProcess, daemon_section  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
ISOCTL = os.environ.get("ISOCTL", "")

SKIP_REASON = (
    "ISOMETRYD and ISOCTL are not both set: point them at the isometryd and isoctl "
    "binaries to run the isoctl tests"
)
if not (ISOMETRYD and ISOCTL):
    print(f"isoctl_test: skipped: {SKIP_REASON}", file=sys.stderr)

POOL_BYTES = 256 << 20

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="warn", shutdown_grace_ms=2000)
CONFIG = """
[[memory]]
name = "sys0"
pool = "256MiB"

[[channel]]
name = "memcpy0"
{channel_extra}
"""

# Long enough for a loaded CI machine; every wait below polls and ends early.
START_TIMEOUT_S = 20
COMMAND_TIMEOUT_S = 60
EXIT_TIMEOUT_S = 20


class Daemon:
    """One isometryd in its own temporary directory."""

    def __init__(self, channel_extra="", daemon_extra=()):
        self.dir = tempfile.mkdtemp(prefix="isoctl-test-")
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.config = os.path.join(self.dir, "isometryd.toml")
        # A cluster section may name {dir}/cluster.secret; a single node ignores it.
        with open(os.path.join(self.dir, "cluster.secret"), "w") as f:
            f.write("isoctl test secret, long enough\n")
        os.chmod(os.path.join(self.dir, "cluster.secret"), 0o600)
        with open(self.config, "w") as f:
            f.write(daemon_section(self.dir, ISOMETRYD, **DAEMON, extra=daemon_extra)
                    + CONFIG.format(dir=self.dir,
                                    channel_extra=channel_extra.replace("{dir}", self.dir)))
        self.process = IsometrydProcess(
            ISOMETRYD, self.config, os.path.join(self.dir, "isometryd.log"), self.socket
        )

    def log(self):
        return self.process.log_text(tail=None)

    def wait_ready(self):
        """Started, and answering `isoctl status`."""

        def answers():
            r = subprocess.run(
                [ISOCTL, "--socket", self.socket, "--timeout-ms", "2000", "status"],
                capture_output=True,
                timeout=COMMAND_TIMEOUT_S,
            )
            return r.returncode == 0

        self.process.start(ready=answers, timeout_s=START_TIMEOUT_S)

    def stop(self):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        return self.process.stop(timeout_s=EXIT_TIMEOUT_S)

    def cleanup(self):
        self.process.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(ISOMETRYD and ISOCTL, SKIP_REASON)
class IsoctlTest(unittest.TestCase):
    channel_extra = ""
    daemon_extra = ()  # (key, TOML value) pairs for [daemon]

    def setUp(self):
        self.daemon = Daemon(self.channel_extra, self.daemon_extra)
        self.addCleanup(self.daemon.cleanup)
        self.daemon.wait_ready()
        self.stopped = False

    def tearDown(self):
        if not self.stopped:
            self.stop_daemon()

    def stop_daemon(self):
        self.stopped = True
        code = self.daemon.stop()
        self.assertEqual(code, 0, f"isometryd did not exit 0 on SIGTERM:\n{self.daemon.log()}")

    # ---- helpers ----

    def isoctl(self, *args, socket=None, env=None, operator=True):
        """Runs isoctl against this test's daemon; returns the CompletedProcess.

        With `operator`, isoctl gets the daemon's operator token (the file
        only the daemon's user can read), as root or the isometry user would.
        """
        cmd = [ISOCTL, "--socket", socket or self.daemon.socket] if socket != "" else [ISOCTL]
        token = os.path.join(self.daemon.dir, "state", "operator.token")
        cmd += ["--operator-token", token if operator else ""]
        return subprocess.run(
            cmd + [str(a) for a in args],  # ids come from the JSON as numbers
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            env=env,
        )

    def ok(self, *args):
        r = self.isoctl(*args)
        self.assertEqual(
            r.returncode,
            0,
            f"isoctl {' '.join(map(str, args))} exited {r.returncode}\nstdout:\n{r.stdout}\n"
            f"stderr:\n{r.stderr}\ndaemon log:\n{self.daemon.log()}",
        )
        return r.stdout

    def json(self, *args):
        out = self.ok("--json", *args)
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            self.fail(f"isoctl --json {' '.join(args)} printed no JSON document ({e}):\n{out}")

    def channel(self, name):
        channels = self.json("channels")["channels"]
        for c in channels:
            if c["name"] == name:
                return c
        self.fail(f"no channel {name} in {channels}")

    def start_slow_copy(self):
        """A 32 MiB `isoctl copy` at priority 5 in the background (on
        SLOW_CHANNEL it runs for seconds); returns the process and its
        TransferInfo once `transfers` lists it with its hops."""
        proc = subprocess.Popen(
            [ISOCTL, "--socket", self.daemon.socket, "--json", "copy", "--extents", "4194304",
             "--priority", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        deadline = time.monotonic() + 20
        while True:
            transfers = self.json("transfers")["transfers"]
            if transfers and transfers[0]["hops"]:
                return proc, transfers[0]
            if proc.poll() is not None:
                self.fail(f"the copy ended before it showed up in flight: {proc.communicate()}")
            self.assertLess(time.monotonic(), deadline, "the copy never showed up")
            time.sleep(0.05)


class ReadCommandsTest(IsoctlTest):
    def test_status(self):
        s = self.json("status")
        self.assertRegex(s["version"], r"^\d+\.\d+\.\d+")
        self.assertEqual(s["node"], 0)
        self.assertGreater(s["uptime_s"], 0)
        # Every scalar field is printed, zero or not; uint64 as numbers.
        for key in ("transfers_submitted", "transfers_completed", "transfers_failed",
                    "transfers_cancelled", "transfers_active", "allocations", "instances"):
            self.assertIs(type(s[key]), int, key)
            self.assertEqual(s[key], 0, key)
        self.assertEqual(s["sessions"], 0)

        human = self.ok("status")
        self.assertRegex(human, r"(?m)^version\s+" + s["version"])
        self.assertRegex(human, r"(?m)^uptime\s+\d")

    def test_memories(self):
        memories = self.json("memories")["memories"]
        by_name = {m["name"]: m for m in memories}
        self.assertIn("sys0", by_name)
        sys0 = by_name["sys0"]
        self.assertEqual(int(sys0["pool_capacity"]), POOL_BYTES)
        self.assertEqual(sys0["pool_capacity"], 268435456)  # a JSON number, not a string
        self.assertEqual(int(sys0["pool_used"]), 0)
        self.assertEqual(int(sys0["client_quota"]), POOL_BYTES)  # defaults to the pool
        self.assertEqual(sys0["kind"], "SYS")
        self.assertEqual(sys0["id"], {"node": 0, "memory": 0})

        human = self.ok("memories")
        self.assertRegex(human, r"(?m)^MEMORY\s+KIND")
        self.assertRegex(human, r"(?m)^sys0\s+SYS\s+0:0\s+256\.00 MiB\s+0 B\s+256\.00 MiB")

    def test_channels(self):
        c = self.channel("memcpy0")
        self.assertEqual(c["kind"], "memcpy")
        self.assertEqual(c["edges"], ["sys0->sys0"])
        self.assertGreater(c["max_in_flight"], 0)
        self.assertEqual(c["requests_in_flight"], 0)
        self.assertEqual(c["queued"], [])
        self.assertEqual(c["requests_done"], 0)
        self.assertEqual(c["bytes_done"], 0)
        self.assertEqual(c["rate_limit_bytes_per_s"], 0)

        human = self.ok("channels")
        self.assertRegex(human, r"(?m)^CHANNEL\s+KIND\s+IN-FLIGHT\s+QUEUED")
        self.assertRegex(
            human, rf"(?m)^memcpy0\s+memcpy\s+0/{c['max_in_flight']}\s+-\s+0\s+0 B\s+.*none"
        )

    def test_transfers_idle(self):
        self.assertEqual(self.json("transfers"), {"transfers": []})
        self.assertEqual(self.ok("transfers"), "no transfers in flight\n")

    def test_plan(self):
        p = self.json("plan", "sys0", "sys0", "--extents", "64x32", "--fields", "a:4,b:8",
                      "--dst-layout", "x,y,F")
        self.assertTrue(p["algorithm"])
        self.assertTrue(p["text"])
        self.assertEqual(len(p["hops"]), 1)
        hop = p["hops"][0]
        self.assertEqual(hop["channel"], "memcpy0")
        self.assertEqual((hop["src_memory"], hop["dst_memory"]), ("sys0", "sys0"))
        self.assertEqual(hop["src_layout"], "F,x,y")  # the default for two dimensions
        self.assertEqual(hop["dst_layout"], "x,y,F")
        self.assertGreater(int(hop["request_bytes"]), 0)
        self.assertEqual(hop["buffer_bytes"], 0)

        human = self.ok("plan", "sys0", "sys0", "--extents", "64x32", "--dst-layout", "x,y,F")
        self.assertIn("algorithm: ", human)
        self.assertRegex(human, r"(?m)^\s*0\s+memcpy0\s+sys0->sys0\s+F,x,y\s+x,y,F\s")

    def test_plan_datatypes(self):
        """--src-type/--dst-type send datatypes; the daemon's why (runs per
        end) is printed, and is in the JSON too."""
        vec = ["--src-type", "vector(1024, 8, 16, byte)"]
        both = self.ok("plan", "sys0", "sys0", *vec, "--dst-type", "contiguous(8192,byte)")
        # One datatype on one side, a layout over the shape on the other.
        mixed = self.ok("plan", "sys0", "sys0", *vec, "--extents", "8192", "--fields", "v:1")
        for human in (both, mixed):
            self.assertRegex(human, r"(?m)^path: sys0.*-\[memcpy0\]-> sys0")
            self.assertRegex(human, r"(?m)^\s*0\s+memcpy0\s+sys0->sys0\s")
            self.assertRegex(human, r"(?m)^why: source 1 x vector\(1024,8,16B; byte\): "
                             r"8192 bytes in 1024 runs.*")
        self.assertRegex(both, r"(?m)^why: .*destination 1 x contiguous\(8192; byte\)")
        self.assertRegex(mixed, r"(?m)^why: .*destination layout 'F,x'")
        p = self.json("plan", "sys0", "sys0", *vec, "--src-count", "2",
                      "--dst-type", "contiguous(16384,byte)")
        self.assertIn("2 x vector(1024,8,16B; byte)", p["why"])
        # The 2nd element starts at the extent, where the 1st's last run ends.
        self.assertIn("16384 bytes in 2047 runs", p["why"])
        # Only what JSON requires is escaped: "->" stays readable in the raw text.
        raw = self.ok("--json", "plan", "sys0", "sys0", *vec, "--dst-type", "contiguous(8192,byte)")
        self.assertIn("sys0 -> sys0", raw)
        self.assertNotIn("\\u003", raw)

    def test_plan_bad_type_is_a_usage_error(self):
        for args, message in (
            (["--src-type", "vector(1024,8,16,bytes)"], "column 18: expected a datatype"),
            (["--dst-type", "contiguous(8,byte"], "expected ')', got end of text"),
            (["--src-type", "byte", "--src-layout", "F,x"], "give one of them"),
            (["--dst-type", "byte", "--dst-count", "-1"], "--dst-count"),
        ):
            with self.subTest(args=args):
                # Found before connecting: no daemon on this socket.
                r = self.isoctl("plan", "sys0", "sys0", *args, socket="/nonexistent/grpc.sock")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)

    def test_top_json_lines_and_plain_frames(self):
        out = self.ok("--json", "top", "--iterations", "2", "--interval-ms", "20")
        docs = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(docs), 2)  # one document a frame
        for doc in docs:
            self.assertEqual(list(doc), ["time", "status", "channels", "transfers"])
            self.assertRegex(doc["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertEqual(doc["channels"][0]["name"], "memcpy0")
            self.assertEqual(doc["transfers"], [])
            self.assertIs(type(doc["status"]["transfers_submitted"]), int)
        self.assertLessEqual(docs[0]["time"], docs[1]["time"])

        out = self.ok("top", "--iterations", "2", "--interval-ms", "20")
        self.assertNotIn("\x1b[", out)  # no screen control unless stdout is a tty
        self.assertEqual(out.count("memcpy0"), 2)


class HealthTest(IsoctlTest):
    def test_single_node_is_healthy(self):
        r = self.isoctl("health")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"(?m)^CHECK\s+STATE\s+DETAIL")
        self.assertRegex(r.stdout, r"(?m)^daemon\s+ok\s+isometryd \d+\.\d+\.\d+, up ")
        self.assertRegex(r.stdout, r"(?m)^memory sys0\s+ok\s+pool 0 B of 256\.00 MiB used")
        self.assertRegex(r.stdout, r"(?m)^channel memcpy0\s+ok\s")
        self.assertTrue(r.stdout.endswith("healthy\n"))
        h = self.json("health")
        self.assertEqual(h["state"], "ok")
        self.assertEqual([c["check"] for c in h["checks"]][:2], ["daemon", "memory sys0"])


class CompletionTest(unittest.TestCase):
    """The completion scripts isoctl writes from its own commands: each
    shell reads them, and bash and fish complete commands and options."""

    def script(self, shell):
        r = subprocess.run([ISOCTL, "completion", shell], capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        path = os.path.join(self.dir, f"isoctl.{shell}")
        with open(path, "w") as f:
            f.write(r.stdout)
        return path

    def setUp(self):
        if not ISOCTL:
            self.skipTest(SKIP_REASON)
        self.dir = tempfile.mkdtemp(prefix="isoctl-completion-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def shell(self, name):
        found = shutil.which(name)
        if not found:
            self.skipTest(f"no {name} on this machine (scripts/install-deps.sh installs it)")
        return found

    def test_bash_completes_commands_and_their_options(self):
        path = self.script("bash")
        probe = (f'source {path}\n'
                 'COMP_WORDS=(isoctl hea); COMP_CWORD=1; _isoctl; echo "${COMPREPLY[*]}"\n'
                 'COMP_WORDS=(isoctl --json plan sys0 --src-l); COMP_CWORD=4; _isoctl; '
                 'echo "${COMPREPLY[*]}"\n'
                 'COMP_WORDS=(isoctl status -o j); COMP_CWORD=3; _isoctl; echo "${COMPREPLY[*]}"\n'
                 'COMP_WORDS=(isoctl --output ""); COMP_CWORD=2; _isoctl; echo "${COMPREPLY[*]}"\n')
        r = subprocess.run([self.shell("bash"), "-c", probe], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(),
                         ["health", "--src-layout", "json", "table wide json yaml"])

    def test_fish_completes_commands_and_their_options(self):
        path = self.script("fish")
        r = subprocess.run([self.shell("fish"), "-c",
                            f'source {path}; complete -C "isoctl che"; complete -C "isoctl top --int"; '
                            'complete -C "isoctl sessions --output y"'],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split("\t")[0] for line in r.stdout.splitlines()]
        self.assertEqual(names, ["checkpoint-compact", "--interval-ms", "yaml"])

    def test_zsh_reads_its_script(self):
        path = self.script("zsh")
        r = subprocess.run([self.shell("zsh"), "-n", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            self.assertTrue(f.read().startswith("#compdef isoctl\n"))

    def test_unknown_shell_is_a_usage_error(self):
        r = subprocess.run([ISOCTL, "completion", "tcsh"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("tcsh", r.stderr)


class UnhealthyTest(IsoctlTest):
    """A peer that never answers (a port nothing listens on) makes the node
    unhealthy once it is declared down: exit 5, the peer named."""
    daemon_extra = (("grpc_tcp", '"127.0.0.1:0"'),)
    channel_extra = """
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

    def test_peer_down_is_critical(self):
        deadline = time.monotonic() + 30
        while True:
            r = self.isoctl("health")
            if r.returncode == 5 or time.monotonic() > deadline:
                break
            self.assertIn(r.returncode, (4, 5), r.stdout + r.stderr)  # connecting: degraded
            time.sleep(0.2)
        self.assertEqual(r.returncode, 5, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"(?m)^peer ghost\s+critical\s+(down|refused)")
        self.assertTrue(r.stdout.endswith("unhealthy\n"))
        self.assertIn("isoctl: unhealthy: 1 critical finding(s)", r.stderr)
        h = self.isoctl("--json", "health")
        self.assertEqual(h.returncode, 5)
        doc = json.loads(h.stdout)
        self.assertEqual(doc["state"], "critical")
        self.assertIn({"check": "peer ghost", "state": "critical"},
                      [{k: c[k] for k in ("check", "state")} for c in doc["checks"]])


class CopyTest(IsoctlTest):
    def test_copy_json(self):
        before = int(self.channel("memcpy0")["requests_done"])
        r = self.json("copy")  # default: 1048576 points of one 8-byte field, in sys0
        size = 1048576 * 8
        self.assertEqual(int(r["transfer"]), int(r["info"]["id"]))
        info = r["info"]
        self.assertEqual(info["state"], "done")
        self.assertEqual(info["code"], 0)
        self.assertEqual(int(info["bytes"]), size)
        self.assertGreater(info["elapsed_s"], 0)
        # The owner is shown, never the session's token.
        self.assertNotIn("session", info)
        self.assertEqual(info["owner"]["client_name"], "isoctl copy")
        self.assertGreater(int(info["owner"]["session_id"]), 0)
        self.assertEqual(len(info["hops"]), 1)
        hop = info["hops"][0]
        self.assertEqual(hop["channel"], "memcpy0")
        self.assertEqual(hop["chunks_done"], hop["chunks_total"])
        self.assertGreater(int(hop["chunks_total"]), 0)

        after = self.channel("memcpy0")
        self.assertGreater(int(after["requests_done"]), before)
        self.assertGreaterEqual(int(after["bytes_done"]), size)

        # The daemon keeps the finished transfer; `transfers ID` and `wait ID` find it.
        t = self.json("transfers", r["transfer"])
        self.assertEqual((t["id"], t["state"], t["bytes"]), (info["id"], "done", info["bytes"]))
        # The plan's prediction beside what the copy measured (no speed asserted).
        self.assertGreater(t["predicted_bytes_per_s"], 0)
        self.assertGreater(t["measured_bytes_per_s"], 0)
        self.assertRegex(self.ok("transfers", r["transfer"]),
                         r"throughput: predicted [\d.]+ [kMGT]?B/s, measured [\d.]+ [kMGT]?B/s "
                         r"\([\d.]+x\)")
        self.assertEqual(self.json("wait", r["transfer"])["state"], "done")

        s = self.json("status")
        self.assertEqual(s["transfers_submitted"], 1)
        self.assertEqual(s["transfers_completed"], 1)
        self.assertEqual(s["transfers_active"], 0)

    def test_copy_layout_change_verified(self):
        extents, fields = (128, 64, 3), {"a": 4, "b": 8, "c": 2}
        size = extents[0] * extents[1] * extents[2] * sum(fields.values())
        args = ["copy", "--extents", "x".join(map(str, extents)),
                "--fields", ",".join(f"{k}:{v}" for k, v in fields.items()),
                "--src-layout", "F,x,y,z", "--dst-layout", "z,y,x,F", "--priority", "2",
                "--verify"]
        r = self.json(*args)
        self.assertEqual(r["info"]["state"], "done")
        self.assertEqual(int(r["info"]["bytes"]), size)
        self.assertEqual(r["info"]["priority"], 2)
        self.assertEqual(r["info"]["hops"][0]["dst_layout"], "z,y,x,F")

        human = self.ok(*args)
        self.assertRegex(human, rf"transfer \d+: done, {size / 1024:.2f} KiB in .* = .*B/s")
        # The session by its number; never its token ("N." and 64 hex digits).
        self.assertRegex(human, r"session \d+ on unix:")
        self.assertNotRegex(human, r"[0-9a-f]{32}")
        self.assertRegex(human, rf"verified: {extents[0] * extents[1] * extents[2] * 3} elements")

    def test_copy_repeat_json_lines(self):
        out = self.ok("--json", "copy", "--extents", "4096", "--repeat", "3")
        docs = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(docs), 3)
        self.assertEqual([d["info"]["state"] for d in docs], ["done"] * 3)
        self.assertEqual(len({d["transfer"] for d in docs}), 3)

    def test_copy_frees_its_session(self):
        self.json("copy", "--extents", "65536")
        # The session ends with isoctl; the daemon then frees its allocations.
        deadline = time.monotonic() + 10
        while True:
            s = self.json("status")
            sys0 = self.json("memories")["memories"][0]
            if (s["sessions"], s["allocations"], sys0["pool_used"]) == (0, 0, 0):
                break
            self.assertLess(time.monotonic(), deadline, f"still held: {s} {sys0}")
            time.sleep(0.05)


class ExitCodeTest(IsoctlTest):
    def test_unreachable_socket_is_3(self):
        missing = os.path.join(self.daemon.dir, "no-such.sock")
        r = self.isoctl("--json", "status", socket=missing)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(missing, r.stderr)
        self.assertEqual(r.stdout, "")

        # A path that exists but where nobody listens (the config file).
        r = self.isoctl("status", socket=self.daemon.config)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(self.daemon.config, r.stderr)

    def test_socket_from_environment(self):
        env = dict(os.environ, ISOMETRY_SOCKET=self.daemon.socket)
        r = self.isoctl("--json", "status", socket="", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["node"], 0)

        env["ISOMETRY_SOCKET"] = os.path.join(self.daemon.dir, "elsewhere.sock")
        r = self.isoctl("status", socket="", env=env)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("elsewhere.sock", r.stderr)

    def test_daemon_errors_are_1(self):
        for args, code in [
            (["cancel", "999999"], "NOT_FOUND"),
            (["wait", "999999"], "NOT_FOUND"),
            (["transfers", "999999"], "NOT_FOUND"),
            (["plan", "sys0", "nomem"], "NOT_FOUND"),
            (["copy", "--memory", "nomem"], "NOT_FOUND"),
            (["copy", "--extents", "100000000"], "RESOURCE_EXHAUSTED"),  # 800 MB > pool
        ]:
            with self.subTest(args=args):
                r = self.isoctl("--json", *args)
                self.assertEqual(r.returncode, 1, f"{args}: {r.stderr}")
                self.assertIn(code + ": ", r.stderr)
        # The daemon is unharmed and the failed copies left nothing behind.
        self.assertEqual(self.json("memories")["memories"][0]["pool_capacity"], 268435456)

    def test_usage_errors_are_2(self):
        for args in (
            ["bogus"],
            [],
            ["status", "--bogus"],
            ["cancel"],
            ["cancel", "seven"],
            ["plan", "sys0"],
            ["plan", "sys0", "sys0", "--src-layout", "F,q"],
            ["plan", "sys0", "sys0", "--fields", "a:2000000"],
            ["copy", "--extents", "0x4"],
            ["copy", "--fields", "a"],
            ["copy", "--src-layout", "F,F,x"],
            ["copy", "--pattern", "0x100"],
            ["top", "--interval-ms", "1"],
        ):
            with self.subTest(args=args):
                r = self.isoctl(*args)
                self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
        # A usage error is found before connecting: even without a daemon.
        r = self.isoctl("copy", "--extents", "0", socket="/nonexistent/grpc.sock")
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_typos_get_a_suggestion(self):
        for args, hint in (
            (["statsu"], "no command 'statsu'; did you mean 'status'?"),
            (["trasnfers"], "no command 'trasnfers'; did you mean 'transfers'?"),
            (["status", "--jsn"], "no option '--jsn'; did you mean '--json'?"),
            (["plan", "sys0", "sys0", "--extnts", "64"], "no option '--extnts'; did you mean '--extents'?"),
        ):
            with self.subTest(args=args):
                r = self.isoctl(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(hint, r.stderr)
        # Nothing near: no guess.
        r = self.isoctl("xyzzy")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn("did you mean", r.stderr)

    def test_named_operator_token_must_be_readable(self):
        """A token file the user named (option or environment) that cannot
        be read is an error that names it, before anything is asked."""
        d = self.daemon.dir
        os.mkdir(os.path.join(d, "a-directory"))
        with open(os.path.join(d, "empty.token"), "w"):
            pass
        cases = [
            (["--operator-token", os.path.join(d, "missing.token")], None, "No such file"),
            (["--operator-token", os.path.join(d, "a-directory")], None, "Is a directory"),
            (["--operator-token", os.path.join(d, "empty.token")], None, "holds no token"),
            ([], {"ISOMETRY_OPERATOR_TOKEN": os.path.join(d, "missing.token")}, "No such file"),
        ]
        for args, env_extra, says in cases:
            with self.subTest(args=args, env=env_extra):
                env = dict(os.environ, **(env_extra or {}))
                r = subprocess.run(
                    [ISOCTL, "--socket", self.daemon.socket] + args + ["status"],
                    capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("operator token file", r.stderr)
                self.assertIn(says, r.stderr)
                self.assertEqual(r.stdout, "")
        # "" names no file: the call goes ahead without operator rights.
        r = self.isoctl("status", operator=False)
        self.assertEqual(r.returncode, 0, r.stderr)

    def run_as_nobody(self, *args):
        return subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", ISOCTL,
             "--socket", self.daemon.socket, "--operator-token", ""] + list(args),
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                         "needs root and setpriv to run isoctl as another user")
    def test_permission_denied_names_the_group(self):
        """A user the socket's permissions keep out hears so, and which
        group to join, not "is isometryd running?"."""
        os.chmod(self.daemon.dir, 0o755)
        # The socket itself closed (the daemon's socket_mode 0660, group root).
        os.chmod(self.daemon.socket, 0o660)
        r = self.run_as_nobody("status")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("permission denied", r.stderr)
        self.assertIn(f"{self.daemon.socket} is open to group 'root' (mode 0660)", r.stderr)
        self.assertIn("usermod -aG root", r.stderr)
        self.assertNotIn("is isometryd running", r.stderr)
        # The directory closed, as /run/isometry (RuntimeDirectoryMode=0750).
        os.chmod(self.daemon.dir, 0o750)
        r = self.run_as_nobody("status")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(f"{self.daemon.dir} is open to group 'root' (mode 0750)", r.stderr)
        self.assertNotIn("is isometryd running", r.stderr)
        # An unreadable named token file says so too (as any user but root).
        os.chmod(self.daemon.dir, 0o755)
        token = os.path.join(self.daemon.dir, "state", "operator.token")
        r = subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", ISOCTL,
             "--socket", self.daemon.socket, "--operator-token", token, "status"],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"cannot read the operator token file '{token}'", r.stderr)
        self.assertIn("Permission denied", r.stderr)
        # Nothing was harmed: root still gets in.
        self.ok("status")

    def test_help_documents_exit_codes(self):
        r = self.isoctl("--help", socket="")
        self.assertEqual(r.returncode, 0)
        for line in ("0  success", "1  isometryd answered with an error", "2  usage error",
                     "3  isometryd cannot be reached", "4  health: degraded",
                     "5  health: unhealthy"):
            self.assertIn(line, r.stdout)

    def test_help_layout_labels_match_readme(self):
        # Issue #21: the default F,x,y was labelled plain "AOS", which
        # docs/concepts/layouts.md defines as C order, F,y,x; F,x,y is AOS in Fortran order.
        for cmd in ("copy", "plan"):
            with self.subTest(cmd=cmd):
                r = self.isoctl(cmd, "--help", socket="")
                self.assertEqual(r.returncode, 0, r.stderr)
                text = " ".join(r.stdout.split())  # CLI11 wraps long descriptions
                self.assertIn("default: F,x[,y...]: AOS in Fortran order", text)
                self.assertIn("AOS in C order is F,[...y,]x, SOA [...y,]x,F", text)
                self.assertNotIn("F,x[,y...], AOS)", text)

    def test_help_says_timeout_bounds_wait(self):
        r = self.isoctl("--help", socket="")
        self.assertIn("and when given, of `wait` too", " ".join(r.stdout.split()))
        r = self.isoctl("wait", "--help", socket="")
        self.assertIn("the global --timeout-ms if given", " ".join(r.stdout.split()))

    def test_sigterm_exits_zero(self):
        self.stop_daemon()
        r = self.isoctl("status")
        self.assertEqual(r.returncode, 3, r.stderr)


# 4 MiB/s: a 32 MiB copy (start_slow_copy) stays in flight for seconds.
SLOW_CHANNEL = 'request_size = "1MiB"\nrate_limit = "4MiB"'


class InFlightTest(IsoctlTest):
    channel_extra = SLOW_CHANNEL

    def test_transfers_wait_cancel(self):
        proc, t = self.start_slow_copy()
        self.assertIn(t["state"], ("waiting", "running"))
        self.assertEqual(t["priority"], 5)
        self.assertEqual(int(t["bytes"]), 4194304 * 8)
        hop = t["hops"][0]
        self.assertEqual(hop["channel"], "memcpy0")
        self.assertEqual(hop["chunks_total"], 32)
        self.assertLess(int(hop["chunks_done"]), 32)

        human = self.ok("transfers")
        self.assertRegex(human, rf"(?m)^\s*{t['id']}\s+(waiting|running)\s+5\s+32\.00 MiB\s+.*"
                                r"memcpy0\s+sys0->sys0\s+F,x -> F,x\s+\d+/32\s+\d+\.\d%")

        c = self.channel("memcpy0")
        self.assertEqual(c["rate_limit_bytes_per_s"], 4 << 20)
        self.assertRegex(self.ok("channels"), r"(?m)^memcpy0\s+memcpy\s+\d+/\d+\s+.*4\.19 MB/s")

        # A wait that times out is the daemon's DEADLINE_EXCEEDED: exit 1.
        r = self.isoctl("wait", t["id"], "--timeout-ms", "100")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("DEADLINE_EXCEEDED: ", r.stderr)

        # The global --timeout-ms bounds a wait too (issue #21: it did not;
        # the wait lasted as long as the transfer).
        started = time.monotonic()
        r = self.isoctl("--timeout-ms", "300", "wait", t["id"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("DEADLINE_EXCEEDED: ", r.stderr)
        self.assertLess(time.monotonic() - started, 5)  # the copy itself needs ~8 s
        self.assertEqual(self.json("transfers", t["id"])["state"], "running")  # unharmed

        # Not the transfer's session and no operator token: refused.
        r = self.isoctl("cancel", t["id"], operator=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PERMISSION_DENIED: ", r.stderr)
        self.assertIn("operator token", r.stderr)

        self.ok("cancel", t["id"])
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        self.assertEqual(proc.returncode, 1, err)  # the copy it waited for did not end "done"
        self.assertIn("CANCELLED: ", err)
        self.assertEqual(json.loads(out)["info"]["state"], "cancelled")

        final = self.json("transfers", t["id"])
        self.assertEqual(final["state"], "cancelled")
        r = self.isoctl("wait", t["id"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("CANCELLED: ", r.stderr)
        self.assertEqual(self.json("status")["transfers_cancelled"], 1)


class RecentTest(IsoctlTest):
    """transfers --recent: the ended transfers' final reports, newest first,
    at most daemon.transfer_history of them (issue #54, item 3)."""

    channel_extra = SLOW_CHANNEL
    daemon_extra = (("transfer_history", "3"),)

    def recent(self):
        return self.json("transfers", "--recent")["transfers"]

    def test_recent_transfers(self):
        self.assertEqual(self.recent(), [])
        self.assertRegex(self.ok("transfers", "--recent"), r"^no ended transfers")

        # Done, cancelled, done.
        first = self.json("copy", "--extents", "4096", "--priority", "2")["info"]
        proc, slow = self.start_slow_copy()
        self.ok("cancel", slow["id"])
        proc.communicate(timeout=COMMAND_TIMEOUT_S)
        last = self.json("copy", "--extents", "8192")["info"]

        recent = self.recent()
        self.assertEqual([t["id"] for t in recent], [last["id"], slow["id"], first["id"]])
        self.assertEqual([t["state"] for t in recent], ["done", "cancelled", "done"])
        self.assertEqual([t["bytes"] for t in recent], [8192 * 8, 4194304 * 8, 4096 * 8])
        done, cancelled = recent[2], recent[1]
        self.assertEqual((done["code"], done["message"], done["priority"]), (0, "", 2))
        self.assertEqual(cancelled["code"], 1)  # google.rpc.Code CANCELLED
        self.assertIn(f"transfer {slow['id']} was cancelled", cancelled["message"])
        self.assertEqual(cancelled["priority"], 5)
        # Without the operator token, another client's message is not shown; its code is.
        r = self.isoctl("--json", "transfers", "--recent", operator=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        hidden = json.loads(r.stdout)["transfers"][1]
        self.assertEqual((hidden["id"], hidden["code"]), (slow["id"], 1))
        self.assertNotIn("was cancelled", hidden["message"])
        self.assertIn("operator token", hidden["message"])
        for t in recent:
            # --json numbers are numbers; the owner without a credential; no hops.
            self.assertIs(type(t["id"]), int)
            self.assertIs(type(t["bytes"]), int)
            self.assertIsInstance(t["elapsed_s"], (int, float))
            self.assertGreater(t["elapsed_s"], 0)
            self.assertIsInstance(t["predicted_bytes_per_s"], (int, float))
            self.assertGreater(t["predicted_bytes_per_s"], 0)
            self.assertIn("memcpy0", t["path"])
            self.assertEqual(t["owner"]["client_name"], "isoctl copy")
            self.assertGreater(t["owner"]["session_id"], 0)
            self.assertNotIn("session", t)
            self.assertEqual(t["hops"], [])
        self.assertGreater(done["measured_bytes_per_s"], 0)
        self.assertEqual(cancelled["measured_bytes_per_s"], 0)
        # Ended transfers are not in flight.
        self.assertEqual(self.json("transfers"), {"transfers": []})

        human = self.ok("transfers", "--recent")
        lines = human.splitlines()
        self.assertRegex(lines[0], r"^\s*ID\s+STATE\s+BYTES\s+DURATION\s+PATH\s+PREDICTED"
                                   r"\s+MEASURED\s+ERROR$")
        self.assertEqual(len(lines), 4, human)
        self.assertRegex(lines[2], rf"^\s*{slow['id']}\s+cancelled\s+32\.00 MiB\s+\S+ m?s\s+"
                                   r".*memcpy0.*\s+[\d.]+ [kMGT]?B/s\s+-\s+CANCELLED: transfer "
                                   rf"{slow['id']} was cancelled$")
        self.assertRegex(lines[3], rf"^\s*{first['id']}\s+done\s+32\.00 KiB\s+.*memcpy0.*"
                                   r"\s+[\d.]+ [kMGT]?B/s\s+[\d.]+ [kMGT]?B/s\s+-$")

        # Bounded: five more copies, and only the last three are kept.
        out = self.ok("--json", "copy", "--extents", "4096", "--repeat", "5")
        ids = [json.loads(line)["transfer"] for line in out.splitlines()]
        self.assertEqual(len(ids), 5)
        self.assertEqual([t["id"] for t in self.recent()], ids[:-4:-1])
        self.assertEqual(len(self.ok("transfers", "--recent").splitlines()), 4)

        # One transfer by ID, or the recent ones: not both.
        r = self.isoctl("transfers", ids[-1], "--recent")
        self.assertEqual(r.returncode, 2, r.stderr)


class RecentOffTest(IsoctlTest):
    daemon_extra = (("transfer_history", "0"),)

    def test_history_zero_keeps_none(self):
        info = self.json("copy", "--extents", "4096")["info"]
        self.assertEqual(self.recent_ids(), [])
        # Wait and `transfers ID` still find it (they keep their own 4096).
        self.assertEqual(self.json("transfers", info["id"])["state"], "done")

    def recent_ids(self):
        return [t["id"] for t in self.json("transfers", "--recent")["transfers"]]


if __name__ == "__main__":
    unittest.main()
