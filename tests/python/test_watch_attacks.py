"""Attacks on Active Access watches (issue #48, item 9 and its smaller
finding about refused watches).

A victim publishes an allocation and watches two of its pages: page 0
`deny`, page 1 `log_only`. An attacker of another uid (`nobody`) tries the
paths around the watch: mapping the memory over the local socket (the
daemon hands out a handle without the memory: its stores would bypass the
watch), a redistribution into the watched pages
(which does not run through watches), and plain copies and writes into the
denied page, which must be refused AND counted in the region's `denied`.
The victim's bytes stay as they were. A refused Watch with a file log does
not leave the file behind. Item 5 and the watch part of item 4: a put's
scratch buffer, a registered datatype and a watched allocation's worker
thread each count against a bound (RESOURCE_EXHAUSTED naming its key).

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH); as root (the
attacker runs as `nobody`).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from attack_case import (FIXTURE_DIR, ISOMETRYD, SKIP_REASON, note_skip,  # noqa: E402
                         run_as_nobody, start_daemon)

_IMPORT_ERROR = None
try:
    import isometry
    from isometry import IsometryError
except ImportError as e:
    _IMPORT_ERROR = e

note_skip("test_watch_attacks")

DAEMON = dict(log_level="info", shutdown_grace_ms=500, extra=[
    ("socket_mode", '"0666"'),
    ("max_watched_allocations_per_session", 2),
    ("max_watch_threads", 3),
    ("max_watch_scratch_bytes_per_session", '"512KiB"'),
    ("max_datatype_bytes_per_session", '"8MiB"'),
])
CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
client_quota = "16MiB"
staging = "16MiB"

[[memory]]
name = "dsk0"
kind = "DSK"
directory = "{dir}/dsk"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""

PAGE = 4096
PAGES = 4
PATTERN = bytes((i * 7 + 3) & 0xFF for i in range(PAGES * PAGE))

# The attacker of the budgets, as `nobody`: writes into the victim's
# watched allocation `alloc` past the scratch budget, a datatype past the
# datatype budget, and watches past the thread bounds.
HOARDER = r"""
import json, sys, isometry
from isometry import datatype as dt
grpc_sock, alloc = sys.argv[1], int(sys.argv[2])
out = {}
def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return "OK"
    except isometry.IsometryError as e:
        out.setdefault("messages", []).append(e.message)
        return e.code
c = isometry.Client(grpc_sock, name="hoarder")
out["big_write"] = code(c.write, alloc, 0, b"\xee" * (2 << 20))
out["small_write"] = code(c.write, alloc, 0, b"\x5a" * 4096)
out["big_type"] = code(c.register_datatype,
                       dt.INT.Create_indexed_block(1, [3 * i for i in range(250000)]))
out["small_type"] = code(c.register_datatype, dt.INT.Create_vector(16, 1, 2))
mine = [c.allocate("sys0", 4096) for _ in range(3)]
out["watches"] = [code(c.watch, a, 0, 4096, action="apply_log", handler="count") for a in mine]
c.close()
print(json.dumps(out))
"""

# The attacker, as `nobody`: the victim's published allocation `alloc`,
# reached every way there is; each path's status code.
ATTACKER = r"""
import json, sys, isometry
from isometry import isometry_pb2 as pb
sys.path.insert(0, sys.argv[3])
from local_socket import LocalConnection
grpc_sock, local_sock, _, alloc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PAGE = 4096
out = {}
def code(fn, *a, **kw):
    try:
        fn(*a, **kw)
        return "OK"
    except isometry.IsometryError as e:
        out.setdefault("messages", []).append(e.message)
        return e.code
# (a) the memory itself, over the local socket.
conn = LocalConnection(local_sock)
conn.hello("mapper")
conn.fds_received = 0  # the hello's own descriptors
r = conn.request(pb.LocalRequest(tag=2, map=pb.MapRequest(allocation=alloc)))
out["map"] = r.code
out["map_watched"] = r.map.watched
out["map_fds"] = conn.fds_received
conn.close()
c = isometry.Client(grpc_sock, name="attacker")
mine = c.allocate("sys0", 2 * PAGE)
c.write(mine, 0, b"\xee" * (2 * PAGE))
src = c.register_instance(mine, bounds=[2 * PAGE], fields=[("b", 1)], layout="F,x")
# (b) a redistribution into the denied and the log-only page.
dst = c.register_instance(alloc, bounds=[2 * PAGE], fields=[("b", 1)], layout="F,x")
out["join_src"] = code(c.join_distributed, "from", [2 * PAGE], ["block"], [1], 1, 0, src)
out["join_watched"] = code(c.join_distributed, "into", [2 * PAGE], ["block"], [1], 1, 0, dst)
out["redistribute"] = code(c.redistribute, "from", "into")
# (c) a copy and a write into the denied page: refused and counted.
page0 = c.register_instance(alloc, bounds=[PAGE], fields=[("b", 1)], layout="F,x")
one = c.register_instance(mine, bounds=[PAGE], fields=[("b", 1)], layout="F,x")
out["copy"] = code(c.copy, one, page0)
out["write"] = code(c.write, alloc, 0, b"EVIL")
c.close()
print(json.dumps(out))
"""


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class WatchAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        self.dir, self.daemon = start_daemon(self, CONFIG, "isometry-watch-attack-", DAEMON,
                                             dirs=["dsk"])
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.local = os.path.join(self.dir, "local.sock")
        self.victim = isometry.Client(self.socket, name="victim")
        self.addCleanup(self.victim.close)

    def test_every_path_into_a_watched_region_applies_the_watch(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the attacker as nobody")
        a = self.victim.allocate("sys0", PAGES * PAGE)
        self.victim.write(a, 0, PATTERN)
        self.victim.publish(a)
        deny = self.victim.watch(a, 0, PAGE, action="deny", handler="count")
        self.victim.watch(a, PAGE, PAGE, action="log_only", handler="count")
        got = run_as_nobody(self, ATTACKER, self.socket, self.local, FIXTURE_DIR, a.id)
        # A handle to copy with, but not the memory: no descriptor came.
        self.assertEqual(got["map"], 0, got)
        self.assertTrue(got["map_watched"], got)
        self.assertEqual(got["map_fds"], 0, got)
        self.assertEqual(got["join_src"], "OK", got)
        self.assertEqual(got["join_watched"], "FAILED_PRECONDITION", got)
        self.assertIn(got["redistribute"], ("NOT_FOUND", "FAILED_PRECONDITION"), got)
        self.assertEqual(got["copy"], "PERMISSION_DENIED", got)
        self.assertEqual(got["write"], "PERMISSION_DENIED", got)
        self.assertEqual(self.victim.read(a, 0, PAGES * PAGE), PATTERN)
        info = self.victim.watch_info(a)
        denied = {rs.region: rs.denied for rs in info.regions}
        self.assertGreaterEqual(denied[deny], 2, info)

    def test_scratch_datatypes_and_watch_threads_are_bounded(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the attacker as nobody")
        a = self.victim.allocate("sys0", 4 << 20)
        self.victim.publish(a)
        self.victim.watch(a, 0, 4 << 20, action="apply_log", handler="count")
        got = run_as_nobody(self, HOARDER, self.socket, a.id)
        messages = " | ".join(got.get("messages", []))
        self.assertEqual(got["big_write"], "RESOURCE_EXHAUSTED", got)
        self.assertIn("daemon.max_watch_scratch_bytes_per_session", messages)
        self.assertEqual(got["small_write"], "OK", got)
        self.assertEqual(got["big_type"], "RESOURCE_EXHAUSTED", got)
        self.assertIn("daemon.max_datatype_bytes_per_session", messages)
        self.assertEqual(got["small_type"], "OK", got)
        # The victim holds one watched allocation: the hoarder gets two of
        # the node's three, its third is refused by the session bound.
        self.assertEqual(got["watches"], ["OK", "OK", "RESOURCE_EXHAUSTED"], got)
        self.assertIn("max_watched_allocations_per_session", messages)
        # The hoarder is gone, its two watches with it: the victim's second
        # and then a third session's watch fit again; a fourth does not.
        b = self.victim.allocate("sys0", 4096)
        self.victim.watch(b, 0, 4096, action="apply_log", handler="count")
        other = isometry.Client(self.socket, name="other")
        self.addCleanup(other.close)
        c = other.allocate("sys0", 4096)
        other.watch(c, 0, 4096, action="apply_log", handler="count")
        d = other.allocate("sys0", 4096)
        with self.assertRaises(IsometryError) as e:
            other.watch(d, 0, 4096, action="apply_log", handler="count")
        self.assertEqual(e.exception.code, "RESOURCE_EXHAUSTED")
        self.assertIn("daemon.max_watch_threads", e.exception.message)
        # The victim's own work goes on: the hoarder's page was applied.
        self.assertEqual(self.victim.read(a, 0, 4096), b"\x5a" * 4096)

    def test_no_watch_over_a_mapped_allocation_or_a_rank(self):
        # Mapped by another client once: its stores can never be watched.
        a = self.victim.allocate("sys0", PAGES * PAGE)
        self.victim.publish(a)
        from local_socket import LocalConnection
        from isometry import isometry_pb2 as pb
        conn = LocalConnection(self.local)
        conn.hello("mapper")
        self.assertEqual(conn.request(pb.LocalRequest(tag=2, map=pb.MapRequest(
            allocation=a.id))).code, 0)
        conn.close()
        with self.assertRaises(IsometryError) as e:
            self.victim.watch(a, 0, PAGE, action="deny", handler="count")
        self.assertEqual(e.exception.code, "FAILED_PRECONDITION")
        self.assertIn("mapped by another client", e.exception.message)
        # A rank's storage: redistributions do not run through watches.
        b = self.victim.allocate("sys0", PAGES * PAGE)
        inst = self.victim.register_instance(b, bounds=[PAGE], fields=[("b", 1)], layout="F,x")
        self.victim.join_distributed("r", [PAGE], ["block"], [1], 1, 0, inst)
        with self.assertRaises(IsometryError) as e:
            self.victim.watch(b, 0, PAGE, action="apply_log", handler="count")
        self.assertEqual(e.exception.code, "FAILED_PRECONDITION")
        self.assertIn("distributed instance 'r'", e.exception.message)
        self.victim.watch(b, PAGE, PAGE, action="apply_log", handler="count")  # not the rank's

    def test_a_refused_watch_leaves_no_log_file(self):
        a = self.victim.allocate("sys0", PAGES * PAGE)
        self.victim.watch(a, 0, PAGE, action="apply_log", handler="count")
        logs = os.path.join(self.dir, "dsk")
        with self.assertRaises(IsometryError) as e:  # overlaps the first region
            self.victim.watch(a, 0, 2 * PAGE, action="apply_log", handler="file_log",
                              file_memory="dsk0", file="refused.log")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertFalse(os.path.exists(os.path.join(logs, "refused.log")))
        # A log file that was there before a refusal stays.
        with open(os.path.join(logs, "kept.log"), "wb") as f:
            f.write(b"earlier entries")
        with self.assertRaises(IsometryError):
            self.victim.watch(a, 0, 2 * PAGE, action="apply_log", handler="file_log",
                              file_memory="dsk0", file="kept.log")
        with open(os.path.join(logs, "kept.log"), "rb") as f:
            self.assertEqual(f.read(), b"earlier entries")


if __name__ == "__main__":
    unittest.main()
