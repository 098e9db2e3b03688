"""Issue #50 item 2: the default watch handler (HANDLER_CLIENT) served to a
gRPC-only client. ReadAccessLog drains the log's ring in the daemon and
streams it, so a watched allocation written far more often than its ring
holds never holds its writers; one reader per log; cancelling frees it; a
reader the session cannot be is refused (INVALID_ARGUMENT for a local
socket watch that would map a ring the stream reads). Against a real
isometryd, from the public API; run like test_python_client (ISOMETRYD,
ISOMETRY_PYTHONPATH; Debian's /usr/bin/python3).
"""

import os
import shutil
import struct
import sys
import threading
import time
import unittest

import test_python_client as ref  # its tests are not collected here
from test_python_client import ISOMETRYD, SKIP_REASON

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb

CONFIG = """
[[memory]]
name = "sys0"
kind = "SYS"
pool = "64MiB"
client_quota = "32MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
"""

PAGE = 4096
RING = 4096  # the smallest ring: about six 512-byte entries
BLOCK_MS = 3000  # a writer held by a full log fails after this
WRITES = 400  # entries: ~60 rings' worth
PIECE = 512


def payload(i):
    return struct.pack("<I", i) * (PIECE // 4)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class AccessLogStreamTest(unittest.TestCase):
    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pyals-",
                daemon=dict(log_level="warn", extra=[("access_log_block_ms", str(BLOCK_MS))]))
        except AssertionError as e:
            self.fail(str(e))
        self.clients = []
        self.owner = self.client("owner")
        self.other = self.client("other")
        self.alloc = self.owner.allocate("sys0", 16 * PAGE)
        self.owner.publish(self.alloc)

    def client(self, name, **kw):
        c = isometry.Client(self.daemon.socket, name=name, connect_timeout=10, **kw)
        self.clients.append(c)
        return c

    def tearDown(self):
        for c in reversed(self.clients):
            c.close()
        rc = self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0)

    def collect(self, stream, want, timeout=30.0):
        """Reads `want` entries of `stream` on a thread (the test fails,
        not hangs, when they do not come)."""
        got, errors = [], []

        def run():
            try:
                for e in stream:
                    got.append(e)
                    if len(got) == want:
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, got, errors

    def refused(self, code, fn, *args, **kw):
        with self.assertRaises(IsometryError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        return cm.exception.message

    def test_grpc_session_drains_the_default_handler(self):
        # The proto's default handler: `handler` left unset, as a raw stub
        # user writes it. Another party then writes and copies into the
        # allocation ~60 times what its ring holds.
        self.owner._call("Watch", pb.WatchRequest(allocation=self.alloc.id, offset=0,
                                                  bytes=16 * PAGE, log_bytes=RING))
        info = self.owner.watch_info(self.alloc)
        self.assertEqual(info.regions[0].handler, pb.HANDLER_CLIENT)
        stream = self.owner.read_access_log(self.alloc)
        reader, got, errors = self.collect(stream, WRITES)
        # Every fourth access is a Copy from the other party's own memory.
        mine = self.other.allocate("sys0", PIECE)
        src = self.other.register_instance(mine, bounds=[PIECE], fields=[("b", 1)], layout="F,x")
        dst = {}
        slowest = 0.0
        for i in range(WRITES):
            at = (i * PIECE) % (16 * PAGE)
            if i % 4 == 3:
                self.other.write(mine, 0, payload(i))
                if at not in dst:
                    dst[at] = self.other.register_instance(
                        self.alloc, bounds=[PIECE], fields=[("b", 1)], layout="F,x", offset=at)
            start = time.monotonic()
            if i % 4 == 3:
                self.other.copy(src, dst[at])
            else:
                self.other.write(self.alloc, at, payload(i))
            slowest = max(slowest, time.monotonic() - start)
        # Held writers would wait BLOCK_MS and fail; these never wait for long.
        self.assertLess(slowest, BLOCK_MS / 3000.0, "a write waited for the log")
        self.other.active_flush(self.alloc, timeout_ms=10000)
        reader.join(30)
        self.assertFalse(reader.is_alive(), f"{len(got)} of {WRITES} entries came")
        self.assertEqual(errors, [])
        self.assertEqual([e.seq for e in got], list(range(1, WRITES + 1)))
        for i, e in enumerate(got):
            self.assertEqual(e.op, pb.ACCESS_PUT)
            self.assertTrue(e.applied and e.has_data)
            self.assertEqual((e.offset, e.size), ((i * PIECE) % (16 * PAGE), PIECE))
            self.assertEqual(e.source_session, self.other.session_id)
            self.assertEqual(e.transfer != 0, i % 4 == 3, f"entry {e.seq}: a copy has its transfer")
            self.assertEqual(e.data, payload(i), f"entry {e.seq}")
        info = self.owner.watch_info(self.alloc)
        self.assertEqual(info.entries, WRITES)
        self.assertEqual(info.log_acknowledged, info.log_published)
        stream.cancel()

    def test_one_reader_and_cancel_frees_it(self):
        self.owner.watch(self.alloc, 0, 16 * PAGE, handler="client", log_bytes=RING)
        self.refused("PERMISSION_DENIED", self.other.read_access_log, self.alloc)
        first = self.owner.read_access_log(self.alloc)
        msg = self.refused("ALREADY_EXISTS", self.owner.read_access_log, self.alloc)
        self.assertIn("one reader per log", msg)
        self.other.write(self.alloc, 0, payload(1))
        self.assertEqual(next(first).seq, 1)
        self.owner.active_flush(self.alloc, timeout_ms=5000)  # entry 1 acknowledged
        first.cancel()
        self.assertEqual(list(first), [])
        # The daemon frees the slot when it sees the cancel.
        deadline = time.monotonic() + 5
        while True:
            try:
                second = self.owner.read_access_log(self.alloc)
                break
            except IsometryError as e:
                if e.code != "ALREADY_EXISTS" or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.other.write(self.alloc, PAGE, payload(2))
        e = next(second)
        self.assertEqual((e.seq, e.offset, e.data), (2, PAGE, payload(2)))
        second.cancel()

    def test_stream_ends_when_the_watch_ends(self):
        region = self.owner.watch(self.alloc, 0, 16 * PAGE, handler="client", log_bytes=RING)
        stream = self.owner.read_access_log(self.alloc)
        for i in range(20):
            self.other.write(self.alloc, i * PIECE, payload(i))
        self.owner.unwatch(self.alloc, region)
        reader, got, errors = self.collect(stream, None)
        reader.join(15)
        self.assertFalse(reader.is_alive(), "the stream did not end with the watch")
        self.assertEqual(errors, [])
        self.assertEqual([e.seq for e in got], list(range(1, 21)))
        self.refused("NOT_FOUND", self.owner.read_access_log, self.alloc)

    def test_a_reader_the_session_cannot_be_is_refused(self):
        local = self.client("local", local_socket=os.path.join(self.dir, "local.sock"))
        a = local.allocate("sys0", 4 * PAGE)
        local.watch(a, 0, PAGE, handler="client", log_bytes=RING)
        stream = local.read_access_log(a)
        # Over the local socket, handler client means the client maps the
        # ring and reads it: not beside the stream.
        msg = self.refused("INVALID_ARGUMENT", local._local.request,
                           watch=pb.WatchRequest(allocation=a.id, offset=PAGE, bytes=PAGE))
        self.assertIn("ReadAccessLog stream reads it", msg)
        # A built-in handler needs no ring: watched, no ring handed out.
        local._local.request(watch=pb.WatchRequest(allocation=a.id, offset=2 * PAGE, bytes=PAGE,
                                                   handler=pb.HANDLER_COUNT))
        self.assertEqual(len(local.watch_info(a).regions), 2)
        stream.cancel()
        # A ring handed to the local client is read there, never by the daemon.
        b = local.allocate("sys0", 4 * PAGE)
        local._local.request(watch=pb.WatchRequest(allocation=b.id, offset=0, bytes=PAGE,
                                                   log_bytes=RING))
        msg = self.refused("FAILED_PRECONDITION", local.read_access_log, b)
        self.assertIn("local-socket client", msg)


if __name__ == "__main__":
    unittest.main()
