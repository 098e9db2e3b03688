"""A gRPC client that stops reading its Attach stream while its copies go
on, against a real isometryd: the daemon holds at most
daemon.max_attach_backlog_bytes of unread completion events, drops the
rest, counts them to the client when it reads again, and keeps serving
everyone else. The Python client, stalled the same way, still resolves
every future (a Wait call stands in for each dropped event).

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH).
"""

import os
import re
import sys
import threading
import time
import unittest
import urllib.request

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture")
sys.path.insert(0, FIXTURE_DIR)
from attack_case import (ISOMETRYD, SKIP_REASON, SMALL_NODE, note_skip, rss_of,  # noqa: E402
                         start_daemon)
from ports import free_port  # noqa: E402

_IMPORT_ERROR = None
try:
    import grpc

    import isometry
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
except ImportError as e:
    _IMPORT_ERROR = e

note_skip("test_attach_backlog")

BACKLOG = 8192  # daemon.max_attach_backlog_bytes: a few dozen events
DAEMON = dict(log_level="info", shutdown_grace_ms=500, extra=[
    ("max_attach_backlog_bytes", BACKLOG),
])
CONFIG = SMALL_NODE
COPIES = 3000
# A reader's HTTP/2 window takes in events its application has not read:
# kept small and fixed (no BDP growth) so that a few thousand completions
# overflow the daemon's backlog rather than the client's buffers.
SMALL_WINDOW = [("grpc.http2.lookahead_bytes", 16384), ("grpc.http2.bdp_probe", 0)]


if _IMPORT_ERROR is None:
    class SmallWindowClient(isometry.Client):
        """The Python client on a channel with SMALL_WINDOW."""

        def _new_channel(self):
            return grpc.insecure_channel("unix:" + self.socket, options=SMALL_WINDOW)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class AttachBacklogTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package: {_IMPORT_ERROR}")
        self.metrics_port = free_port()
        config = CONFIG + f'\n[metrics]\nlisten = "127.0.0.1:{self.metrics_port}"\n'
        self.dir, self.daemon = start_daemon(self, config, "isometry-backlog-", DAEMON)
        self.socket = os.path.join(self.dir, "grpc.sock")

    def dropped_metric(self):
        """isometry_attach_events_dropped_total as /metrics says it."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        m = re.search(r"^isometry_attach_events_dropped_total (\d+)$", text, re.M)
        self.assertIsNotNone(m, "no isometry_attach_events_dropped_total in /metrics")
        return int(m.group(1))

    def pair(self, call, session):
        """Two 4 KiB instances of `session` (raw gRPC calls)."""
        md = (("isometry-session", session),)
        out = []
        for _ in range(2):
            a = call.Allocate(pb.AllocateRequest(memory="sys0", bytes=4096), metadata=md)
            spec = pb.InstanceSpec(allocation=a.allocation, layout="F,x",
                                   bounds=pb.Box(lo=[0], hi=[512]),
                                   fields=[pb.Field(name="v", size=8)])
            r = call.RegisterInstance(pb.RegisterInstanceRequest(spec=spec), metadata=md)
            out.append(r.instance)
        return out

    def test_an_unread_stream_holds_a_bounded_backlog_and_counts_what_it_dropped(self):
        channel = grpc.insecure_channel("unix:" + self.socket, options=SMALL_WINDOW)
        self.addCleanup(channel.close)
        stub = pb_grpc.IsometryStub(channel)
        stream = stub.Attach(pb.AttachRequest(client_name="never-reads"))
        self.addCleanup(stream.cancel)
        first = next(stream)
        src, dst = self.pair(stub, first.session)
        md = (("isometry-session", first.session),)
        self.assertEqual(self.dropped_metric(), 0)
        rss_before = rss_of(self.daemon.proc.pid)
        ids = set()
        for _ in range(COPIES):
            r = stub.Copy(pb.CopyRequest(src_instance=src, dst_instance=dst, wait=False),
                          metadata=md)
            ids.add(r.transfer)
        # Every copy ended (each is a 4 KiB memcpy); the attacker has still
        # read nothing but its token.
        last = stub.Wait(pb.WaitRequest(transfer=max(ids)), metadata=md)
        self.assertEqual(last.state, "done")
        log = self.daemon.log_text(tail=None)
        self.assertIn("(client 'never-reads'): its client does not read its Attach stream", log)
        self.assertIn("daemon.max_attach_backlog_bytes = 8192", log)
        self.assertEqual(log.count("does not read its Attach stream"), 1, "logged once per session")
        # What it held is bounded: far less than one event per copy. Under
        # AddressSanitizer freed memory sits in its quarantine (up to 256
        # MiB), so RSS says nothing there; the counts below still do.
        grown = rss_of(self.daemon.proc.pid) - rss_before
        with open(f"/proc/{self.daemon.proc.pid}/maps") as f:
            sanitized = "libasan" in f.read()
        if not sanitized:
            self.assertLess(grown, 64 << 20, f"the daemon grew by {grown} bytes")

        # Everyone else is served meanwhile.
        with isometry.Client(self.socket, name="bystander") as c:
            a = c.allocate("sys0", 4096)
            self.assertEqual(a.nbytes, 4096)

        # Reading again: every completion is either delivered or counted.
        delivered, dropped = set(), 0
        done = threading.Event()

        def read():
            nonlocal dropped
            for e in stream:
                if e.HasField("completed"):
                    delivered.add(e.completed.id)
                dropped += e.dropped_completions
                if len(delivered) + dropped >= COPIES:
                    done.set()
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        self.assertTrue(done.wait(30), f"{len(delivered)} delivered + {dropped} dropped "
                        f"of {COPIES} completions after 30 s")
        self.assertEqual(len(delivered) + dropped, COPIES)
        self.assertTrue(delivered <= ids)
        self.assertGreater(dropped, 0)
        self.assertLess(len(delivered), COPIES // 2, "the backlog was not bounded")
        self.assertEqual(self.dropped_metric(), dropped)

        # A dropped completion is still there for Wait and GetTransfer.
        lost = sorted(ids - delivered)
        info = stub.Wait(pb.WaitRequest(transfer=lost[0]), metadata=md)
        self.assertEqual((info.id, info.state), (lost[0], "done"))

        # The stream keeps going: the next completion arrives as an event.
        later = threading.Event()
        got = []

        def read_one():
            for e in stream:
                if e.HasField("completed"):
                    got.append(e.completed.id)
                    later.set()
                    return

        t = threading.Thread(target=read_one, daemon=True)
        t.start()
        r = stub.Copy(pb.CopyRequest(src_instance=src, dst_instance=dst, wait=False), metadata=md)
        self.assertTrue(later.wait(10), "no event after the stream was read again")
        self.assertEqual(got, [r.transfer])

    def test_a_stalled_python_client_still_resolves_every_future(self):
        with SmallWindowClient(self.socket, name="stalls") as c:
            self.assertEqual(c.transport, "grpc")
            src = c.register_instance(c.allocate("sys0", 4096), [512], [("v", 8)], "F,x")
            dst = c.register_instance(c.allocate("sys0", 4096), [512], [("v", 8)], "F,x")
            # The thread reading the Attach stream stops at the next event
            # until `go` is set, as a client busy elsewhere would.
            go = threading.Event()
            settle = c._settle_futures

            def stalled_settle():
                go.wait(60)
                settle()

            c._settle_futures = stalled_settle
            futures = [c.copy_future(src, dst) for _ in range(COPIES)]
            deadline = time.monotonic() + 20
            while "does not read its Attach stream" not in self.daemon.log_text(tail=None):
                self.assertLess(time.monotonic(), deadline, "the daemon never dropped an event")
                time.sleep(0.05)
            go.set()
            for f in futures:
                self.assertEqual(f.result(timeout=30).state, "done")


if __name__ == "__main__":
    unittest.main()
