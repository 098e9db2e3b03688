"""Traffic classes across nodes (docs/guides/qos.md, "Across nodes"): a
cross-node copy carries its class; two busy classes share the sending
node's data link by weight (3:1, the link paced by cluster.rate_limit so
it is what limits); the receiving node places the half by its own rules
for peers, else in its class of the same name, and holds its priority to
that class's ceiling. A class's nice value holds on both nodes, and
chunks of at most 256 KiB travel over the link's express connection. A
class at nice "idle" on nodes whose CPU other processes keep busy fails
no copy, its own or another class's.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_cluster_qos
"""

import contextlib
import os
import subprocess
import sys
import time
import unittest

ISOMETRYD = os.environ.get("ISOMETRYD", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if not ISOMETRYD:
    print("test_cluster_qos: skipped: ISOMETRYD is not set", file=sys.stderr)
else:
    import cluster_fixture as cf
    from busy_copies import Busy  # tests/pyfixture, on the path cluster_fixture set
    from thread_nice import may_lower_nice, thread_nice_values
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
    import grpc

MiB = 1 << 20
# a's sending rate to b: far below what loopback, the daemons and the
# clients can do on a busy 2-core machine, so the link is the bottleneck.
LINK_MIB = 48

# Both nodes: fg (3) and bg (1, clients named "bulk"). b also maps a's bg
# copies into "guests", whose ceiling is 1.
QOS_A = """
[[qos.class]]
name = "fg"
weight = 3

[[qos.class]]
name = "bg"
weight = 1

[[qos.class]]
name = "yielding"
weight = 1
nice = 19

[[qos.rule]]
client = "bulk"
class = "bg"

[[qos.rule]]
client = "yielding"
class = "yielding"
"""
QOS_B = QOS_A + """
[[qos.class]]
name = "guests"
weight = 1
max_priority = 1

[[qos.rule]]
peer = "a"
remote_class = "bg"
class = "guests"
"""

# Both nodes: fg (3) and offload (1, clients named "offload", its work
# under SCHED_IDLE).
QOS_IDLE = """
[[qos.class]]
name = "fg"
weight = 3

[[qos.class]]
name = "offload"
weight = 1
nice = "idle"

[[qos.rule]]
client = "offload"
class = "offload"
"""


class ClusterOfItsOwn(unittest.TestCase):
    """A cluster for a class's tests: cf.Cluster(ISOMETRYD, NODES, **ARGS),
    started before the first test and stopped after the last."""
    NODES = ["a", "b"]
    ARGS = {}

    @classmethod
    def setUpClass(cls):
        cls.cluster = cf.Cluster(ISOMETRYD, cls.NODES, **cls.ARGS)
        cls.cluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def qos(self, node):
        """GetQos of `node`, as its operator."""
        with open(os.path.join(self.cluster[node].dir, "state", "operator.token")) as f:
            token = f.read().strip()
        with grpc.insecure_channel(f"unix:{self.cluster[node].socket}") as ch:
            return pb_grpc.IsometryStub(ch).GetQos(
                pb.GetQosRequest(), metadata=[("isometry-operator", token)])


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class ClusterQos(ClusterOfItsOwn):
    ARGS = {"request": "1MiB",
            "node_opts": [{"extra_channels": QOS_A,
                           "extra_cluster": f'rate_limit = "{LINK_MIB}MiB"'},
                          {"extra_channels": QOS_B}]}

    def test_two_busy_classes_share_the_link_by_weight_and_b_places_the_halves(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client("interactive") as fg, a.client("bulk") as bg, b.client("keeper") as keep:
            work = {"fg": (fg, cf.Cluster.published_pairs(fg, keep, 2 * MiB, 4)),
                    "bg": (bg, cf.Cluster.published_pairs(bg, keep, 2 * MiB, 4))}
            info = bg.copy(*work["bg"][1][0], priority=7)
            self.assertEqual((info.state, info.qos_class), ("done", "bg"))
            # Four copies of two 1 MiB chunks in flight per class: both
            # classes always have chunks queued on the two connections
            # their chunks use.
            busy = {k: Busy(client, pairs, depth=4) for k, (client, pairs) in work.items()}
            try:
                time.sleep(1.0)
                before = {k: load.copied for k, load in busy.items()}
                time.sleep(4.0)
                moved = {k: load.copied - before[k] for k, load in busy.items()}
            finally:
                for load in busy.values():
                    load.end()
            # 3:1 by weight (the benchmark measures it tightly; this is
            # loose enough for a busy machine), and the link was busy.
            ratio = moved["fg"] / max(1, moved["bg"])
            self.assertGreater(ratio, 2.2, moved)
            self.assertLess(ratio, 4.0, moved)
            self.assertGreater(moved["fg"] + moved["bg"], LINK_MIB * MiB, moved)
        # On b: fg's halves in its own fg (same name), bg's in guests (the rule
        # for a's bg copies), and none left in bg or the default.
        on_b = {c.name: sum(s.bytes for s in c.channels if s.channel == "tcp:a")
                for c in self.qos("b").classes}
        self.assertGreater(on_b["fg"], 0, on_b)
        self.assertGreater(on_b["guests"], 0, on_b)
        self.assertEqual(on_b["bg"], 0, on_b)

    def test_the_receiving_node_holds_the_priority_to_its_class_ceiling(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client("bulk") as bg, b.client("keeper") as keep:
            src, dst = cf.Cluster.published_pairs(bg, keep, 1 * MiB, 1)[0]
            info = bg.copy(src, dst, priority=7)
            self.assertEqual((info.qos_class, info.priority), ("bg", 7))  # a has no ceiling
        with open(os.path.join(b.dir, "state", "operator.token")) as f:
            token = f.read().strip()
        with grpc.insecure_channel(f"unix:{b.socket}") as ch:
            half = pb_grpc.IsometryStub(ch).GetTransfer(
                pb.GetTransferRequest(transfer=info.id), metadata=[("isometry-operator", token)])
        self.assertIn("remote half", half.remote_half)
        self.assertEqual(half.priority, 1)  # guests' max_priority on b

    def test_small_chunks_take_the_express_connection(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client("interactive") as fg, b.client("keeper") as keep:
            def link(sent=0):
                # The writer counts a chunk once its send returns, which
                # may be after the receiver's ACK completed the copy.
                deadline = time.monotonic() + 5
                while True:
                    p = {p.name: p for p in fg.peers().peers}["b"]
                    if p.bytes_sent >= sent or time.monotonic() > deadline:
                        return p
                    time.sleep(0.01)
            before = link()
            # The fixture's four bulk connections, and the express one.
            self.assertEqual(before.data_out, 5)
            small = cf.Cluster.published_pairs(fg, keep, 64 << 10, 1)[0]
            self.assertEqual(fg.copy(*small).state, "done")
            mid = link(before.bytes_sent + (64 << 10))
            self.assertEqual(mid.express_bytes_sent - before.express_bytes_sent, 64 << 10)
            # Two chunks of 1 MiB (request_size): over the bulk connections.
            big = cf.Cluster.published_pairs(fg, keep, 2 * MiB, 1)[0]
            self.assertEqual(fg.copy(*big).state, "done")
            after = link(mid.bytes_sent + 2 * MiB)
            self.assertEqual(after.express_bytes_sent, mid.express_bytes_sent)
            self.assertEqual(after.bytes_sent - mid.bytes_sent, 2 * MiB)

    @staticmethod
    def niced_threads(pid):
        return {t for t, n in thread_nice_values(pid).items() if n == 19}

    def test_a_class_nice_value_holds_on_both_nodes(self):
        a, b = self.cluster["a"], self.cluster["b"]
        pids = {"a": a.process.proc.pid, "b": b.process.proc.pid}
        if not may_lower_nice():  # the daemons say so and change none
            self.assertIn("which no thread takes", a.log_text())
            return
        with a.client("yielding") as y, b.client("keeper") as keep:
            busy = Busy(y, cf.Cluster.published_pairs(y, keep, 2 * MiB, 2), depth=2)
            seen = {"a": set(), "b": set()}
            try:
                deadline = time.monotonic() + 10
                while not all(seen.values()) and time.monotonic() < deadline:
                    for node, pid in pids.items():
                        seen[node] |= self.niced_threads(pid)
                    time.sleep(0.002)
            finally:
                busy.end()
            # a's writers sent its chunks at 19; b's readers (its class of
            # the same name) landed them at 19.
            self.assertTrue(seen["a"], "no thread of a ran at nice 19")
            self.assertTrue(seen["b"], "no thread of b ran at nice 19")
            # a's writers, idle, went back to 0.
            deadline = time.monotonic() + 5
            while self.niced_threads(pids["a"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(self.niced_threads(pids["a"]), set())

def capped_and_paused(capped, paused):
    """Classes `capped` (remote_memcpy at 64 MiB/s) and `paused` (at 0)."""
    return f"""
[[qos.class]]
name = "{capped}"
weight = 1
caps = {{ remote_memcpy = {{ rate = "64MiB/s" }} }}

[[qos.class]]
name = "{paused}"
weight = 1
caps = {{ remote_memcpy = {{ rate = 0 }} }}
"""


# a: eager puts on; "open" (the default), "capped" and "paused" by client
# name; "tenant" and "guest", open on a, which b caps and pauses.
QOS_EAGER = """
[[qos.class]]
name = "open"
weight = 1
""" + capped_and_paused("capped", "paused") + "".join(f"""
[[qos.class]]
name = "{c}"
weight = 1

[[qos.rule]]
client = "{c}"
class = "{c}"
""" for c in ("tenant", "guest")) + """
[[qos.rule]]
client = "capped"
class = "capped"

[[qos.rule]]
client = "paused"
class = "paused"
"""

# b: a's tenant copies in "slowed", its guest copies in "frozen".
QOS_EAGER_B = """
[[qos.class]]
name = "open"
weight = 1
""" + capped_and_paused("slowed", "frozen") + """
[[qos.rule]]
peer = "a"
remote_class = "tenant"
class = "slowed"

[[qos.rule]]
peer = "a"
remote_class = "guest"
class = "frozen"
"""


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class EagerPutsAndCaps(ClusterOfItsOwn):
    """cluster.eager_put_size sends a small copy whole in one call, past
    the network channel that applies a class's caps and the link's
    cluster.rate_limit: a class capped or paused there, and every class of
    a paced node (c), send their small copies through the channel, as
    their large ones. So does a class the receiving node (b) caps or
    pauses: b declines its puts."""

    EAGER = 'eager_put_size = "64KiB"'
    NODES = ["a", "b", "c"]
    ARGS = {"node_opts": [{"extra_channels": QOS_EAGER, "extra_cluster": EAGER},
                          {"extra_channels": QOS_EAGER_B},
                          {"extra_cluster": EAGER + '\nrate_limit = "1GiB"'}]}

    def test_a_class_the_receiver_caps_goes_through_its_caps_there(self):
        a, b = self.cluster["a"], self.cluster["b"]
        def slowed_on_b():
            return {c.name: sum(s.bytes for s in c.channels if s.channel == "tcp:a")
                    for c in self.qos("b").classes}["slowed"]
        before = slowed_on_b()
        with a.client("tenant") as tenant, b.client("keeper") as keep:
            for _ in range(3):
                info = tenant.copy(*cf.Cluster.published_pairs(tenant, keep, 16 << 10, 1)[0])
                self.assertEqual((info.state, info.qos_class), ("done", "tenant"))
                self.assertNotIn("one call", info.path)
        # b ran the halves in its capped class; a tried one put, was
        # declined, said so once and sent the next copies as halves.
        self.assertGreaterEqual(slowed_on_b() - before, 3 * (16 << 10))
        self.assertEqual(a.log_text().count("declined an eager put of class 'tenant'"), 1,
                         a.log_text()[-3000:])
        with a.client("viewer") as viewer:
            self.assertEqual({p.name: p for p in viewer.peers().peers}["b"].eager_puts_declined, 1)

    def test_a_class_the_receiver_pauses_moves_no_byte_there(self):
        self.assert_small_copy_held("guest")

    def assert_small_copy_held(self, name):
        """A 16 KiB copy a -> b by client `name` (in class `name` on a)
        neither ends nor moves a byte in a second, nor goes as a put; it
        is cancelled then."""
        a, b = self.cluster["a"], self.cluster["b"]
        n = 16 << 10
        with a.client(name) as held, b.client("keeper") as keep:
            target = cf.Cluster.published(keep, n, 1)[0]
            mine = held.allocate("sys0", n)
            held.write(mine, 0, b"\x5a" * n)
            t = held.copy(held.register_instance(mine, [n], [("v", 1)], "F,x"),
                          held.register_instance(target.id, [n], [("v", 1)], "F,x",
                                                 memory="b:sys0"), wait=False)
            time.sleep(1.0)
            info = held.transfer(t)
            self.assertEqual(info.qos_class, name)
            self.assertNotIn(info.state, ("done", "failed"), info)
            self.assertNotIn("one call", info.path)
            held.cancel(t)
            self.assertEqual(held.wait(t, timeout_ms=20000, check=False).state, "cancelled")
            self.assertEqual(keep.read(target, 0, n), bytes(n))

    def test_a_capped_class_sends_small_copies_through_its_caps(self):
        a, b = self.cluster["a"], self.cluster["b"]
        with a.client("plain") as plain, a.client("capped") as capped, \
                b.client("keeper") as keep:
            info = plain.copy(*cf.Cluster.published_pairs(plain, keep, 16 << 10, 1)[0])
            self.assertEqual(info.qos_class, "open")
            self.assertIn("one call", info.path)
            info = capped.copy(*cf.Cluster.published_pairs(capped, keep, 16 << 10, 1)[0])
            self.assertEqual((info.state, info.qos_class), ("done", "capped"))
            self.assertNotIn("one call", info.path)

    def test_a_paced_node_sends_small_copies_over_its_link(self):
        c, b = self.cluster["c"], self.cluster["b"]
        with c.client("plain") as plain, b.client("keeper") as keep:
            info = plain.copy(*cf.Cluster.published_pairs(plain, keep, 16 << 10, 1)[0])
            self.assertEqual(info.state, "done")
            self.assertNotIn("one call", info.path)

    def test_a_paused_class_moves_no_byte_of_a_small_copy(self):
        self.assert_small_copy_held("paused")


def pin_to_first_cpu(pid):
    """Every thread of process `pid` (and so the threads they start) on
    CPU 0 only."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {0})
        except ProcessLookupError:  # the thread ended
            continue


@contextlib.contextmanager
def spinning_on_first_cpu(count):
    """`count` processes spinning on CPU 0 at nice 0 while in the block."""
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"],
                             preexec_fn=lambda: os.sched_setaffinity(0, {0}))
            for _ in range(count)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class IdleClassOnBusyNodes(ClusterOfItsOwn):
    """The receiving daemon, b, shares CPU 0 with 16 processes that spin at
    nice 0 (the rest of the machine is left to the other tests); a runs
    free, so the offload class's chunks keep coming while b's threads for
    that class get next to no CPU. Before, such a thread could stop while
    holding a lock every copy needs (the foreground's copies then waited
    seconds, past the peer timeout), and a reader left without a CPU for
    the peer timeout (1.5 s here) with its receive window shut got its
    connection dropped by a's kernel, failing every copy on the link."""

    HOGS = 16

    ARGS = {"request": "1MiB", "node_opts": [{"extra_channels": QOS_IDLE}] * 2}

    def test_an_idle_class_on_busy_nodes_fails_no_copy(self):
        if not may_lower_nice():
            self.skipTest("no thread of this machine may come back from SCHED_IDLE, so the "
                          "daemons move none there (RLIMIT_NICE or CAP_SYS_NICE)")
        a, b = self.cluster["a"], self.cluster["b"]
        pin_to_first_cpu(b.process.proc.pid)
        with a.client("interactive") as fg, a.client("offload") as off, \
                b.client("keeper") as keep:
            small = cf.Cluster.published_pairs(fg, keep, 64 << 10, 2)
            bulk = cf.Cluster.published_pairs(off, keep, 32 * MiB, 4)
            with spinning_on_first_cpu(self.HOGS):
                offload = Busy(off, bulk, depth=4)
                copies = 0
                try:
                    deadline = time.monotonic() + 6
                    while time.monotonic() < deadline:
                        info = fg.copy(*small[copies % 2], timeout=60)
                        self.assertEqual(info.state, "done", info)
                        copies += 1
                finally:
                    offload.stop.set()
            offload.end()  # its copies in flight done; raises the first that failed
            link = {p.name: p for p in fg.peers().peers}["b"]
            on_b = {p.name: p for p in keep.peers().peers}["a"]
        self.assertGreater(copies, 0)
        self.assertGreater(offload.copied, 0)
        # No data connection dropped and re-opened meanwhile: b's readers
        # left without a CPU went on at its own nice value, and said so.
        self.assertEqual(link.resumes, 0)
        self.assertGreater(on_b.readers_lifted, 0)
        self.assertIn("left without a CPU", b.log_text())


if __name__ == "__main__":
    unittest.main()
