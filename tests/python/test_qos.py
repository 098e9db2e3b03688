"""Traffic classes ([qos], docs/guides/qos.md) against a real isometryd:
weighted shares of the memcpy and disk channels, the priority ceiling
clamping (and telling), a rate cap, a paused class resumed by a SIGHUP
reload mid-transfer, the operator's grant, small copies of the
foreground class completing while a background class saturates, and a
class's nice value taken by the threads that move its bytes.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        ISOCTL=build/tools/isoctl/isoctl /usr/bin/python3 -m unittest -v test_qos
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture")
sys.path.insert(0, FIXTURE_DIR)
from busy_copies import keep_copying  # noqa: E402
from client_env import ISOCTL, ISOMETRYD, client_modules  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402
from thread_nice import (may_lower_nice, sched_runtime, short_slice_supported,  # noqa: E402
                         thread_names, thread_nice_values, thread_policies, SCHED_IDLE,
                         SCHED_OTHER, SHORT_SLICE_NS)

grpc, isometry, pb, pb_grpc = client_modules("test_qos")

MIB = 1 << 20

# {dir} is the daemon's directory; braces of TOML inline tables doubled.
MEMORIES = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "768MiB"
staging = "64MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/files"
staging = "0"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
request_size = "1MiB"

[[channel]]
name = "disk_write0"
kind = "disk_write"
threads = 2
request_size = "1MiB"

[[channel]]
name = "disk_read0"
kind = "disk_read"
threads = 2
request_size = "1MiB"
"""

QOS = """
[qos]
default_class = "fg"

[[qos.class]]
name = "fg"
weight = 3

[[qos.class]]
name = "bg"
weight = 1
max_priority = 5

[[qos.class]]
name = "capped"
weight = 1
caps = {{ memcpy = {{ rate = "40MiB/s" }} }}

[[qos.class]]
name = "held"
weight = 1
caps = {{ memcpy = {{ in_flight = {held} }} }}

[[qos.class]]
name = "students"
weight = 1
max_priority = 2

[[qos.rule]]
gid = 4500
class = "students"

[[qos.class]]
name = "yielding"
weight = 1
nice = 19

[[qos.rule]]
client = "bulk"
class = "bg"

[[qos.class]]
name = "idling"
weight = 1
nice = "idle"

[[qos.rule]]
client = "yielding"
class = "yielding"

[[qos.rule]]
client = "idling"
class = "idling"
"""

# Run with supplementary group 4500 (setpriv): attaches over the local
# socket, copies with priority 9, prints the class and priority it ran at.
GROUPED = """
import sys
sys.path.insert(0, sys.argv[1])
import isometry
with isometry.Client(sys.argv[2], local_socket=sys.argv[3], name="grouped") as c:
    n = 4096
    src = c.register_instance(c.allocate("sys0", n), [n], [("b", 1)], "F,x")
    dst = c.register_instance(c.allocate("sys0", n), [n], [("b", 1)], "F,x")
    info = c.copy(src, dst, priority=9)
    print(info.qos_class, info.priority, info.requested_priority)
"""


def config(held=0):
    return MEMORIES + QOS.replace("{held}", str(held))


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class QosTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, config(), "isometry-qos-", dirs=("files",))
        with open(os.path.join(cls.dir, "state", "operator.token")) as f:
            cls.operator = f.read().strip()
        cls.channel = grpc.insecure_channel(f"unix:{cls.daemon.socket}")
        cls.stub = pb_grpc.IsometryStub(cls.channel)
        with open(cls.daemon.config) as f:
            cls.daemon_text = f.read()  # as started; tests that rewrite it put it back
        cls.fg = isometry.Client(cls.daemon.socket, name="interactive")
        cls.bg = isometry.Client(cls.daemon.socket, name="bulk")

    @classmethod
    def tearDownClass(cls):
        cls.fg.close()
        cls.bg.close()
        cls.channel.close()
        cls.daemon.stop()

    # ---- helpers ----

    def qos(self):
        return self.stub.GetQos(pb.GetQosRequest(),
                                metadata=[("isometry-operator", self.operator)])

    def class_bytes(self, channel):
        out = {}
        for c in self.qos().classes:
            for s in c.channels:
                if s.channel == channel:
                    out[c.name] = s.bytes
        return out

    @staticmethod
    def pair(client, nbytes, dst_memory="sys0", dst_file=None):
        src_alloc = client.allocate("sys0", nbytes)
        src = client.register_instance(src_alloc, [nbytes], [("b", 1)], "F,x")
        if dst_file is None:
            dst = client.register_instance(client.allocate(dst_memory, nbytes), [nbytes],
                                           [("b", 1)], "F,x")
        else:
            dst = client.register_instance(bounds=[nbytes], fields=[("b", 1)], layout="F,x",
                                           memory=dst_memory, file=dst_file)
        return src, dst

    def keep_busy(self, client, pairs, stop, depth=3):
        """Copies over `pairs` in a loop, `depth` in flight, until `stop`."""
        errors = []

        def run():
            try:
                keep_copying(client, pairs, depth, stop)
            except Exception as e:  # reported by the test
                errors.append(e)

        thread = threading.Thread(target=run)
        thread.start()
        return thread, errors

    def measure_share(self, channel, make_pairs, window_s=2.0):
        # Weights share a channel between classes that both have work
        # queued: six copies in flight each (one a pair) keep a class backlogged while
        # its Python thread waits for a CPU on a busy machine (three once
        # let fg's queue run dry under ASan, and fg got 2.69x bg).
        stop = threading.Event()
        runs = [self.keep_busy(c, make_pairs(c), stop, depth=6) for c in (self.fg, self.bg)]
        try:
            time.sleep(0.5)  # both classes backlogged
            before = self.class_bytes(channel)
            time.sleep(window_s)
            after = self.class_bytes(channel)
        finally:
            stop.set()
            for thread, errors in runs:
                thread.join(60)
                self.assertEqual(errors, [])
        fg = after["fg"] - before["fg"]
        bg = after["bg"] - before["bg"]
        self.assertGreater(bg, 0, f"bg moved nothing on {channel}")
        return fg / bg, fg, bg

    # ---- cases ----

    def test_weights_share_the_memcpy_channel_3_to_1(self):
        ratio, fg, bg = self.measure_share(
            "memcpy0", lambda c: [self.pair(c, 16 * MIB) for _ in range(6)])
        # Dispatch order is exact while both are backlogged; a busy machine
        # only shortens the window.
        self.assertGreater(ratio, 2.7, f"fg {fg} bytes, bg {bg} bytes")
        self.assertLess(ratio, 3.3, f"fg {fg} bytes, bg {bg} bytes")

    def test_weights_share_the_disk_channel_3_to_1(self):
        counter = iter(range(1 << 30))

        def pairs(c):
            return [self.pair(c, 8 * MIB, "dsk0", f"{c.name}-{next(counter)}.bin")
                    for _ in range(6)]


        ratio, fg, bg = self.measure_share("disk_write0", pairs)
        self.assertGreater(ratio, 2.7, f"fg {fg} bytes, bg {bg} bytes")
        self.assertLess(ratio, 3.3, f"fg {fg} bytes, bg {bg} bytes")

    def test_a_priority_above_the_class_ceiling_is_clamped_and_told(self):
        src, dst = self.pair(self.bg, 1 * MIB)
        info = self.bg.copy(src, dst, priority=50)
        self.assertEqual(info.state, "done")
        self.assertEqual((info.qos_class, info.priority, info.requested_priority), ("bg", 5, 50))
        # Without wait, the answer itself says so.
        resp = self.stub.Copy(
            pb.CopyRequest(src_instance=src.id, dst_instance=dst.id, priority=9),
            metadata=[("isometry-session", self.bg.session)])
        self.assertEqual((resp.qos_class, resp.priority, resp.requested_priority), ("bg", 5, 9))
        self.bg.wait(resp.transfer)
        # Within the ceiling nothing changes; the fg class has none.
        info = self.fg.copy(*self.pair(self.fg, 1 * MIB), priority=50)
        self.assertEqual((info.qos_class, info.priority, info.requested_priority), ("fg", 50, 50))
        clamped = {c.name: c.clamped for c in self.qos().classes}
        self.assertGreaterEqual(clamped["bg"], 2)
        self.assertEqual(clamped["fg"], 0)

    def test_explain_says_how_qos_shaped_a_copy(self):
        info = self.bg.copy(*self.pair(self.bg, 4 * MIB), priority=50)
        e = self.stub.ExplainTransfer(pb.ExplainTransferRequest(transfer=info.id),
                                      metadata=[("isometry-session", self.bg.session)])
        text = "\n".join(e.qos)
        self.assertIn("class 'bg', weight 1", text)
        self.assertIn("it asked for 50", text)
        self.assertIn("memcpy0: the class has", text)
        env = dict(os.environ, ISOMETRY_SOCKET=self.daemon.socket,
                   ISOMETRY_OPERATOR_TOKEN=os.path.join(self.dir, "state", "operator.token"))
        out = subprocess.run([ISOCTL, "explain", str(info.id)], env=env, capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("qos: class 'bg', weight 1", out.stdout)

    def test_a_capped_class_stays_under_its_cap(self):
        c = isometry.Client(self.daemon.socket, name="capped-client")
        try:
            self.move(c, "capped")
            src, dst = self.pair(c, 64 * MIB)
            start = time.monotonic()
            info = c.copy(src, dst)
            elapsed = time.monotonic() - start
            self.assertEqual(info.state, "done")
            rate = 64 * MIB / elapsed
            # 40 MiB/s, with at most kQosBurst (20 ms) ahead of it.
            self.assertLess(rate, 40 * MIB * 1.1, f"{rate / MIB:.1f} MiB/s")
            shares = [s for k in self.qos().classes if k.name == "capped" for s in k.channels
                      if s.channel == "memcpy0"]
            self.assertEqual(shares[0].rate_cap, 40 * MIB)
            self.assertGreater(shares[0].throttled_s, 0.5)
        finally:
            c.close()

    def test_a_paused_class_waits_and_a_sighup_reload_resumes_it(self):
        c = isometry.Client(self.daemon.socket, name="held-client")
        try:
            self.move(c, "held")
            src, dst = self.pair(c, 8 * MIB)
            transfer = c.copy(src, dst, wait=False)
            time.sleep(1.0)
            self.assertIn(c.transfer(transfer).state, ("waiting", "running"))  # never failed
            with open(self.daemon.config, "w") as f:
                f.write(self.daemon_text.replace("in_flight = 0", "in_flight = 4"))
            os.kill(self.daemon.proc.pid, signal.SIGHUP)
            info = c.wait(transfer, timeout_ms=20000)
            self.assertEqual(info.state, "done")
            self.assertEqual(info.qos_class, "held")  # the operator's placement stays
            held = [k for k in self.qos().classes if k.name == "held"][0]
            self.assertEqual(held.channels[0].in_flight_cap, 4)
        finally:
            with open(self.daemon.config, "w") as f:
                f.write(self.daemon_text)
            os.kill(self.daemon.proc.pid, signal.SIGHUP)
            c.close()

    def test_a_bad_reload_changes_nothing(self):
        with open(self.daemon.config, "w") as f:
            f.write(self.daemon_text.replace('weight = 3', 'weight = 0'))
        try:
            os.kill(self.daemon.proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + 10
            while "SIGHUP: nothing reloaded" not in self.daemon.log_text():
                self.assertLess(time.monotonic(), deadline, self.daemon.log_text())
                time.sleep(0.05)
            self.assertIn("qos.class[0].weight", self.daemon.log_text())
            fg = [k for k in self.qos().classes if k.name == "fg"][0]
            self.assertEqual(fg.weight, 3)
        finally:
            with open(self.daemon.config, "w") as f:
                f.write(self.daemon_text)

    def test_foreground_small_copies_complete_while_the_background_saturates(self):
        small = [self.pair(self.fg, 64 << 10) for _ in range(4)]
        stop = threading.Event()
        thread, errors = self.keep_busy(self.bg, [self.pair(self.bg, 32 * MIB)
                                                  for _ in range(3)], stop, depth=4)
        try:
            time.sleep(0.3)
            latencies = []
            for i in range(200):
                start = time.monotonic()
                self.assertEqual(self.fg.copy(*small[i % 4]).state, "done")
                latencies.append(time.monotonic() - start)
            bulk_start = time.monotonic()
            self.bg.copy(*self.pair(self.bg, 32 * MIB))
            bulk = time.monotonic() - bulk_start
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(errors, [])
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        # Loose for a busy machine: a small copy never waits for the
        # background's bulk copies to drain.
        self.assertLess(p99, bulk, f"p99 {p99 * 1e3:.1f} ms, one bulk copy {bulk * 1e3:.1f} ms")

    def test_a_class_nice_value_is_taken_while_its_bytes_move_and_dropped_after(self):
        self.check_class_cpu_value("yielding", 19, thread_nice_values, 19, 0)

    def test_an_idle_class_runs_under_sched_idle_while_its_bytes_move_and_leaves_it_after(self):
        self.check_class_cpu_value("idling", 20, thread_policies, SCHED_IDLE, SCHED_OTHER)
        # Explain says so.
        with isometry.Client(self.daemon.socket, name="idling") as y:
            info = y.copy(*self.pair(y, 1 * MIB))
            e = self.stub.ExplainTransfer(pb.ExplainTransferRequest(transfer=info.id),
                                          metadata=[("isometry-session", y.session)])
        applied = "" if may_lower_nice() else " (not applied"
        self.assertIn(f"class 'idling', weight 1, its bytes moved under SCHED_IDLE{applied}",
                      "\n".join(e.qos))
        env = dict(os.environ, ISOMETRY_SOCKET=self.daemon.socket,
                   ISOMETRY_OPERATOR_TOKEN=os.path.join(self.dir, "state", "operator.token"))
        out = subprocess.run([ISOCTL, "qos"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        row = next(line.split() for line in out.stdout.splitlines() if line.startswith("idling"))
        self.assertEqual(row[3], "idle", out.stdout)  # the NICE column

    def check_class_cpu_value(self, client, nice, read, busy, rest):
        """While `client`'s class (named as the client) moves bytes, a thread
        of the daemon reads `busy` by `read` (nice values or policies); once
        idle, every thread reads `rest` again. GetQos reports `nice`."""
        pid = self.daemon.proc.pid
        if not may_lower_nice():
            # The daemon may not lower a thread's value back: it says so
            # and changes none.
            row = next(c for c in self.qos().classes if c.name == client)
            self.assertEqual((row.nice, row.nice_applied), (nice, False))
            self.assertIn("which no thread takes", self.daemon.log_text(tail=None))
            return
        self.assertEqual(set(read(pid).values()), {rest})
        with isometry.Client(self.daemon.socket, name=client) as y:
            stop = threading.Event()
            thread, errors = self.keep_busy(y, [self.pair(y, 16 * MIB)], stop, depth=2)
            taken = set()
            try:
                deadline = time.monotonic() + 10
                while not taken and time.monotonic() < deadline:
                    taken = {t for t, n in read(pid).items() if n == busy}
                    time.sleep(0.002)
                # A foreground copy meanwhile runs at the daemon's own value.
                self.assertEqual(self.fg.copy(*self.pair(self.fg, 1 * MIB)).state, "done")
            finally:
                stop.set()
                thread.join(60)
            self.assertEqual(errors, [])
            # The memcpy channel's workers moved the class's chunks at its value.
            self.assertTrue(taken, f"no thread of the daemon ran at {busy}")
            names = thread_names(pid)
            self.assertLessEqual({names.get(t) for t in taken}, {"ch:memcpy0", "chx:memcpy0", None})
            row = next(c for c in self.qos().classes if c.name == client)
            self.assertEqual((row.nice, row.nice_applied), (nice, True))
            # Idle workers went back: the next request may be anyone's.
            deadline = time.monotonic() + 5
            values = read(pid)
            while set(values.values()) != {rest} and time.monotonic() < deadline:
                time.sleep(0.05)
                values = read(pid)
            self.assertEqual(set(values.values()), {rest}, values)

    def test_the_threads_a_small_copy_waits_on_are_named_and_run_short_slices(self):
        names = thread_names(self.daemon.proc.pid)
        by_name = {}
        for tid, name in names.items():
            by_name.setdefault(name, []).append(tid)
        # An operator's `top -H` tells them apart (docs/operations/tuning.md).
        for name, count in (("iso-ring", 1), ("iso-accept", 1), ("dma:memcpy0", 1),
                            ("dma:disk_write0", 1), ("ch:memcpy0", 2), ("chx:memcpy0", 1),
                            ("disk:disk_write", 1)):
            self.assertEqual(len(by_name.get(name, [])), count, (name, sorted(names.values())))
        short = ["iso-ring", "dma:memcpy0", "chx:memcpy0"]
        if not short_slice_supported():
            # Older kernels: the daemon sets none (core/thread_slice.h).
            print("this kernel has no custom slices (Linux 6.12+): checked that none was set",
                  file=sys.stderr)
            for name in short + ["ch:memcpy0"]:
                self.assertNotEqual(sched_runtime(by_name[name][0]), SHORT_SLICE_NS, name)
            return
        for name in short:
            self.assertEqual(sched_runtime(by_name[name][0]), SHORT_SLICE_NS, name)
        # Bulk requests keep the scheduler's own, longer slice.
        for tid in by_name["ch:memcpy0"]:
            self.assertGreater(sched_runtime(tid), SHORT_SLICE_NS)

    def test_a_gid_rule_matches_a_supplementary_group(self):
        # The primary group stays 0: only SO_PEERGROUPS can tell the daemon.
        r = subprocess.run(["setpriv", "--groups=4500", "--", sys.executable, "-c", GROUPED,
                            os.environ.get("ISOMETRY_PYTHONPATH", ""), self.daemon.socket,
                            os.path.join(self.dir, "local.sock")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["students", "2", "9"])

    def test_only_the_operator_moves_sessions(self):
        c = isometry.Client(self.daemon.socket, name="mover")
        try:
            with self.assertRaises(grpc.RpcError) as e:
                self.stub.SetSessionClass(
                    pb.SetSessionClassRequest(session=self.session_number(c), class_name="fg"),
                    metadata=[("isometry-session", c.session)])
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            with self.assertRaises(grpc.RpcError) as e:
                self.move(c, "no-such-class")
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
            # A session sees the classes and its own, not who else is in them.
            mine = self.stub.GetQos(pb.GetQosRequest(), metadata=[("isometry-session", c.session)])
            self.assertEqual(mine.own_class, "fg")
            self.assertTrue(all(len(k.member_list) == 0 for k in mine.classes))
        finally:
            c.close()

    def test_isoctl_qos_shows_classes_members_and_shares(self):
        env = dict(os.environ, ISOMETRY_SOCKET=self.daemon.socket,
                   ISOMETRY_OPERATOR_TOKEN=os.path.join(self.dir, "state", "operator.token"))
        out = subprocess.run([ISOCTL, "qos"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        for word in ("CLASS", "fg", "bg", "capped", "held", "default", "bulk", "interactive"):
            self.assertIn(word, out.stdout)
        out = subprocess.run([ISOCTL, "qos", "-o", "json"], env=env, capture_output=True,
                             text=True, timeout=30)
        doc = json.loads(out.stdout)
        held = [k for k in doc["classes"] if k["name"] == "held"][0]
        self.assertTrue(held["channels"][0]["paused"])

    # ---- more helpers ----

    @classmethod
    def session_number(cls, client):
        return client.session_id

    def move(self, client, class_name):
        self.stub.SetSessionClass(
            pb.SetSessionClassRequest(session=self.session_number(client), class_name=class_name),
            metadata=[("isometry-operator", self.operator)])


if __name__ == "__main__":
    unittest.main()
