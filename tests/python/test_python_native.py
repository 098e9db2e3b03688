"""The Python client's native path (issue #55): ``isometry._native``, the C++
client under :class:`isometry.Client`, against a real isometryd.

Copies through the shared-memory rings are byte-exact against the same
copies over gRPC and the layout reference model; a NumPy view of a mapped
allocation sees what a copy wrote without a read; failures raise the
IsometryError codes the gRPC path raises; a Python process killed mid-copy
leaves the daemon serving and its allocations freed; torch views an
allocation through DLPack (skipped, 77, without python3-torch).

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's
/usr/bin/python3). Exits 77 (skipped) with the reason when the extension
was not built (no pybind11) or, for the NumPy case, NumPy is missing.
"""

import ctypes
import os
import sys
import threading
import unittest

import test_python_client as ref  # the layout reference model; its tests are not collected
from test_python_client import FIELDS, ISOMETRYD, SKIP_REASON, RefLayout, _fill

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY  # noqa: E402
from native_case import NativeCase  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
else:
    isometry = None

try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
    import torch.utils.dlpack
except ImportError:
    torch = None

CONFIG = ONE_SYS_MEMORY + "threads = 2\n"  # memcpy0's threads

# A Python process that copies 12 MiB AOS -> SOA through the rings until
# it is killed: argv GRPC_SOCKET LOCAL_SOCKET.
COPIER = r"""
import sys
import isometry
c = isometry.Client(sys.argv[1], name="doomed", local_socket=sys.argv[2], native=True)
n = 12 << 20
insts = []
for layout in ("F,x", "x,F"):
    a = c.allocate("sys0", n)
    insts.append(c.register_instance(a, [n // 16], [("a", 8), ("b", 8)], layout))
print("copying", flush=True)
while True:
    c.copy(insts[0], insts[1])
"""


class CallLog:
    """Records the gRPC methods a client calls (its _call), to prove which
    calls took the rings instead."""

    def __init__(self, client):
        self.methods = []
        inner = client._call

        def call(method, *args, **kwargs):
            self.methods.append(method)
            return inner(method, *args, **kwargs)

        client._call = call


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class NativePathTest(NativeCase):
    """Each test gets its own daemon; self.c is a native client, self.g a
    gRPC one (native_case.py)."""

    CONFIG = CONFIG
    PREFIX = "isometry-pynative-"
    isometry = isometry
    import_error = ref._IMPORT_ERROR

    def copy_on(self, c, bounds, src_layout, dst_layout):
        """src_layout -> dst_layout on client c; the destination's bytes."""
        src_ref = RefLayout(src_layout, bounds, FIELDS)
        dst_ref = RefLayout(dst_layout, bounds, FIELDS)
        sa = c.allocate("sys0", src_ref.total)
        da = c.allocate("sys0", dst_ref.total)
        c.write(sa, 0, _fill(src_ref, bounds))
        c.write(da, 0, b"\xee" * dst_ref.total)
        si = c.register_instance(sa, bounds, FIELDS, src_layout)
        di = c.register_instance(da, bounds, FIELDS, dst_layout)
        info = c.copy(si, di)
        self.assertEqual(info.state, "done", info)
        self.assertGreater(info.id, 0)
        out = c.read(da, 0, dst_ref.total)
        self.assertEqual(out, bytes(_fill(dst_ref, bounds, filler=0xEE)),
                         f"{src_layout} -> {dst_layout} on the {c.transport} path")
        return out

    # ---- tests ----

    def test_the_completion_wait_spins_as_long_as_asked_and_wakes_without_spinning(self):
        # spin_us=0: every waited copy sleeps on the completion eventfd at
        # once, so each completion comes through the daemon's wake-up; a
        # busy-poll client (spin_us=100000) looks at the ring throughout.
        bounds = [(0, 256)]
        for spin_us in (0, 100000):
            c = self.client(f"spin{spin_us}", spin_us=spin_us)
            self.assertEqual(c.transport, "native")
            for _ in range(50):
                self.copy_on(c, bounds, "F,x", "x,F")
        for bad in (-1, 2**32, 1.5, True):
            with self.subTest(spin_us=bad), self.assertRaises(ValueError):
                self.isometry.Client(self.socket, local_socket=self.local, native=True,
                                     spin_us=bad)

    def test_copies_through_the_rings_match_grpc_byte_for_byte(self):
        self.assertEqual((self.c.transport, self.g.transport), ("native", "grpc"))
        self.assertTrue(self.c.alive)
        self.assertGreater(self.c.session_id, 0)
        calls = CallLog(self.c)
        cases = [([(0, 2000)], "F,x", "x,F"), ([(-3, 37), (10, 35)], "y,x,F", "F,x,y"),
                 ([(0, 100), (0, 7)], "x_in=8,F,y,x_out", "F,y,x")]
        for bounds, src, dst in cases:
            native = self.copy_on(self.c, bounds, src, dst)
            self.assertEqual(native, self.copy_on(self.g, bounds, src, dst))
        # Allocate, register, copy and read took the native session; only
        # the writes (which the daemon must see) went over gRPC.
        self.assertEqual(set(calls.methods), {"Write"}, calls.methods)
        # What the native path does not cover goes over gRPC on the same
        # session, with the same instances: a copy of a box.
        r = RefLayout("F,x", [(0, 64)], FIELDS)
        a, b = self.c.allocate("sys0", r.total), self.c.allocate("sys0", r.total)
        self.c.write(a, 0, _fill(r, [(0, 64)]))
        ia = self.c.register_instance(a, [64], FIELDS, "F,x")
        ib = self.c.register_instance(b, [64], FIELDS, "F,x")
        info = self.c.copy(ia, ib, box=[(0, 64)])
        self.assertIn("Copy", calls.methods)
        self.assertEqual(info.state, "done")
        self.assertEqual(self.c.read(b, 0, r.total), bytes(_fill(r, [(0, 64)])))
        self.assertEqual(self.c.transfer(info.id).state, "done")
        # isometry.connect picks the native path where it is built.
        with isometry.connect(self.socket, local_socket=self.local) as auto:
            self.assertEqual(auto.transport, "native")
        with isometry.connect(self.socket, local_socket=None) as plain:
            self.assertEqual(plain.transport, "grpc")
        with self.assertRaises(ValueError):
            isometry.Client(self.socket, native=True)

    def test_numpy_view_sees_what_a_copy_wrote_without_a_read(self):
        if numpy is None:
            self.skipTest("NumPy is not installed (python3-numpy)")
        n = 1 << 20
        src, dst = self.c.allocate("sys0", n), self.c.allocate("sys0", n)
        self.assertIsNone(self.g.allocate("sys0", 16).buffer, "a gRPC allocation is not mapped")
        s = numpy.frombuffer(src.buffer, dtype=numpy.uint32)
        d = numpy.frombuffer(dst.buffer, dtype=numpy.uint32)
        self.assertEqual((s.size, d.size, s.flags.writeable), (n // 4, n // 4, True))
        s[:] = numpy.arange(n // 4, dtype=numpy.uint32) * 2654435761  # stores, no Write call
        si = self.c.register_instance(src, [n // 4], [("v", 4)], "F,x")
        di = self.c.register_instance(dst, [n // 4], [("v", 4)], "F,x")
        calls = CallLog(self.c)
        self.assertEqual(self.c.copy(si, di).state, "done")
        self.assertTrue(numpy.array_equal(d, s), "the view did not see the copy")
        self.assertEqual(calls.methods, [], "the copy or the view went over gRPC")
        # DLPack and memoryview: the same memory, no copy either.
        t = numpy.from_dlpack(dst)
        self.assertEqual((t.dtype, t.size), (numpy.dtype(numpy.uint8), n))
        self.assertEqual(t.__array_interface__["data"][0], d.__array_interface__["data"][0])
        self.assertEqual(dst.__dlpack_device__(), (1, 0))
        with memoryview(dst.buffer) as m:
            self.assertEqual(bytes(m[4:8]), (2654435761 % 2**32).to_bytes(4, "little"))
        # A view pins the mapping: free refuses until the views are gone.
        self.assertEqual(dst.buffer.views, 2)
        with self.assertRaises(BufferError):
            self.c.free(dst)
        del t, d
        self.assertEqual(dst.buffer.views, 0)
        self.c.free(dst)
        self.assertTrue(dst.buffer.freed)
        with self.assertRaises(BufferError):
            memoryview(dst.buffer)
        with self.assertRaises(BufferError):
            self.g.allocate("sys0", 16).__dlpack__()
        # The session's end leaves the view valid (this process's mapping).
        del s
        view = numpy.frombuffer(src.buffer, dtype=numpy.uint32)
        self.c.close()
        self.assertEqual(int(view[3]), (3 * 2654435761) % 2**32)

    def test_torch_views_an_allocation_through_dlpack(self):
        # Debian's python3-torch consumes the allocation's DLPack capsule:
        # a tensor over the mapping itself, which sees what copies write
        # and whose stores the copies read, and which pins the mapping.
        if torch is None:
            self.skipTest("torch is not installed (python3-torch)")
        n = 1 << 20
        src, dst = self.c.allocate("sys0", n), self.c.allocate("sys0", n)
        s = torch.from_dlpack(src)
        d = torch.from_dlpack(dst)
        self.assertEqual((s.dtype, s.numel(), s.device.type), (torch.uint8, n, "cpu"))
        with memoryview(src.buffer) as m:  # the mapping's address, as the buffer protocol gives it
            address = ctypes.addressof(ctypes.c_char.from_buffer(m))
            self.assertEqual(s.data_ptr(), address, "torch copied the allocation")
        s.view(torch.int32)[:] = torch.arange(n // 4, dtype=torch.int32) * 7  # stores, no Write
        si = self.c.register_instance(src, [n // 4], [("v", 4)], "F,x")
        di = self.c.register_instance(dst, [n // 4], [("v", 4)], "F,x")
        self.assertEqual(self.c.copy(si, di).state, "done")
        self.assertTrue(torch.equal(d, s), "the tensor did not see the copy")
        # Round trip: torch hands the same memory on as a capsule of its own.
        again = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(d))
        self.assertEqual(again.data_ptr(), d.data_ptr())
        self.assertEqual(int(again.view(torch.int32)[5]), 35)
        # The tensors pin the mapping until torch lets them go.
        with self.assertRaises(BufferError):
            self.c.free(dst)
        del d, again
        self.assertEqual(dst.buffer.views, 0)
        self.c.free(dst)
        self.assertTrue(dst.buffer.freed)
        with self.assertRaises(BufferError):
            torch.from_dlpack(dst)
        # A gRPC allocation is not mapped here: nothing to view.
        with self.assertRaises(BufferError):
            torch.from_dlpack(self.g.allocate("sys0", 16))
        del s
        self.c.free(src)

    def test_failures_raise_the_codes_the_grpc_path_raises(self):
        def both(fn):
            codes = []
            for c in (self.c, self.g):
                with self.assertRaises(IsometryError) as cm:
                    fn(c)
                codes.append(cm.exception.code)
            self.assertEqual(codes[0], codes[1], f"native vs gRPC for {fn}")
            return codes[0]

        self.assertEqual(both(lambda c: c.allocate("nope0", 4096)), "NOT_FOUND")
        self.assertEqual(both(lambda c: c.allocate("sys0", 1 << 30)), "RESOURCE_EXHAUSTED")
        self.assertEqual(both(lambda c: c.register_instance(
            c.allocate("sys0", 64), [100], FIELDS, "F,x")), "OUT_OF_RANGE")
        self.assertEqual(both(lambda c: c.register_instance(
            c.allocate("sys0", 4096), [10], FIELDS, "F,x,q")), "INVALID_ARGUMENT")
        self.assertEqual(both(lambda c: c.read(c.allocate("sys0", 64), 60, 8)), "OUT_OF_RANGE")

        def overlap(c):
            a = c.allocate("sys0", 4096)
            i = c.register_instance(a, [64], FIELDS, "F,x")
            c.copy(i, i)
        self.assertEqual(both(overlap), "INVALID_ARGUMENT")
        # Unregistered and freed handles, and a closed client.
        a = self.c.allocate("sys0", 4096)
        i = self.c.register_instance(a, [16], FIELDS, "F,x")
        self.c.unregister_instance(i)
        self.assertFails("NOT_FOUND", self.c.copy, i, i)  # by id, over gRPC
        self.c.free(a)
        self.assertFails("NOT_FOUND", self.c.read, a, 0, 8)
        self.c.close()
        self.assertFalse(self.c.alive)
        self.assertFails("FAILED_PRECONDITION", self.c.allocate, "sys0", 4096)

    def test_threads_share_one_native_client(self):
        # Copies wait with the GIL released: four threads copy through one
        # client at once, each its own pair, every result byte-exact.
        bounds = [(0, 3000)]
        aos, soa = RefLayout("F,x", bounds, FIELDS), RefLayout("x,F", bounds, FIELDS)
        pairs = []
        for _ in range(4):
            a, b = self.c.allocate("sys0", aos.total), self.c.allocate("sys0", soa.total)
            self.c.write(a, 0, _fill(aos, bounds))
            pairs.append((self.c.register_instance(a, bounds, FIELDS, "F,x"),
                          self.c.register_instance(b, bounds, FIELDS, "x,F"), b))
        errors = []

        def copier(src, dst):
            try:
                for _ in range(50):
                    self.assertEqual(self.c.copy(src, dst).state, "done")
            except Exception as e:  # reported below, from the main thread
                errors.append(e)

        threads = [threading.Thread(target=copier, args=p[:2]) for p in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(errors, [])
        for _, _, b in pairs:
            self.assertEqual(self.c.read(b, 0, soa.total), bytes(_fill(soa, bounds)))

    def test_a_python_process_killed_mid_copy_leaves_nothing_behind(self):
        base_used = {m.name: m.pool_used for m in self.g.memories()}["sys0"]
        base = self.kill_while_copying(COPIER, "copying")
        self.wait_for(lambda: self.g.status().allocations == base.allocations,
                      "the daemon to free the killed session's allocations")
        st = self.g.status()
        self.assertEqual(st.instances, base.instances)
        self.assertEqual(st.sessions, base.sessions)
        # A copy still in flight when the session went holds its allocations
        # until it ends: the pool empties then, not with the allocation list.
        self.wait_for(lambda: {m.name: m.pool_used for m in self.g.memories()}["sys0"] == base_used,
                      "the killed session's pool memory to be returned")
        self.assertTrue(self.daemon.alive())
        # And the daemon still serves: another client copies, both paths.
        self.copy_on(self.c, [(0, 500)], "F,x", "x,F")
        self.copy_on(self.g, [(0, 500)], "F,x", "x,F")


if __name__ == "__main__":
    unittest.main()
