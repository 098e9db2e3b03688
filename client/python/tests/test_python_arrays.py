"""Instances from NumPy arrays (Client.register_array, isometry/arrays.py)
against a real isometryd: C order, Fortran order, transposes and strided
views copied into each other through the daemon and compared with what
NumPy's own assignment gives; the strides that cannot be expressed refused
naming the axis and the stride.

The mapped allocations need the native path (test_native_views skips, 77,
where the extension is not built); private ranges (a pure-Python local
session, CMA) run everywhere.

Run by ctest (python_arrays) with ISOMETRYD and ISOMETRY_PYTHONPATH set.
"""

import os
import pickle
import shutil
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

import numpy as np  # noqa: E402

import isometry  # noqa: E402
from isometry.arrays import StrideError, describe_array  # noqa: E402

CONFIG = ONE_SYS_MEMORY + """
[[channel]]
name = "cma0"
kind = "cma"
"""


class DescribeTest(unittest.TestCase):
    """What an array becomes, without a daemon."""

    def test_dense_orders_are_layouts(self):
        a = np.zeros((4, 6, 3), np.float32)
        self.assertEqual(describe_array(a).layout, "F,z,y,x")
        self.assertEqual(describe_array(np.asfortranarray(a)).layout, "F,x,y,z")
        self.assertEqual(describe_array(a.transpose(1, 2, 0)).layout, "F,y,x,z")
        self.assertEqual(describe_array(a).bounds, [4, 6, 3])
        self.assertEqual(describe_array(a).fields, [("v", 4)])
        self.assertEqual(describe_array(np.zeros(5, "<i4,<f8")).fields, [("f0", 4), ("f1", 8)])
        self.assertEqual(describe_array(np.zeros(5, "<i4,<f8"), field="r").fields, [("r", 12)])
        self.assertEqual(describe_array(a[2:3]).layout, "F,z,y,x")  # dense: one x
        self.assertIsNotNone(describe_array(a[:, 2:3, :]).datatype)  # gaps between the x

    def test_gaps_are_datatypes(self):
        a = np.zeros((8, 6), np.float64)
        for view in (a[::2], a[:, 1:5], a[::2].T, a[:, 3]):
            d = describe_array(view)
            self.assertEqual(d.layout, "", view.strides)
            self.assertIsNotNone(d.datatype)

    def test_inexpressible_strides_name_the_stride(self):
        a = np.zeros((4, 6), np.float64)
        with self.assertRaises(StrideError) as e:
            describe_array(a[:, ::-1])
        self.assertEqual((e.exception.axis, e.exception.stride), (1, -8))
        self.assertIn("axis 1, stride -8 bytes", str(e.exception))
        self.assertIn("negative", e.exception.message)
        with self.assertRaises(isometry.InvalidArgument) as e2:  # also a ValueError
            describe_array(np.broadcast_to(a[:1], (4, 6)))
        self.assertIsInstance(e2.exception, ValueError)
        self.assertEqual(e2.exception.code, "INVALID_ARGUMENT")
        self.assertIn("axis 0, stride 0 bytes", str(e2.exception))
        overlapping = np.lib.stride_tricks.as_strided(a, (4, 6), (16, 8))
        with self.assertRaisesRegex(StrideError, "axis 0, stride 16 bytes: elements overlap"):
            describe_array(overlapping)
        back = pickle.loads(pickle.dumps(e.exception))
        self.assertEqual((type(back), back.axis, back.message), (StrideError, 1, e.exception.message))
        with self.assertRaisesRegex(ValueError, "starts at byte 8, not 4"):
            describe_array(np.zeros(3, np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"],
                                                 "offsets": [0, 8]})))
        with self.assertRaisesRegex(ValueError, "1 to 4 dimensions"):
            describe_array(np.zeros((1, 1, 1, 1, 2)))


@unittest.skipUnless(ISOMETRYD, "ISOMETRYD is not set")
class ArraysTest(unittest.TestCase):
    def setUp(self):
        self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD, CONFIG, "isometry-arrays-", daemon=dict(log_level="warn"))
        self.local = os.path.join(self.dir, "local.sock")

    def tearDown(self):
        self.daemon.stop()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, native):
        c = isometry.Client(self.daemon.socket, name="arrays", local_socket=self.local,
                            native=native)
        self.addCleanup(c.close)
        return c

    def check(self, c, src_where, src, dst_where, dst, **kw):
        """Copies src into dst through the daemon: dst then equals src, as
        NumPy's dst[...] = src makes it."""
        expect = np.array(src)
        dst[...] = -1
        info = c.copy(c.register_array(src_where, src), c.register_array(dst_where, dst, **kw))
        self.assertEqual(info.state, "done", info.message)
        np.testing.assert_array_equal(dst, expect)

    def test_native_views(self):
        if not isometry.native_available():
            self.skipTest(isometry.native_unavailable_reason())
        c = self.client(True)
        n0, n1 = 48, 40
        a, b = c.allocate("sys0", 8 * n0 * n1), c.allocate("sys0", 8 * n0 * n1)
        x = np.frombuffer(a.buffer, np.float64).reshape(n0, n1)        # C order
        x[...] = np.random.default_rng(55).random((n0, n1))
        flat = np.frombuffer(b.buffer, np.float64)
        fortran = flat.reshape(n1, n0).T                                 # the same shape, F order
        self.assertTrue(fortran.flags.f_contiguous)
        self.check(c, a, x, b, fortran)                                  # C -> Fortran
        self.check(c, b, fortran, a, x.T.T)                              # and back
        self.check(c, a, x.T, b, flat.reshape(n1, n0))                  # a transpose, materialized
        self.check(c, a, x[::2, 1:33:3], b, flat[:24 * 11].reshape(24, 11))   # strided -> dense
        self.check(c, a, x[:24, :11], b, flat.reshape(n0, n1)[::2, ::3][:, :11])  # dense -> strided
        self.check(c, a, x[::3].T, b, flat.reshape(n1, n0)[:, 5:5 + n0 // 3])  # strided transpose
        # A template at an offset, where the array lies elsewhere.
        c.copy(c.register_array(a, x[1]), c.register_array(b, np.empty(n1), offset=8 * n1))
        np.testing.assert_array_equal(flat[n1:2 * n1], x[1])
        with self.assertRaisesRegex(ValueError, "outside"):
            c.register_array(a, flat)
        with self.assertRaisesRegex(StrideError, "axis 0, stride -320 bytes"):
            c.register_array(a, x[::-1])

    def test_private_ranges(self):
        c = self.client(False)                                           # pure Python, CMA
        mine = np.arange(12 * 10, dtype=np.int32).reshape(12, 10)
        rng = c.register_private(mine)
        dst = c.allocate("sys0", mine.nbytes)
        got = np.empty((6, 10), np.int32)
        out = c.register_array(dst, got, offset=0)                       # gRPC: a template
        info = c.copy(c.register_array(rng, mine[::2]), out)
        self.assertEqual(info.state, "done", info.message)
        got = np.frombuffer(c.read(dst, 0, got.nbytes), np.int32).reshape(6, 10)
        np.testing.assert_array_equal(got, mine[::2])
        fortran = np.asfortranarray(np.zeros((12, 10), np.int32))
        back = c.register_private(fortran.T)                             # the same bytes, C order
        c.copy(c.register_array(rng, mine), c.register_array(back, fortran))
        np.testing.assert_array_equal(fortran, mine)
        with self.assertRaisesRegex(ValueError, "not mapped into this process"):
            c.register_array(dst, got)

    def test_random_views(self):
        """Seeded random arrays of 1 to 4 axes, dtypes of 1 to 12 bytes,
        each end a random transpose of a random strided slice of its own
        buffer: the daemon's copy equals NumPy's assignment, and no byte
        of the destination's buffer outside the view changes."""
        rng = np.random.default_rng(5555)
        c = self.client(False)                                           # runs everywhere (CMA)
        nbytes = 1 << 20
        src_buf, dst_buf = np.zeros(nbytes, np.uint8), np.zeros(nbytes, np.uint8)
        src_range, dst_range = c.register_private(src_buf), c.register_private(dst_buf)
        dtypes = [np.uint8, np.int16, np.float32, np.float64, np.dtype("<i4,<f8")]

        def view_of(buf, shape, dtype):
            """A random transpose of a random strided slice of `buf` with that shape."""
            steps = [int(rng.integers(1, 4)) for _ in shape]
            starts = [int(rng.integers(0, 3)) for _ in shape]
            full = [st + n * t for st, n, t in zip(starts, shape, steps)]
            perm = rng.permutation(len(shape))
            count = int(np.prod(full))
            base = buf[:count * dtype.itemsize].view(dtype).reshape([full[k] for k in perm])
            whole = base.transpose(np.argsort(perm))                     # axis k has full[k]
            return whole[tuple(slice(st, st + n * t, t)
                               for st, n, t in zip(starts, shape, steps))]

        kinds = set()
        for case in range(40):
            dtype = np.dtype(dtypes[case % len(dtypes)])
            shape = [int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 5)))]
            src_buf[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
            dst_buf[:] = 0xA5
            src, dst = view_of(src_buf, shape, dtype), view_of(dst_buf, shape, dtype)
            before = dst_buf.copy()
            s, d = c.register_array(src_range, src), c.register_array(dst_range, dst)
            kinds.add((describe_array(src).layout != "", describe_array(dst).layout != ""))
            info = c.copy(s, d)
            self.assertEqual(info.state, "done", info.message)
            expect = before.copy()                                       # what NumPy makes of it
            offset = dst.__array_interface__["data"][0] - dst_buf.ctypes.data
            np.ndarray(dst.shape, dtype, buffer=expect, offset=offset,
                       strides=dst.strides)[...] = src
            self.assertTrue(np.array_equal(dst_buf, expect),
                            f"case {case}: {dtype} {shape}, src strides {src.strides}, "
                            f"dst strides {dst.strides}")
            c.unregister_instance(s)
            c.unregister_instance(d)
        # Layouts and datatypes on both ends both turned up.
        self.assertEqual(kinds, {(True, True), (True, False), (False, True), (False, False)})


if __name__ == "__main__":
    unittest.main()
