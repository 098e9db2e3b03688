"""Overflowing bounds and offsets against a real isometryd (issue #11,
class 4). Bounds lo=-2^63, hi=2^63-1 on one dimension with another empty
made Box::extent overflow (signed): an ASan/UBSan daemon died on one
ExplainPlan. Every request below must be answered with a clear error while
the daemon stays up and nothing it holds changes. Run under the ASan build
(ctest in build-asan) this is what proves the absence of undefined
behaviour; in a plain build it proves the answers.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_overflow_attacks   # in tests/python
"""

import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import IsometrydProcess  # noqa: E402
from local_socket import LocalConnection  # noqa: E402
from test_python_client import _IMPORT_ERROR, CONFIG, DAEMON, ISOMETRYD, SKIP_REASON  # noqa: E402

if _IMPORT_ERROR is None:
    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
U64_MAX = 2**64 - 1
LIMIT = 2**62 - 1  # the largest accepted bound (core/box.h kMaxCoordinate)
FIELDS = [("v", 8)]

# (bounds, layout, what the message names): each one INVALID_ARGUMENT.
BAD_BOUNDS = [
    # The reported crash: an empty dimension, the other all of int64.
    ([(0, 0), (I64_MIN, I64_MAX)], "F,y,x", "lies outside"),
    ([(I64_MIN, I64_MAX)], "F,x", "lies outside"),
    ([(I64_MIN, I64_MIN + 1)], "F,x", "lies outside"),
    ([(I64_MAX - 1, I64_MAX)], "F,x", "lies outside"),
    ([(-LIMIT, LIMIT)], "F,x", "spans more than 2^62 points"),
    # No point at all, yet 2^64 "points" once the empty one counts as 1.
    ([(0, 0), (0, 2**32), (0, 2**32)], "F,z,y,x", "spans more than 2^62 points"),
    # Storage: 2^60 points of 8 bytes, and a 2^62 block over nothing.
    ([(0, 2**60)], "F,x", "exceeds 2^62 bytes"),
    ([(0, 0)], "F,x_in=4611686018427387904,x_out", "exceeds 2^62 bytes"),
    ([(5, 4)], "F,x", "below lo"),
]


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class OverflowAttackTest(unittest.TestCase):
    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package ({_IMPORT_ERROR}); see test_python_client")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-overflow-", daemon=DAEMON
            )
        except AssertionError as e:
            self.fail(str(e))
        self.c = isometry.Client(self.daemon.socket, name="attacker", connect_timeout=10)

    def tearDown(self):
        self.c.close()
        alive = self.daemon.alive()
        rc = self.daemon.stop(timeout_s=30)
        log = self.daemon.log_text()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertTrue(alive, f"isometryd died during the test:\n{log}")
        self.assertEqual(rc, 0, f"isometryd exited with {rc} on SIGTERM:\n{log}")

    def assertInvalid(self, fn, *args, contains=(), code="INVALID_ARGUMENT", **kwargs):
        with self.assertRaises(IsometryError) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        for s in contains:
            self.assertIn(s, cm.exception.message)
        self.assertTrue(self.daemon.alive(), f"isometryd died:\n{self.daemon.log_text()}")

    def counters(self):
        s = self.c.status()
        return (s.instances, s.allocations, s.transfers_submitted)

    def test_explain_plan_with_extreme_bounds_is_invalid_argument(self):
        for bounds, layout, why in BAD_BOUNDS:
            with self.subTest(bounds=bounds, layout=layout):
                self.assertInvalid(self.c.explain, "sys0", layout, "sys0", layout, bounds, FIELDS,
                                   contains=(why,))
        # The daemon still plans ordinary copies, at the accepted edges too.
        self.assertTrue(self.c.explain("sys0", "F,x", "sys0", "x,F", [(LIMIT - 8, LIMIT)], FIELDS).text)
        self.assertTrue(self.c.explain("sys0", "F,y,x", "sys0", "F,x,y", [(0, 0), (-LIMIT, -LIMIT + 3)], FIELDS).text)

    def test_register_instance_with_extreme_bounds_or_offset_changes_nothing(self):
        a = self.c.allocate("sys0", 4096)
        before = self.counters()
        for bounds, layout, why in BAD_BOUNDS:
            with self.subTest(bounds=bounds, layout=layout):
                self.assertInvalid(self.c.register_instance, a, bounds, FIELDS, layout, contains=(why,))
        # Offsets that wrap 2^64 with the instance's size are refused as such;
        # one that does not wrap lies outside the allocation.
        for offset in (U64_MAX, U64_MAX - 63):
            with self.subTest(offset=offset):
                self.assertInvalid(self.c.register_instance, a, [8], FIELDS, "F,x", offset=offset,
                                   contains=("wraps past 2^64",))
        self.assertInvalid(self.c.register_instance, a, [8], FIELDS, "F,x", offset=2**63,
                           code="OUT_OF_RANGE", contains=("4096",))
        self.assertEqual(self.counters(), before)
        # And a legitimate instance at the largest bounds still registers.
        inst = self.c.register_instance(a, [(LIMIT - 512, LIMIT)], FIELDS, "F,x")
        self.assertEqual(inst.total_bytes, 4096)

    def test_copy_with_extreme_box_or_hop_leaves_the_destination_unchanged(self):
        a = self.c.allocate("sys0", 2 * 4096)
        src = self.c.register_instance(a, [(LIMIT - 512, LIMIT)], FIELDS, "F,x")
        dst = self.c.register_instance(a, [(LIMIT - 512, LIMIT)], FIELDS, "x,F", offset=4096)
        self.c.write(a, 0, bytes(range(256)) * 16)
        self.c.write(a, 4096, b"\xee" * 4096)
        before = self.counters()
        for box, why in [
            ([(I64_MIN, I64_MAX)], "lies outside"),
            ([(LIMIT - 512, I64_MAX)], "lies outside"),
            ([(-LIMIT, LIMIT)], "spans more than 2^62"),
        ]:
            with self.subTest(box=box):
                self.assertInvalid(self.c.copy, src, dst, box=box, contains=(why,))
        # A forced hop whose slot would be 2^62 blocks of 8 bytes (2^65,
        # once wrapped to 0): refused, not a zero-byte buffer.
        self.assertInvalid(self.c.copy, src, dst, via=[("sys0", "F,x_in=4611686018427387904,x_out")],
                           code="RESOURCE_EXHAUSTED", contains=("buffer slot",))
        self.assertEqual(self.c.read(a, 4096, 4096), b"\xee" * 4096)
        self.assertEqual(self.counters()[:2], before[:2])
        # The same instances still copy correctly at the edge of int64 room.
        self.c.copy(src, dst, box=[(LIMIT - 2, LIMIT)])
        self.assertEqual(self.c.read(a, 4096 + 510 * 8, 16), (bytes(range(256)) * 16)[510 * 8 : 512 * 8])

    def test_local_socket_register_instance_with_extreme_bounds(self):
        """The shared-memory handshake socket converts the same specs."""
        s = LocalConnection(os.path.join(self.dir, "local.sock"), timeout_s=10)
        try:
            resp = s.hello("attacker")
            self.assertEqual(resp.code, 0, resp.message)
            before = self.counters()
            for bounds, layout, why in BAD_BOUNDS:
                spec = pb.InstanceSpec(allocation=1, layout=layout,
                                       fields=[pb.Field(name=n, size=z) for n, z in FIELDS])
                for lo, hi in bounds:
                    spec.bounds.lo.append(lo)
                    spec.bounds.hi.append(hi)
                req = pb.LocalRequest(tag=2, register_instance=pb.RegisterInstanceRequest(spec=spec))
                resp = s.request(req)
                self.assertIsNotNone(resp, "the daemon closed the local socket")
                self.assertEqual(resp.code, 3, f"{bounds}: {resp.message}")  # INVALID_ARGUMENT
                self.assertIn(why, resp.message)
            self.assertEqual(self.counters(), before)
        finally:
            s.close()
        self.assertTrue(self.daemon.alive(), self.daemon.log_text())


if __name__ == "__main__":
    unittest.main()
