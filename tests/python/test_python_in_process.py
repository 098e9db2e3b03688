"""Private memory moved by the Python process itself on the native path
(issue #55: hop windows, direct and served reads through isometry._native),
against a real isometryd with a cma channel.

A waited copy into or out of a range of the client's own runs its hops in
the client (``native_counters["own_hops_run"]``), byte-exact against the
layout reference model and against the same copy moved by the daemon
(``in_process=False``); a copy from a range another process published into
an own range is a direct read (transfer id 0), served by the publisher when
that one is native too; a publisher that dies fails the copy cleanly; a
Python process killed while it runs its own hops leaves the daemon serving
and nothing of its session behind.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's
/usr/bin/python3). Exits 77 (skipped) with the reason when the extension
was not built (no pybind11).
"""

import os
import signal
import sys
import time
import unittest

import test_python_client as ref  # the layout reference model; its tests are not collected
from test_python_client import FIELDS, ISOMETRYD, SKIP_REASON, RefLayout, _fill
from test_python_private import CONFIG, Peer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from native_case import NativeCase  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
else:
    isometry = None

BOUNDS = [(0, 1000)]
LAYOUTS = ("F,x", "x,F", "x_in=8,F,x_out")

# A Python process that copies its own 8 MiB AOS into its own SOA, its hops
# run in it, until it is killed: argv GRPC_SOCKET LOCAL_SOCKET.
OWN_HOPS_COPIER = r"""
import sys
import isometry
c = isometry.Client(sys.argv[1], name="doomed", local_socket=sys.argv[2], native=True)
n = 8 << 20
a, b = bytearray(n), bytearray(n)
insts = [c.register_instance(private_range=c.register_private(buf), bounds=[n // 16],
                             fields=[("a", 8), ("b", 8)], layout=layout)
         for buf, layout in ((a, "F,x"), (b, "x,F"))]
c.copy(insts[0], insts[1])
print("copying", c.native_counters["own_hops_run"] > 0, flush=True)
while True:
    c.copy(insts[0], insts[1])
"""


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class InProcessTest(NativeCase):
    """Each test gets its own daemon (with a cma channel); self.c is a
    native client that moves its private memory itself, self.g a gRPC one
    (native_case.py)."""

    CONFIG = CONFIG
    PREFIX = "isometry-pyinproc-"
    isometry = isometry
    import_error = ref._IMPORT_ERROR

    def private(self, c, layout, data=None, filler=0xEE):
        """A bytearray of this process registered on `c`, holding `data`
        (else `filler` bytes), and the instance in `layout` over it."""
        r = RefLayout(layout, BOUNDS, FIELDS)
        buf = bytearray(data) if data is not None else bytearray([filler]) * r.total
        inst = c.register_instance(private_range=c.register_private(buf), bounds=BOUNDS,
                                   fields=FIELDS, layout=layout)
        return buf, inst, r

    def pool(self, c, layout, filler=0xEE):
        r = RefLayout(layout, BOUNDS, FIELDS)
        a = c.allocate("sys0", r.total)
        c.write(a, 0, bytes([filler]) * r.total)
        return a, c.register_instance(a, BOUNDS, FIELDS, layout), r

    # ---- tests ----

    def test_copies_touching_own_ranges_run_here_byte_for_byte(self):
        here = self.c
        daemon_moved = self.client("cma", in_process=False)
        for c, runs_here in ((here, True), (daemon_moved, False)):
            for src_layout in LAYOUTS:
                for dst_layout in LAYOUTS:
                    with self.subTest(in_process=runs_here, src=src_layout, dst=dst_layout):
                        src_ref = RefLayout(src_layout, BOUNDS, FIELDS)
                        _, src, _ = self.private(c, src_layout, data=_fill(src_ref, BOUNDS))
                        # Own range -> own range, own range -> pool: a
                        # layout change goes through a buffer in the hop
                        # window, and the hop between it and the own range
                        # runs here; a copy of one layout, and pool -> own
                        # range, may be one hop the daemon runs (cma, a
                        # call for the whole contiguous run).
                        mine, dst, dst_ref = self.private(c, dst_layout)
                        expected = _fill(dst_ref, BOUNDS, filler=0xEE)
                        da, pooled, _ = self.pool(c, dst_layout)
                        for into, check in ((dst, lambda: mine),
                                            (pooled, lambda: c.read(da, 0, dst_ref.total))):
                            before = c.native_counters["own_hops_run"]
                            info = c.copy(src, into)
                            self.assertEqual(info.state, "done")
                            self.assertGreater(info.id, 0)
                            self.assertEqual(bytes(check()), bytes(expected))
                            ran = c.native_counters["own_hops_run"] - before
                            if runs_here and src_layout != dst_layout:
                                self.assertGreaterEqual(ran, 1, "no hop ran in this process")
                            elif not runs_here:
                                self.assertEqual(ran, 0, "in_process=False ran hops here")
                        back, again, _ = self.private(c, dst_layout)
                        c.copy(pooled, again)
                        self.assertEqual(back, expected)
                        c.free(da)
        self.assertEqual(self.g.native_counters["own_hops_run"], 0)

    def publisher(self, native):
        """Another process with a published range holding an AOS: the
        process (test_python_private.Peer) and self.c's instance over it."""
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        peer = Peer(self, aos.total, native=native)
        peer.set(_fill(aos, BOUNDS))
        return peer, self.c.register_instance(private_range=peer.range, bounds=BOUNDS,
                                              fields=FIELDS, layout="F,x")

    def test_a_published_range_is_read_directly_and_served_by_a_native_publisher(self):
        for native_peer in (False, True):
            with self.subTest(native_publisher=native_peer):
                peer, theirs = self.publisher(native_peer)
                before = self.c.native_counters
                mine, ours, soa = self.private(self.c, "x,F")
                info = self.c.copy(theirs, ours)
                self.assertEqual((info.id, info.state), (0, "done"), "not a direct read")
                self.assertEqual(mine, _fill(soa, BOUNDS, filler=0xEE))
                after = self.c.native_counters
                self.assertEqual(after["direct_reads_run"], before["direct_reads_run"] + 1)
                self.assertEqual(after["served_reads_run"],
                                 before["served_reads_run"] + (1 if native_peer else 0))
                # Into a pool the daemon still moves it (a transfer of its own).
                da, pooled, _ = self.pool(self.c, "x,F")
                self.assertGreater(self.c.copy(theirs, pooled).id, 0)
                self.assertEqual(self.c.read(da, 0, soa.total), bytes(mine))
                # Nor does a client with in_process=False read directly.
                cma = self.client(f"cma-{native_peer}", in_process=False)
                theirs_too = cma.register_instance(private_range=peer.range, bounds=BOUNDS,
                                                   fields=FIELDS, layout="F,x")
                other, into, _ = self.private(cma, "x,F")
                self.assertGreater(cma.copy(theirs_too, into).id, 0)
                self.assertEqual(other, mine)
                self.assertEqual(cma.native_counters["direct_reads_run"], 0)

    def test_a_publisher_that_dies_fails_the_direct_read_cleanly(self):
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        for native_peer in (False, True):
            with self.subTest(native_publisher=native_peer):
                peer, theirs = self.publisher(native_peer)
                mine, ours, soa = self.private(self.c, "x,F")
                self.assertEqual(self.c.copy(theirs, ours).id, 0)
                peer.proc.send_signal(signal.SIGKILL)
                peer.proc.wait()
                mine[:] = b"\xee" * len(mine)

                def refused():
                    try:
                        self.c.copy(theirs, ours)
                    except IsometryError as e:
                        return e
                    return None
                deadline = time.monotonic() + 10
                while (err := refused()) is None:
                    self.assertLess(time.monotonic(), deadline, "copies from a dead process "
                                    "still succeed")
                    time.sleep(0.05)
                self.assertIn(err.code, ("NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION"),
                              err.message)
                self.assertEqual(mine, b"\xee" * len(mine), "a failed read wrote")
                # This client and the daemon carry on.
                _, src, _ = self.private(self.c, "F,x", data=_fill(aos, BOUNDS))
                self.assertEqual(self.c.copy(src, ours).state, "done")
                self.assertEqual(mine, _fill(soa, BOUNDS, filler=0xEE))
                self.assertTrue(self.daemon.alive())

    def test_a_python_process_killed_while_running_its_hops_leaves_nothing_behind(self):
        base = self.kill_while_copying(OWN_HOPS_COPIER, "copying True")
        self.wait_for(lambda: self.g.status().sessions == base.sessions,
                      "the daemon to end the killed session")
        self.wait_for(lambda: self.g.status().instances == base.instances,
                      "the daemon to drop the killed session's instances")
        self.assertTrue(self.daemon.alive())
        # And serves on: this client's own hops, and a pool copy over gRPC.
        aos = RefLayout("F,x", BOUNDS, FIELDS)
        _, src, _ = self.private(self.c, "F,x", data=_fill(aos, BOUNDS))
        mine, dst, soa = self.private(self.c, "x,F")
        before = self.c.native_counters["own_hops_run"]
        self.c.copy(src, dst)
        self.assertEqual(mine, _fill(soa, BOUNDS, filler=0xEE))
        self.assertGreater(self.c.native_counters["own_hops_run"], before)
        a, pa, _ = self.pool(self.g, "F,x")
        b, pb_, _ = self.pool(self.g, "x,F")
        self.assertEqual(self.g.copy(pa, pb_).state, "done")


if __name__ == "__main__":
    unittest.main()
