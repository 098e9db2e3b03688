"""Client process memory from Python (issue 14): private ranges registered
by ``Client(..., local_socket=...)`` and copied by a real isometryd with its
cma channel, to and from pools and between two Python processes.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's
/usr/bin/python3). The second process is private_peer.py, started with
subprocess as the same uid.
"""

import ctypes
import mmap
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

import test_python_client as ref  # the layout reference model; its tests are not collected
from test_python_client import FIELDS, ISOMETRYD, SKIP_REASON, RefLayout, _fill

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402
from native_case import CaseHelpers  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
else:
    isometry = None

HERE = os.path.dirname(os.path.abspath(__file__))
DAEMON = dict(log_level="warn", shutdown_grace_ms=2000)
CONFIG = ONE_SYS_MEMORY + """
[[channel]]
name = "cma0"
kind = "cma"
"""
BOUNDS = [(0, 1000)]

# Registers a range over the local socket, then execs itself (SCRIPT: its
# own text) keeping the socket, and registers again from the new program.
EXEC_SCRIPT = r"""
import ctypes, os, socket, sys
sys.path.insert(0, sys.argv[2])
from local_socket import LocalConnection
from isometry import isometry_pb2 as pb
def register(conn, tag):
    buf = ctypes.create_string_buffer(4096)
    r = conn.request(pb.LocalRequest(tag=tag, register_private=pb.RegisterPrivateRequest(
        address=ctypes.addressof(buf), bytes=4096)))
    return f"{r.code} {r.message}"
if len(sys.argv) == 3:
    conn = LocalConnection(sys.argv[1])
    assert conn.hello("exec").code == 0
    print("before exec:", register(conn, 2).strip(), flush=True)
    fd = conn.sock.detach()
    os.set_inheritable(fd, True)
    os.execv(sys.executable, [sys.executable, "-c", SCRIPT, sys.argv[1], sys.argv[2], str(fd)])
conn = LocalConnection.__new__(LocalConnection)
conn.sock = socket.socket(fileno=int(sys.argv[3]))
conn.sock.settimeout(5)
conn.fds_received = 0
print("after exec:", register(conn, 3), flush=True)
"""
EXEC_SCRIPT = "SCRIPT = " + repr(EXEC_SCRIPT) + "\n" + EXEC_SCRIPT


class Peer:
    """private_peer.py: another Python process with a private range."""

    def __init__(self, test, nbytes, publish=True, native=False):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        args = [sys.executable, os.path.join(HERE, "private_peer.py"), test.socket,
                test.local, str(nbytes)] + ([] if publish else ["--no-publish"]) + (
                    ["--native"] if native else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True)
        test.addCleanup(self.stop)
        word, _, rid = self.readline().partition(" ")
        test.assertEqual(word, "range")
        self.range = int(rid)

    def readline(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"private_peer ended early ({self.proc.wait()})")
        return line.strip()

    def command(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.readline()

    def set(self, data):
        assert self.command("set " + bytes(data).hex()) == "ok"

    def dump(self):
        return bytes.fromhex(self.command("dump"))

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class PrivateMemoryTest(CaseHelpers, unittest.TestCase):
    """Each test gets its own daemon (with a cma channel) and one client
    whose session is opened over the local socket, self.c."""

    isometry = isometry

    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR}); set "
                      "ISOMETRY_PYTHONPATH to build/python and run with /usr/bin/python3")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pypriv-", daemon=DAEMON)
        except AssertionError as e:
            self.fail(str(e))
        self.socket = self.daemon.socket
        self.local = os.path.join(self.dir, "local.sock")
        self.clients = []
        self.c = self.client("main")

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.daemon.stop(timeout_s=30)
        log = self.daemon.log_text()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0, f"isometryd exited with {rc} on SIGTERM:\n{log}")

    def client(self, name, local=True):
        c = isometry.Client(self.socket, name=name, connect_timeout=10,
                            local_socket=self.local if local else None)
        self.clients.append(c)
        return c

    def pool_instance(self, c, layout, data=None, filler=0xEE):
        """A pool instance in `layout` holding `data` (else `filler` bytes)."""
        r = RefLayout(layout, BOUNDS, FIELDS)
        a = c.allocate("sys0", r.total)
        c.write(a, 0, data if data is not None else bytes([filler]) * r.total)
        return a, c.register_instance(a, BOUNDS, FIELDS, layout), r

    # ---- tests ----

    def test_a_process_that_execs_is_not_taken_for_the_old_one(self):
        # The session pinned the process's address space at its first
        # RegisterPrivate; after an exec (the socket kept open) that
        # address space is gone: a new range is refused, not registered
        # over memory every copy would fail on.
        out = subprocess.run(
            [sys.executable, "-c", EXEC_SCRIPT, self.local,
             os.path.join(HERE, "..", "pyfixture")],
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
            capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        first, after = out.stdout.strip().splitlines()[-2:]
        self.assertEqual(first, "before exec: 0")
        self.assertIn("after exec: 9 ", after)  # FAILED_PRECONDITION
        self.assertIn("has exec'd since", after)

    def test_private_to_pool_and_back_with_layout_change(self):
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        mine = _fill(aos, BOUNDS)  # a bytearray: this process's own memory
        rng = self.c.register_private(mine)
        self.assertEqual((rng.nbytes, rng.buffer), (aos.total, mine))
        src = self.c.register_instance(private_range=rng, bounds=BOUNDS, fields=FIELDS,
                                       layout="F,x")
        self.assertEqual((src.private_range, src.total_bytes), (rng.id, aos.total))
        da, dst, soa = self.pool_instance(self.c, "x,F")
        info = self.c.copy(src, dst)
        self.assertEqual(info.state, "done")
        self.assertIn("proc", info.path)
        self.assertIn("cma0", info.path)
        self.assertEqual(self.c.read(da, 0, soa.total), bytes(_fill(soa, BOUNDS, 0xEE)))
        self.assertEqual(mine, _fill(aos, BOUNDS), "the source changed")

        # Pool -> private, into a blocked layout 64 bytes into a larger buffer.
        blocked = RefLayout("x_in=8,F,x_out", BOUNDS, FIELDS)
        out = bytearray(b"\xee" * (64 + blocked.total + 64))
        back = self.c.register_instance(private_range=self.c.register_private(out), offset=64,
                                        bounds=BOUNDS, fields=FIELDS, layout="x_in=8,F,x_out")
        self.c.copy(dst, back)
        self.assertEqual(out[64:-64], _fill(blocked, BOUNDS, 0xEE))
        self.assertEqual(out[:64] + out[-64:], b"\xee" * 128, "bytes around the instance changed")

        # Private -> private in one process (through a staging slot).
        again = bytearray(aos.total)
        a2 = self.c.register_instance(private_range=self.c.register_private(again),
                                      bounds=BOUNDS, fields=FIELDS, layout="F,x")
        self.c.copy(back, a2)
        self.assertEqual(again, mine)

    def test_a_published_range_is_used_by_another_process_of_this_uid(self):
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        soa = RefLayout("x,F", BOUNDS, FIELDS)
        peer = Peer(self, aos.total)
        peer.set(_fill(aos, BOUNDS))
        theirs = self.c.register_instance(private_range=peer.range, bounds=BOUNDS,
                                          fields=FIELDS, layout="F,x")
        # Their private memory -> mine, AOS -> SOA.
        mine = bytearray(soa.total)
        ours = self.c.register_instance(private_range=self.c.register_private(mine),
                                        bounds=BOUNDS, fields=FIELDS, layout="x,F")
        self.c.copy(theirs, ours)
        self.assertEqual(mine, _fill(soa, BOUNDS))
        # A pool -> their private memory, SOA -> AOS, over zeros.
        peer.set(bytes(aos.total))
        _, pool, _ = self.pool_instance(self.c, "x,F", data=bytes(mine))
        self.c.copy(pool, theirs)
        self.assertEqual(peer.dump(), bytes(_fill(aos, BOUNDS)))

    def test_an_unpublished_range_of_another_session_is_not_found(self):
        peer = Peer(self, 4096, publish=False)
        err = self.assertFails("NOT_FOUND", self.c.register_instance, private_range=peer.range,
                               bounds=[256], fields=[("v", 16)], layout="F,x")
        self.assertIn(f"private range {peer.range}", err.message)
        # Nor through a session of this process other than the owner's.
        other = self.client("other")
        self.assertFails("NOT_FOUND", other.register_instance, private_range=peer.range,
                         bounds=[256], fields=[("v", 16)], layout="F,x")
        # gRPC sessions carry no uid: not even a published range is theirs.
        published = Peer(self, 4096)
        self.assertFails("NOT_FOUND", self.client("grpc", local=False).register_instance,
                         private_range=published.range, bounds=[256], fields=[("v", 16)],
                         layout="F,x")

    def test_copies_naming_a_range_fail_cleanly_once_its_owner_closed(self):
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        for ending in ("close", "kill"):
            with self.subTest(ending=ending):
                peer = Peer(self, aos.total)
                peer.set(_fill(aos, BOUNDS))
                theirs = self.c.register_instance(private_range=peer.range, bounds=BOUNDS,
                                                  fields=FIELDS, layout="F,x")
                da, pool, soa = self.pool_instance(self.c, "x,F")
                self.c.copy(theirs, pool)
                if ending == "close":
                    self.assertEqual(peer.command("close"), "closed")  # the process lives on
                else:
                    peer.proc.send_signal(signal.SIGKILL)
                    peer.proc.wait()
                # The daemon notices the session's end asynchronously.
                def refused():
                    try:
                        self.c.copy(theirs, pool, timeout=10)
                    except IsometryError as e:
                        return e
                    return None
                deadline = time.monotonic() + 10
                while (err := refused()) is None:
                    self.assertLess(time.monotonic(), deadline, "copies still succeed")
                    time.sleep(0.05)
                self.assertEqual(err.code, "NOT_FOUND", err.message)
                # A killed process's copies fail at once ("process N has
                # exited"); its range ends when the daemon reads the socket's end.
                def registered():
                    try:
                        self.c.register_instance(private_range=peer.range, bounds=BOUNDS,
                                                 fields=FIELDS, layout="F,x")
                        return True
                    except IsometryError as e:
                        self.assertEqual(e.code, "NOT_FOUND", e.message)
                        return False
                self.wait_for(lambda: not registered(), "the range to end with its session")
                # This session and the daemon carry on.
                self.assertTrue(self.daemon.alive())
                db, other, _ = self.pool_instance(self.c, "F,x")
                self.assertEqual(self.c.copy(pool, other).state, "done")
                self.c.free(da)
                self.c.free(db)

    def test_read_only_and_unusable_buffers_are_refused_by_the_client(self):
        for buf in (b"\0" * 64, memoryview(bytearray(64)).toreadonly()):
            with self.assertRaises(TypeError) as cm:
                self.c.register_private(buf)
            self.assertIn("read-only", str(cm.exception))
        with self.assertRaises(TypeError):
            self.c.register_private(12345)
        with self.assertRaises(ValueError):
            self.c.register_private(bytearray())
        with self.assertRaises(ValueError):
            self.c.register_private(memoryview(bytearray(64))[::2])
        # A client whose session is not over the local socket is told how.
        err = self.assertFails("FAILED_PRECONDITION",
                               self.client("grpc", local=False).register_private, bytearray(64))
        self.assertIn("local_socket", err.message)

    def test_kernel_addresses_are_invalid_argument(self):
        # Issue #48: a range in the kernel's half of the address space was
        # accepted and its copies failed with INTERNAL.
        from isometry import isometry_pb2 as pb
        from local_socket import LocalConnection  # tests/pyfixture, on the path above
        conn = LocalConnection(self.local, timeout_s=10)
        try:
            self.assertEqual(conn.hello("kernel").code, 0)
            for address, n in ((0xFFFFFFFF81000000, 4096), ((1 << 56) - 4096, 8192)):
                req = pb.LocalRequest(tag=2, register_private=pb.RegisterPrivateRequest(
                    address=address, bytes=n))
                resp = conn.request(req)
                self.assertEqual(resp.code, 3, resp.message)  # INVALID_ARGUMENT
                self.assertIn("user address space", resp.message)
        finally:
            conn.close()
        self.assertTrue(self.daemon.alive())

    def test_other_writable_buffers_are_accepted(self):
        data = bytes(range(256)) * 16
        m = mmap.mmap(-1, len(data))
        arr = (ctypes.c_ubyte * len(data))()
        buffers = [m, arr, memoryview(bytearray(len(data) + 8))[8:]]
        try:
            import numpy
            buffers.append(numpy.zeros(len(data) // 8, dtype="<f8"))
        except ImportError:
            pass
        pool = self.c.allocate("sys0", len(data))
        self.c.write(pool, 0, data)
        src = self.c.register_instance(pool, [len(data)], [("b", 1)], "F,x")
        for buf in buffers:
            with self.subTest(kind=type(buf).__name__):
                dst = self.c.register_instance(private_range=self.c.register_private(buf),
                                               bounds=[len(data)], fields=[("b", 1)],
                                               layout="F,x")
                self.c.copy(src, dst)
                self.assertEqual(bytes(memoryview(buf).cast("B")) if not hasattr(buf, "tobytes")
                                 else buf.tobytes(), data)
        # Registered buffers are pinned until the session ends.
        with self.assertRaises(BufferError):
            m.close()
        self.c.close()
        m.close()

    def test_one_session_per_local_client_and_completions_without_waiting(self):
        self.assertEqual(self.c.status().sessions, 1, "the local client opened a second session")
        self.assertTrue(self.c.alive)
        self.assertGreater(self.c.session_id, 0)
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        mine = _fill(aos, BOUNDS)
        src = self.c.register_instance(private_range=self.c.register_private(mine),
                                       bounds=BOUNDS, fields=FIELDS, layout="F,x")
        _, dst, _ = self.pool_instance(self.c, "x,F")
        tid = self.c.copy(src, dst, wait=False)
        self.wait_for(lambda: self.c.completed(tid) is not None, "the completion")
        self.assertEqual(self.c.completed(tid).state, "done")
        self.assertEqual(self.c.wait(tid).id, tid)
        with self.assertRaises(BufferError):
            mine.append(0)  # pinned while registered
        self.c.close()
        self.assertFalse(self.c.alive)
        mine.append(0)
        watcher = self.client("watcher", local=False)
        self.wait_for(lambda: watcher.status().sessions == 1, "the local session to end")

    def test_many_copies_without_waiting_all_complete(self):
        # More than the daemon's 128 concurrent calls per connection.
        mine = bytearray(range(256)) * 16
        src = self.c.register_instance(private_range=self.c.register_private(mine),
                                       bounds=[4096], fields=[("b", 1)], layout="F,x")
        dsts = []
        for _ in range(4):
            a = self.c.allocate("sys0", 4096)
            dsts.append(self.c.register_instance(a, [4096], [("b", 1)], "F,x"))
        tids = [self.c.copy(src, dsts[i % 4], wait=False) for i in range(300)]
        self.assertEqual(self.c.status().sessions, 1)  # not held up by the waits
        self.wait_for(lambda: all(self.c.completed(t) for t in tids), "300 completions", 60)
        self.assertEqual({self.c.completed(t).state for t in tids}, {"done"})
        self.assertEqual(self.c.read(dsts[3].allocation, 0, 4096), bytes(mine))

    def test_close_ends_copies_into_private_memory_before_unpinning(self):
        n = 16 << 20
        mine = bytearray(n)
        dst = self.c.register_instance(private_range=self.c.register_private(mine),
                                       bounds=[n // 8], fields=[("v", 8)], layout="F,x")
        a = self.c.allocate("sys0", n)
        src = self.c.register_instance(a, [n // 8], [("v", 8)], "F,x")
        tids = [self.c.copy(src, dst, wait=False) for _ in range(8)]
        self.c.close()
        mine.extend(b"x")  # unpinned: it may move now
        with open(os.path.join(self.dir, "state", "operator.token")) as f:
            op = isometry.Client(self.socket, name="op", operator_token=f.read().strip())
        self.clients.append(op)
        for t in tids:
            self.assertIn(op.transfer(t).state, ("done", "cancelled", "failed"))

    def test_daemon_shutdown_ends_a_local_session(self):
        self.c.register_private(bytearray(64))
        self.assertEqual(self.daemon.stop(timeout_s=30), 0, self.daemon.log_text())
        self.wait_for(lambda: not self.c.alive, "the client to see the session end")
        err = self.assertFails("UNAVAILABLE", self.c.status)
        self.assertIn("session ended", err.message)
        self.assertFails("UNAVAILABLE", self.c.register_private, bytearray(64))

    def test_a_missing_local_socket_is_a_clear_error(self):
        err = self.assertFails("UNAVAILABLE", isometry.Client, self.socket,
                               local_socket=os.path.join(self.dir, "missing.sock"))
        self.assertIn("local socket", err.message)
        self.assertIn("missing.sock", err.message)


if __name__ == "__main__":
    unittest.main()
