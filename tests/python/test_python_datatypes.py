"""Datatype instances from the Python client (issue 14), over gRPC against a
real isometryd: a strided column packed into a contiguous buffer and back,
a registered datatype by handle, a datatype against a layout instance, and
the errors a user gets for mismatched or out-of-range descriptions.

Run like test_python_client (ISOMETRYD, ISOMETRY_PYTHONPATH; Debian's
/usr/bin/python3).
"""

import os
import shutil
import sys
import unittest

import test_python_client as ref  # its tests are not collected here
from test_python_client import ISOMETRYD, SKIP_REASON

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

if ref._IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
    from isometry.datatype import BYTE, DOUBLE

CONFIG = ONE_SYS_MEMORY

N = 64  # a 64 x 64 matrix of doubles


def matrix_bytes():
    return bytes((i * 7 + 3) % 251 for i in range(N * N * 8))


def column(data, j):
    """Column j of the row-major matrix in `data`, as MPI_Pack would pack it."""
    return b"".join(data[(i * N + j) * 8:(i * N + j) * 8 + 8] for i in range(N))


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class DatatypeTest(unittest.TestCase):
    def setUp(self):
        if ref._IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({ref._IMPORT_ERROR})")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pydt-", daemon=dict(log_level="warn"))
        except AssertionError as e:
            self.fail(str(e))
        self.c = isometry.Client(self.daemon.socket, name="datatypes", connect_timeout=10)

    def tearDown(self):
        self.c.close()
        rc = self.daemon.stop(timeout_s=30)
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0)

    def placed(self, data):
        a = self.c.allocate("sys0", len(data))
        self.c.write(a, 0, data)
        return a

    def test_column_packs_and_unpacks(self):
        data = matrix_bytes()
        m = self.placed(data)
        packed = self.placed(bytes(N * 8))
        col = DOUBLE.Create_vector(N, 1, N)
        # Column 5: the origin sits 5 doubles into the matrix.
        src = self.c.register_instance(m, datatype=col, offset=5 * 8)
        dst = self.c.register_instance(packed, datatype=DOUBLE.Create_contiguous(N))
        self.c.copy(src, dst, wait=True)
        self.assertEqual(self.c.read(packed, 0, N * 8), column(data, 5))
        # ... and back into column 9 of the matrix; the rest is untouched.
        back = self.c.register_instance(m, datatype=col, offset=9 * 8)
        self.c.copy(dst, back, wait=True)
        want = bytearray(data)
        for i in range(N):
            want[(i * N + 9) * 8:(i * N + 9) * 8 + 8] = data[(i * N + 5) * 8:(i * N + 5) * 8 + 8]
        self.assertEqual(self.c.read(m, 0, len(data)), bytes(want))

    def test_registered_handle(self):
        col = DOUBLE.Create_vector(N, 1, N)
        r = self.c.register_datatype(col)
        self.assertEqual((r.size, r.extent, r.true_extent), (N * 8, (N - 1) * N * 8 + 8,
                                                             (N - 1) * N * 8 + 8))
        self.assertIn("8@0 x64/512", r.canonical)
        data = matrix_bytes()
        m = self.placed(data)
        packed = self.placed(bytes(N * 8))
        dst = self.c.register_instance(packed, datatype=BYTE.Create_contiguous(N * 8))
        for j in (0, 63):
            src = self.c.register_instance(m, datatype=isometry.datatype.Datatype.registered(
                r.handle), offset=j * 8)
            self.c.copy(src, dst, wait=True)
            self.assertEqual(self.c.read(packed, 0, N * 8), column(data, j))
        status = self.c.status()
        self.assertGreaterEqual(status.datatype_translations_memoized, 1)

    def test_datatype_against_a_layout(self):
        # Column 2 of the matrix -> a 1-D layout instance of 64 doubles.
        data = matrix_bytes()
        m = self.placed(data)
        out = self.placed(bytes(N * 8))
        src = self.c.register_instance(m, datatype=DOUBLE.Create_vector(N, 1, N), offset=16)
        dst = self.c.register_instance(out, bounds=[N], fields=[("v", 8)], layout="F,x")
        self.c.copy(src, dst, wait=True)
        self.assertEqual(self.c.read(out, 0, N * 8), column(data, 2))

    def test_mismatch_and_out_of_range_are_refused(self):
        m = self.placed(matrix_bytes())
        col = DOUBLE.Create_vector(N, 1, N)
        with self.assertRaises(IsometryError) as cm:
            self.c.register_instance(m, datatype=col, offset=64 * 8)  # past the end
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")
        src = self.c.register_instance(m, datatype=col)
        dst = self.c.register_instance(self.placed(bytes(4096)),
                                       datatype=BYTE.Create_contiguous(100))
        with self.assertRaises(IsometryError) as cm:
            self.c.copy(src, dst, wait=True)
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("packs to", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
