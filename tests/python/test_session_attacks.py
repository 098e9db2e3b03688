"""Attacks on a real isometryd by clients that share its node (issue #11).

Each test plays a hostile local user against a victim client: a second
session, a second uid, forged and stolen-looking tokens, connection and
session floods, many distinct copy programs. Each asserts the clear error
the attacker gets AND that the victim's data, transfers and service are
unaffected, and that the daemon's threads and memory stay bounded.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH); as root, for
the second-uid tests (they run a child as `nobody`).
"""

import json
import os
import struct
import subprocess
import sys
import time
import unittest

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture")
sys.path.insert(0, FIXTURE_DIR)
from attack_case import nobody_process, rss_of, run_as_nobody, wait_until  # noqa: E402
# Not gRPC's executors, which the victim's calls may grow (daemon_threads.py).
from daemon_threads import tasks_of as threads_of  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402
from local_socket import LocalConnection  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
PYTHONPATH = os.environ.get("ISOMETRY_PYTHONPATH", "")
if PYTHONPATH:
    sys.path.insert(0, PYTHONPATH)

_IMPORT_ERROR = None
try:
    import grpc

    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
except ImportError as e:
    _IMPORT_ERROR = e

SKIP_REASON = "ISOMETRYD is not set: point it at the isometryd binary (and ISOMETRY_PYTHONPATH)"
if not ISOMETRYD:
    print(f"test_session_attacks: skipped: {SKIP_REASON}", file=sys.stderr)

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it, where a
# rate-capped channel keeps the victim's copy in flight for seconds.
DAEMON = dict(log_level="info", shutdown_grace_ms=500, extra=[
    ("socket_mode", '"0666"'),
    ("max_sessions", 64),
    ("max_sessions_per_uid", 6),
    ("max_grpc_sessions", 12),
    ("max_connections_per_uid", 8),
    ("hello_timeout_ms", 1000),
    ("max_transfers_per_session", 4),
    ("max_allocations_per_session", 8),
    ("max_instances_per_session", 16),
])
CONFIG = """
[runtime]
program_cache_bytes = "1MiB"

[[memory]]
name = "sys0"
kind = "SYS"
pool = "256MiB"
client_quota = "128MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
rate_limit = "16MiB"
"""

NOBODY = 65534
SLOW_BYTES = 48 << 20  # about 3 s at the channel's 16 MiB/s


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class SessionAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-attack-", daemon=DAEMON)
        os.chmod(self.dir, 0o755)  # the second uid reaches the sockets
        self.addCleanup(self._stop)
        self.socket = os.path.join(self.dir, "grpc.sock")
        self.local = os.path.join(self.dir, "local.sock")
        with open(os.path.join(self.dir, "state", "operator.token")) as f:
            self.operator_token = f.read().strip()
        self.victim = isometry.Client(self.socket, name="victim")
        self.addCleanup(self.victim.close)

    def _stop(self):
        try:
            self.daemon.stop()
        finally:
            self.daemon.close()
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, name, **kw):
        c = isometry.Client(self.socket, name=name, **kw)
        self.addCleanup(c.close)
        return c

    def assertFails(self, code, fn, *args, **kw):
        with self.assertRaises(IsometryError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception.message

    def victim_setup(self):
        """The victim's 1 MiB of known bytes, an instance on it, and a slow
        copy in flight."""
        a = self.victim.allocate("sys0", 1 << 20)
        pattern = bytes(range(256)) * 4096
        self.victim.write(a, 0, pattern)
        inst = self.victim.register_instance(a, [1 << 18], [("v", 4)], "F,x")
        src_alloc = self.victim.allocate("sys0", SLOW_BYTES)
        dst_alloc = self.victim.allocate("sys0", SLOW_BYTES)
        src = self.victim.register_instance(src_alloc, [SLOW_BYTES // 8], [("v", 8)], "F,x")
        dst = self.victim.register_instance(dst_alloc, [SLOW_BYTES // 8], [("v", 8)], "F,x")
        transfer = self.victim.copy(src, dst, wait=False)
        return a, pattern, inst, transfer

    # ---- a second session of the same machine ----

    def test_second_session_cannot_touch_the_first(self):
        a, pattern, inst, transfer = self.victim_setup()
        evil = self.client("attacker")

        # Allocations: ids are guessable, ownership is checked.
        for fn, args in [(evil.read, (a.id, 0, 16)), (evil.write, (a.id, 0, b"pwned")),
                         (evil.free, (a.id,)), (evil.publish, (a.id,))]:
            msg = self.assertFails("PERMISSION_DENIED", fn, *args)
            self.assertIn("another client", msg)
        self.assertFails("PERMISSION_DENIED", evil.register_instance, a.id, [16], [("v", 4)], "F,x")
        self.assertFails("NOT_FOUND", evil.unregister_instance, inst.id)
        own = evil.register_instance(evil.allocate("sys0", 1 << 20), [1 << 18], [("v", 4)], "F,x")
        self.assertFails("NOT_FOUND", evil.copy, inst.id, own)
        self.assertFails("NOT_FOUND", evil.copy, own, inst.id)

        # The list shows the owner, never a credential.
        listed = [t for t in evil.transfers() if t.id == transfer]
        self.assertEqual(len(listed), 1)
        owner = listed[0].owner
        self.assertEqual(owner.client_name, "victim")
        self.assertEqual(owner.session_id, self.victim.session_id)
        self.assertEqual(owner.uid, -1)  # gRPC: the daemon cannot know it
        raw = pb.ListTransfersResponse(transfers=evil.transfers()).SerializeToString()
        secret = self.victim.session.split(".", 1)[1]
        self.assertNotIn(secret.encode(), raw)
        self.assertNotIn(self.victim.session.encode(), raw)

        # Another client's transfer: not to be inspected, awaited or cancelled.
        for fn in (evil.transfer, evil.cancel):
            msg = self.assertFails("PERMISSION_DENIED", fn, transfer)
            self.assertIn("operator token", msg)
        self.assertFails("PERMISSION_DENIED", evil.wait, transfer, timeout_ms=100)
        self.assertEqual(self.victim.transfer(transfer).state, "running")

        # Calibrate is the operator's.
        stub = pb_grpc.IsometryStub(evil._channel)
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Calibrate(pb.CalibrateRequest(), metadata=(("isometry-session", evil.session),))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

        # The victim's bytes are untouched; its copy finishes.
        self.assertEqual(self.victim.read(a, 0, 1 << 20), pattern)
        info = self.victim.wait(transfer, timeout_ms=30000)
        self.assertEqual(info.state, "done")

        # Ended transfers stay the owner's: cancelling one is not "OK".
        self.assertFails("PERMISSION_DENIED", evil.cancel, transfer)
        self.assertFails("PERMISSION_DENIED", evil.transfer, transfer)
        self.assertFails("PERMISSION_DENIED", evil.wait, transfer)
        self.victim.cancel(transfer)  # its owner: nothing to do, OK

    def test_hostile_client_name_reaches_the_operator_escaped(self):
        # A name is whatever a client sends. Another local user (nobody)
        # names its session to clear the screen, retitle the terminal and
        # start a forged row; the operator's `isoctl` tables must show it as
        # visible escapes, not as control bytes.
        if os.geteuid() != 0:
            self.skipTest("needs root to run a child as nobody")
        script = f"""
import json, sys, isometry
c = isometry.Client({self.socket!r}, name="\\x1b[2J\\x1b]0;pwned\\x07evil\\r\\n7  root  0")
a, b = (c.allocate("sys0", 4096) for _ in range(2))
done = c.copy(*(c.register_instance(x, [1024], [("v", 4)], "F,x") for x in (a, b)))
print(json.dumps(done.id), flush=True)
sys.stdin.readline()  # the session stays open while the operator looks
"""
        evil = nobody_process(script, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(lambda: evil.poll() is None and (evil.kill(), evil.wait()))
        line = evil.stdout.readline()
        self.assertTrue(line, "the hostile client did not start")
        done = json.loads(line)
        token = os.path.join(self.dir, "state", "operator.token")
        for args in (["sessions"], ["sessions", "-o", "wide"], ["allocations"],
                     ["allocations", "-o", "wide"], ["transfers", str(done)]):
            with self.subTest(args=args):
                r = subprocess.run([os.environ["ISOCTL"], "--socket", self.socket,
                                    "--operator-token", token, *args],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)
                controls = [c for c in r.stdout if (ord(c) < 0x20 and c != "\n") or c == "\x7f"]
                self.assertEqual(controls, [], r.stdout)
                self.assertIn("\\x1b[2J\\x1b]0;pwned\\x07evil", r.stdout)
                forged = [line for line in r.stdout.splitlines() if line.startswith("7  root")]
                self.assertEqual(forged, [], r.stdout)
        evil.communicate("\n", timeout=30)

    def test_forged_tokens_are_refused_alike(self):
        a = self.victim.allocate("sys0", 4096)
        self.victim.write(a, 0, b"\x5a" * 4096)
        channel = grpc.insecure_channel("unix:" + self.socket)
        self.addCleanup(channel.close)
        stub = pb_grpc.IsometryStub(channel)
        sid = str(self.victim.session_id)
        real = self.victim.session
        forged = [
            sid, sid + ".", sid + "." + "0" * 64, sid + "." + real.split(".", 1)[1][:-1] + "x",
            real[:-1], real + "0", "0." + real.split(".", 1)[1], "-1." + "a" * 64,
            "99999999999999999999999." + "a" * 64, "", "\x00" * 8, "." * 80,
        ]
        for token in forged:
            for call in (lambda md: stub.Read(pb.ReadRequest(allocation=a.id, length=16), metadata=md),
                         lambda md: stub.Free(pb.FreeRequest(allocation=a.id), metadata=md)):
                try:
                    call((("isometry-session", token),))
                    self.fail(f"forged token {token!r} was accepted")
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.FAILED_PRECONDITION, repr(token))
                    self.assertNotIn(real, e.details() or "")
                    self.assertIn("unknown or closed session", e.details() or "")
                except ValueError:
                    pass  # metadata the gRPC library itself refuses to send
        self.assertEqual(self.victim.read(a, 0, 4096), b"\x5a" * 4096)
        # The daemon's log has no token in it.
        log = self.daemon.log_text(tail=1 << 20)
        self.assertNotIn(real.split(".", 1)[1], log)
        self.assertIn(f"session {self.victim.session_id} opened", log)

    def test_operator_may_inspect_and_cancel_any_transfer(self):
        _, _, _, transfer = self.victim_setup()
        op = self.client("operator", operator_token=self.operator_token)
        self.assertEqual(op.transfer(transfer).owner.client_name, "victim")
        op.cancel(transfer)
        info = self.victim.wait(transfer, timeout_ms=10000, check=False)
        self.assertEqual(info.state, "cancelled")
        # A wrong operator token is no operator token.
        fake = self.client("fake-operator", operator_token="0" * len(self.operator_token))
        self.assertFails("PERMISSION_DENIED", fake.transfer, transfer)

    def test_orphaned_published_allocation_is_not_anyones(self):
        owner = self.client("publisher")
        a = owner.allocate("sys0", 4096)
        owner.write(a, 0, b"\x11" * 4096)
        owner.publish(a)
        owner.close()
        evil = self.client("attacker")
        wait_until(lambda: evil.status().sessions == 2, "the publisher's session to end")
        self.assertEqual(evil.read(a.id, 0, 4096), b"\x11" * 4096)  # published: readable
        msg = self.assertFails("PERMISSION_DENIED", evil.free, a.id)
        self.assertIn("operator", msg)
        self.assertEqual(evil.read(a.id, 0, 16), b"\x11" * 16)
        self.client("operator", operator_token=self.operator_token).free(a.id)
        self.assertFails("NOT_FOUND", evil.read, a.id, 0, 16)

    def test_publish_and_leave_cannot_fill_the_pool(self):
        # Issue #48 item 8: as `nobody` over the local socket, publish 48 MiB
        # and leave, five times. Orphans count against the uid's
        # client_quota (128 MiB): the third publish is refused, the pool
        # (256 MiB) keeps room for the victim, and the operator lists and
        # frees the orphans with its token alone (gRPC and isoctl).
        if os.geteuid() != 0:
            self.skipTest("needs root to run a child as nobody")
        script = f"""
import json, isometry
out = []
for i in range(5):
    c = isometry.Client({self.socket!r}, name="hoarder", local_socket={self.local!r})
    try:
        a = c.allocate("sys0", 48 << 20)
        c.publish(a)
        out.append("OK")
    except isometry.IsometryError as e:
        out.append(e.code + ": " + e.message)
    c.close()
print(json.dumps(out))
"""
        got = run_as_nobody(self, script)
        self.assertEqual(got[:2], ["OK", "OK"], got)
        for refused in got[2:]:
            self.assertTrue(refused.startswith("RESOURCE_EXHAUSTED"), got)
            self.assertIn("uid 65534", refused)
            self.assertIn("client_quota", refused)
        wait_until(lambda: self.victim.status().sessions == 1, "the hoarder's sessions to end")
        a = self.victim.allocate("sys0", 128 << 20)  # the victim's whole quota still fits
        self.victim.free(a)
        # The operator: no session, the token alone.
        import grpc
        from isometry import isometry_pb2_grpc as pb_grpc
        with grpc.insecure_channel("unix://" + self.socket) as ch:
            stub = pb_grpc.IsometryStub(ch)
            with self.assertRaises(grpc.RpcError) as e:
                stub.ListOrphans(pb.ListOrphansRequest())
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            md = (("isometry-operator", self.operator_token),)
            orphans = stub.ListOrphans(pb.ListOrphansRequest(), metadata=md).orphans
            self.assertEqual([(o.bytes, o.uid) for o in orphans], [(48 << 20, NOBODY)] * 2)
            stub.Free(pb.FreeRequest(allocation=orphans[0].allocation), metadata=md)
            with self.assertRaises(grpc.RpcError) as e:  # not an orphan: the victim's
                stub.Free(pb.FreeRequest(allocation=self.victim.allocate("sys0", 4096).id),
                          metadata=md)
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        isoctl = os.environ.get("ISOCTL", "")
        if isoctl:
            token = os.path.join(self.dir, "state", "operator.token")
            base = [isoctl, "--socket", self.socket, "--operator-token", token, "orphans"]
            listed = subprocess.run(base, capture_output=True, text=True, timeout=30)
            self.assertEqual(listed.returncode, 0, listed.stderr)
            self.assertIn(str(orphans[1].allocation), listed.stdout)
            self.assertIn("uid 65534", listed.stdout)
            freed = subprocess.run(base + ["--free-all"], capture_output=True, text=True,
                                   timeout=30)
            self.assertEqual(freed.returncode, 0, freed.stderr)
            self.assertIn(f"freed allocation {orphans[1].allocation}", freed.stdout)
        else:
            self.client("operator", operator_token=self.operator_token).free(
                orphans[1].allocation)
        with grpc.insecure_channel("unix://" + self.socket) as ch:
            left = pb_grpc.IsometryStub(ch).ListOrphans(
                pb.ListOrphansRequest(), metadata=(("isometry-operator", self.operator_token),))
            self.assertEqual(len(left.orphans), 0)

    # ---- another uid ----

    def test_another_uid_cannot_touch_the_victim(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run a child as nobody")
        a, pattern, inst, transfer = self.victim_setup()
        script = f"""
import json, grpc, isometry
from isometry import isometry_pb2 as pb
out = {{}}
c = isometry.Client({self.socket!r}, name="intruder")
def code(fn, *args, **kw):
    try:
        fn(*args, **kw)
        return "OK"
    except isometry.IsometryError as e:
        return e.code
    except grpc.RpcError as e:
        return e.code().name
out["read"] = code(c.read, {a.id}, 0, 16)
out["write"] = code(c.write, {a.id}, 0, b"x")
out["free"] = code(c.free, {a.id})
out["publish"] = code(c.publish, {a.id})
out["register"] = code(c.register_instance, {a.id}, [16], [("v", 4)], "F,x")
out["get"] = code(c.transfer, {transfer})
out["cancel"] = code(c.cancel, {transfer})
out["wait"] = code(c.wait, {transfer}, timeout_ms=100)
out["calibrate"] = code(c._stub.Calibrate, pb.CalibrateRequest(), metadata=c._metadata())
out["unregister"] = code(c.unregister_instance, {inst.id})
out["copy"] = code(c.copy, {inst.id}, {inst.id})
out["owners"] = [(t.owner.client_name, t.owner.session_id) for t in c.transfers()]
c.close()
print(json.dumps(out))
"""
        out = run_as_nobody(self, script)
        for k in ("read", "write", "free", "publish", "register", "get", "cancel", "wait",
                  "calibrate"):
            self.assertEqual(out[k], "PERMISSION_DENIED", k)
        self.assertEqual(out["unregister"], "NOT_FOUND")  # not in its session
        self.assertEqual(out["copy"], "NOT_FOUND")
        self.assertIn(["victim", self.victim.session_id], out["owners"])
        self.assertEqual(self.victim.read(a, 0, 1 << 20), pattern)
        self.assertIn(self.victim.transfer(transfer).state, ("waiting", "running"))

    def test_local_sessions_are_bound_per_uid(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run a child as nobody")
        # nobody opens as many local sessions as it can.
        script = f"""
import json, sys
sys.path.insert(0, {FIXTURE_DIR!r})
from local_socket import LocalConnection, RING_ABI_VERSION
from isometry import isometry_pb2 as pb
codes, keep = [], []
for i in range(12):
    c = LocalConnection({self.local!r})
    try:
        c.send(pb.LocalRequest(tag=1, hello=pb.HelloRequest(abi_version=RING_ABI_VERSION, client_name="n")))
    except OSError:
        pass  # refused at accept: the daemon's answer is still there to read
    r = c.response()
    codes.append("closed" if r is None else r.code)
    keep.append(c)
print(json.dumps({{"codes": codes}}))
"""
        codes = run_as_nobody(self, script)["codes"]
        self.assertEqual(codes[:6], [0] * 6)  # max_sessions_per_uid = 6
        self.assertTrue(all(c == 8 for c in codes[6:]), codes)  # RESOURCE_EXHAUSTED
        # Root's local clients were never short of a session.
        c = LocalConnection(self.local)
        self.addCleanup(c.close)
        self.assertEqual(c.hello("root").code, 0)

    # ---- floods ----

    def test_stalled_and_flooding_connections_are_bounded(self):
        pid = self.daemon.proc.pid
        base_threads = threads_of(pid)
        stalled = []
        refused = 0
        for _ in range(300):
            try:
                c = LocalConnection(self.local)
            except OSError:
                refused += 1
                continue
            stalled.append(c)
        self.addCleanup(lambda: [c.close() for c in stalled])
        time.sleep(0.3)
        # max_connections_per_uid = 8 (root is one uid, the victim is gRPC).
        self.assertLessEqual(threads_of(pid), base_threads + 8 + 4)
        answered = []
        for c in stalled[8:]:
            r = c.response()
            if r is not None:
                answered.append(r.code)
        self.assertTrue(answered, "refused connections are told why")
        self.assertTrue(all(code == 8 for code in answered), answered)
        # Stalled before hello: closed after hello_timeout_ms (1 s).
        for c in stalled[:8]:
            self.assertTrue(c.closed_by_daemon(5.0), "a silent connection was kept")
        # A byte now and then does not keep a connection alive either.
        slow = LocalConnection(self.local)
        self.addCleanup(slow.close)
        started = time.monotonic()
        try:
            for _ in range(40):
                slow.send_raw(b"\x01")
                time.sleep(0.1)
        except OSError:
            pass
        self.assertTrue(slow.closed_by_daemon(5.0))
        self.assertLess(time.monotonic() - started, 5.0)
        # A huge frame before hello: closed at once, nothing allocated.
        big = LocalConnection(self.local)
        self.addCleanup(big.close)
        try:
            big.send_raw(struct.pack("<I", 1 << 20) + b"\x00" * 100)
        except OSError:
            pass  # closed after the length, before the rest arrived (EPIPE)
        self.assertTrue(big.closed_by_daemon(2.0))
        # Service went on: the victim copies, a new local client attaches.
        a = self.victim.allocate("sys0", 8192)
        i = self.victim.register_instance(a, [1024], [("v", 4)], "F,x")
        j = self.victim.register_instance(a, [1024], [("v", 4)], "F,x", offset=4096)
        self.victim.copy(i, j)
        wait_until(lambda: threads_of(pid) <= base_threads + 4, "the stalled threads to end")
        fresh = LocalConnection(self.local)
        self.addCleanup(fresh.close)
        self.assertEqual(fresh.hello("fresh").code, 0)
        # Nothing was logged verbatim or without bound.
        self.assertLess(max(len(l) for l in self.daemon.log_text(tail=1 << 20).splitlines()), 4096)

    def test_attach_flood_leaves_others_served(self):
        floods = []
        codes = []
        for i in range(40):
            try:
                floods.append(self.client(f"flood{i}", connect_timeout=5))
            except IsometryError as e:
                codes.append(e.code)
        # The victim's session is one of the 12 gRPC sessions.
        self.assertEqual(len(floods), 11)
        self.assertTrue(codes and all(c == "RESOURCE_EXHAUSTED" for c in codes), codes)
        # Local-socket clients are not denied by a gRPC flood.
        c = LocalConnection(self.local)
        self.addCleanup(c.close)
        self.assertEqual(c.hello("local").code, 0)
        # The victim is still served.
        a = self.victim.allocate("sys0", 4096)
        self.victim.write(a, 0, b"ok")
        self.assertEqual(self.victim.read(a, 0, 2), b"ok")

    def test_per_session_bounds(self):
        evil = self.client("hog")
        allocs = [evil.allocate("sys0", 4096) for _ in range(8)]
        msg = self.assertFails("RESOURCE_EXHAUSTED", evil.allocate, "sys0", 4096)
        self.assertIn("max_allocations_per_session", msg)
        for _ in range(16):
            evil.register_instance(allocs[0], [16], [("v", 4)], "F,x")
        msg = self.assertFails("RESOURCE_EXHAUSTED", evil.register_instance, allocs[0], [16],
                               [("v", 4)], "F,x")
        self.assertIn("max_instances_per_session", msg)
        # Transfers in flight: four slow copies, the fifth refused.
        hog = self.client("hog2")
        src = hog.register_instance(hog.allocate("sys0", 16 << 20), [2 << 20], [("v", 8)], "F,x")
        dsts = [hog.register_instance(hog.allocate("sys0", 16 << 20), [2 << 20], [("v", 8)], "F,x")
                for _ in range(4)]
        ids = [hog.copy(src, d, wait=False) for d in dsts]
        msg = self.assertFails("RESOURCE_EXHAUSTED", hog.copy, src, dsts[1], wait=False)
        self.assertIn("max_transfers_per_session", msg)
        # Others still copy.
        a = self.victim.allocate("sys0", 8192)
        i = self.victim.register_instance(a, [1024], [("v", 4)], "F,x")
        j = self.victim.register_instance(a, [1024], [("v", 4)], "F,x", offset=4096)
        self.victim.copy(i, j, timeout=30)
        for t in ids:
            hog.cancel(t)

    def test_many_distinct_programs_keep_memory_bounded(self):
        pid = self.daemon.proc.pid
        n = 20
        a = self.victim.allocate("sys0", n ** 4 * 8)
        b = self.victim.allocate("sys0", 21 ** 4 * 8)  # whole 3-point blocks
        src = self.victim.register_instance(a, [n] * 4, [("u", 4), ("v", 4)], "F,x,y,z,w")
        dst = self.victim.register_instance(
            b, [n] * 4, [("u", 4), ("v", 4)],
            "x_in=3,y_in=3,z_in=3,w_in=3,F,x_out,y_out,z_out,w_out")

        def distinct(k):
            lo = [1 + k % 5, 1 + (k // 5) % 5, 1 + (k // 25) % 5, 1]
            return [(lo[d], n - 1 - (k % 3)) for d in range(4)]

        for k in range(20):
            self.victim.copy(src, dst, box=distinct(k))
        before = rss_of(pid)
        for k in range(20, 400):
            self.victim.copy(src, dst, box=distinct(k))
        grown = rss_of(pid) - before
        # Under AddressSanitizer freed memory sits in its quarantine (up to
        # 256 MiB): RSS says nothing there; the cache's own count still does.
        with open(f"/proc/{pid}/maps") as f:
            sanitized = "libasan" in f.read()
        if not sanitized:
            self.assertLess(grown, 48 << 20, f"the daemon grew by {grown >> 20} MiB")
        st = self.victim.status()
        self.assertGreaterEqual(st.program_cache_misses, 100)
        self.assertLessEqual(st.program_cache_bytes, 1 << 20)  # runtime.program_cache_bytes
        self.assertGreater(st.program_cache_bytes, 0)


if __name__ == "__main__":
    unittest.main()
