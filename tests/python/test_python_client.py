"""End-to-end tests of the Python client against a real isometryd.

Run with Debian's interpreter (it has python3-grpcio and python3-protobuf):

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_python_client      # in tests/python

(pytest works too.) ISOMETRYD names the daemon binary; without it every test
is skipped. ISOMETRY_PYTHONPATH names the directory that holds the
``isometry`` package next to its generated stubs (build/python after a
build); it is put first on sys.path.

Each test starts its own daemon with a config in a fresh temporary
directory (sockets and state_dir inside it), and stops it with SIGTERM,
requiring exit status 0.
"""

import os
import random
import shutil
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from isometryd_process import ONE_SYS_MEMORY, IsometrydProcess  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

_IMPORT_ERROR = None
try:
    import grpc

    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
except ImportError as e:  # reported by setUp (only when the tests are not skipped)
    _IMPORT_ERROR = e

SKIP_REASON = (
    "ISOMETRYD is not set: point it at the isometryd binary to run the Python client "
    "tests (and ISOMETRY_PYTHONPATH at build/python)"
)
if not ISOMETRYD:
    print(f"test_python_client: skipped: {SKIP_REASON}", file=sys.stderr)

POOL_BYTES = 64 << 20
QUOTA_BYTES = 32 << 20

# [daemon]: isometryd_process.daemon_section (sockets and state in the
# temporary directory) with these options; CONFIG follows it.
DAEMON = dict(log_level="warn", shutdown_grace_ms=2000)
CONFIG = ONE_SYS_MEMORY + "threads = 2\n"  # memcpy0's threads


# ---- a reference model of layouts (core/layout.h), for expected bytes ----

_DIM_NAMES = {"x": 0, "y": 1, "z": 2, "w": 3, "d0": 0, "d1": 1, "d2": 2, "d3": 3}


def _parse_layout(text):
    """[('F',), ('dim', d), ('in', d, c), ('out', d)] from e.g. "x_in=8,F,x_out"."""
    comps = []
    for part in text.split(","):
        part = part.strip()
        if part == "F":
            comps.append(("F",))
        elif "_in=" in part:
            name, c = part.split("_in=")
            comps.append(("in", _DIM_NAMES[name], int(c)))
        elif part.endswith("_out"):
            comps.append(("out", _DIM_NAMES[part[:-4]]))
        else:
            comps.append(("dim", _DIM_NAMES[part]))
    return comps


def _block_of(comps, d):
    for c in comps:
        if c[0] == "in" and c[1] == d:
            return c[2]
    return 0


def _component_size(comps, c, extents, entry_bytes):
    if c[0] == "F":
        return entry_bytes
    if c[0] == "dim":
        return extents[c[1]]
    if c[0] == "in":
        return c[2]
    block = _block_of(comps, c[1])
    return -(-extents[c[1]] // block)


class RefLayout:
    """Byte offsets of (field, point) in a layout: the first component varies
    fastest; components before F step by the field's size, components after
    F by the whole block of all fields; a blocked dimension's last block is
    padded."""

    def __init__(self, layout, bounds, fields):
        self.comps = _parse_layout(layout)
        self.lo = [lo for lo, _ in bounds]
        self.extents = [hi - lo for lo, hi in bounds]
        self.sizes = [s for _, s in fields]
        self.entry = sum(self.sizes)
        self.field_offsets = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        fpos = next(i for i, c in enumerate(self.comps) if c[0] == "F")
        inner = 1
        for c in self.comps[:fpos]:
            inner *= _component_size(self.comps, c, self.extents, 0)
        self.total = self.entry
        for c in self.comps:
            if c[0] != "F":
                self.total *= _component_size(self.comps, c, self.extents, self.entry)
        # Per field: base and per-dimension (block, stride_in, stride_out).
        self.addr = []
        for f, size in enumerate(self.sizes):
            dims = {}
            stride = size
            for c in self.comps:
                if c[0] == "F":
                    stride = inner * self.entry
                    continue
                d = dims.setdefault(c[1], [0, 0, 0])
                if c[0] == "in":
                    d[0], d[1] = c[2], stride
                elif c[0] == "out":
                    d[2] = stride
                else:
                    d[1] = stride
                stride *= _component_size(self.comps, c, self.extents, self.entry)
            self.addr.append((inner * self.field_offsets[f], dims))

    def offset(self, field, point):
        base, dims = self.addr[field]
        off = base
        for d, x in enumerate(point):
            r = x - self.lo[d]
            block, s_in, s_out = dims[d]
            off += (r // block) * s_out + (r % block) * s_in if block else r * s_in
        return off


def _points(bounds):
    """Every point of the box, x fastest."""
    pts = [()]
    for lo, hi in bounds:
        pts = [p + (x,) for x in range(lo, hi) for p in pts]
    return pts


# Fields of the test instances and how their values are packed.
FIELDS = [("id", 4), ("mass", 8), ("tag", 2), ("flag", 1)]
FORMATS = ["<i", "<d", "<h", "<B"]


def _value(field, n):
    """A distinct, reproducible value of field `field` at point number n."""
    return [n * 7 + 1, n * 0.25 - 3.5, (n * 31) % 32768 - 16384, (n * 13 + 5) % 256][field]


def _fill(ref, bounds, filler=0x00):
    """Bytes of an instance in `ref` holding _value() at every (field, point)."""
    buf = bytearray([filler]) * ref.total
    for n, p in enumerate(_points(bounds)):
        for f, fmt in enumerate(FORMATS):
            struct.pack_into(fmt, buf, ref.offset(f, p), _value(f, n))
    return buf


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class PythonClientTest(unittest.TestCase):
    """Each test gets its own daemon and one attached client, self.c."""

    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(
                f"cannot import the isometry package ({_IMPORT_ERROR}); set ISOMETRY_PYTHONPATH "
                "to the directory holding isometry/ with isometry_pb2.py (build/python), and "
                "run with /usr/bin/python3 (python3-grpcio, python3-protobuf)"
            )
        self.assertTrue(os.access(ISOMETRYD, os.X_OK), f"ISOMETRYD={ISOMETRYD} is not executable")
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, CONFIG, "isometry-pytest-", daemon=DAEMON
            )
        except AssertionError as e:
            self.fail(str(e))
        self.socket = self.daemon.socket
        self.clients = []
        self.stopped = False
        self.c = self.client("main")

    def tearDown(self):
        for c in self.clients:
            c.close()
        if not self.stopped:
            rc = self.stop_daemon()
            self.assertEqual(rc, 0, f"isometryd exited with {rc} on SIGTERM:\n{self._log()}")
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- helpers ----

    def _log(self):
        return self.daemon.log_text()

    def stop_daemon(self):
        """SIGTERM, then the exit status (killing it after 30 s)."""
        self.stopped = True
        rc = self.daemon.stop(timeout_s=30)
        if rc is None:
            self.fail(f"isometryd did not exit within 30 s of SIGTERM:\n{self._log()}")
        return rc

    def client(self, name):
        c = isometry.Client(self.socket, name=name, connect_timeout=10)
        self.clients.append(c)
        return c

    def assertDaemonAlive(self):
        self.assertTrue(
            self.daemon.alive(),
            f"isometryd died (status {self.daemon.proc.returncode}):\n{self._log()}",
        )

    def assertFails(self, code, fn, *args, contains=(), **kwargs):
        """fn(*args) raises IsometryError with `code` and a message naming
        each string of `contains`; returns the error."""
        with self.assertRaises(IsometryError) as cm:
            fn(*args, **kwargs)
        err = cm.exception
        self.assertEqual(err.code, code, f"message: {err.message}")
        for s in contains:
            self.assertIn(s, err.message)
        return err

    def wait_for(self, predicate, what, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.02)

    def layout_copy(self, c, bounds, src_layout, dst_layout, priority=0):
        """Copies an instance written in src_layout into dst_layout and checks
        the destination byte for byte against the reference model (padding
        of partial blocks must keep its sentinel). Returns the TransferInfo."""
        src_ref = RefLayout(src_layout, bounds, FIELDS)
        dst_ref = RefLayout(dst_layout, bounds, FIELDS)
        src_bytes = _fill(src_ref, bounds)
        expected = _fill(dst_ref, bounds, filler=0xEE)
        sa = c.allocate("sys0", src_ref.total)
        da = c.allocate("sys0", dst_ref.total)
        c.write(sa, 0, src_bytes)
        c.write(da, 0, b"\xee" * dst_ref.total)
        si = c.register_instance(sa, bounds, FIELDS, src_layout)
        di = c.register_instance(da, bounds, FIELDS, dst_layout)
        self.assertEqual(si.total_bytes, src_ref.total)
        self.assertEqual(di.total_bytes, dst_ref.total)
        info = c.copy(si, di, priority=priority, wait=True)
        self.assertEqual(info.state, "done", info)
        self.assertEqual(info.code, 0)
        self.assertEqual(info.priority, priority)
        # The planner's prediction and what the copy measured, both reported.
        self.assertGreater(info.predicted_bytes_per_s, 0)
        self.assertGreater(info.measured_bytes_per_s, 0)
        out = c.read(da, 0, dst_ref.total)
        self.assertEqual(len(out), dst_ref.total)
        # Element by element first, for a readable failure ...
        for n, p in enumerate(_points(bounds)):
            for f, fmt in enumerate(FORMATS):
                got = struct.unpack_from(fmt, out, dst_ref.offset(f, p))[0]
                if got != _value(f, n):
                    self.fail(
                        f"{src_layout} -> {dst_layout}: field {FIELDS[f][0]} at {p}: "
                        f"got {got!r}, expected {_value(f, n)!r}"
                    )
        # ... then every byte, padding included.
        self.assertEqual(out, bytes(expected), f"{src_layout} -> {dst_layout}: padding changed")
        self.assertEqual(c.read(sa, 0, src_ref.total), bytes(src_bytes), "source changed")
        for a in (sa, da):
            c.free(a)
        return info

    # ---- tests ----

    def test_aos_to_soa_round_trip(self):
        bounds = [(0, 2000)]
        info = self.layout_copy(self.c, bounds, "F,x", "x,F", priority=3)
        self.assertEqual(info.bytes, 2000 * 15)
        self.assertIn("sys0", info.path)
        # And back, through the planner's choice, in 2-D with an offset box.
        self.layout_copy(self.c, [(-3, 37), (10, 35)], "y,x,F", "F,x,y")

    def test_blocked_layout_with_padding(self):
        # 1003 points in blocks of 8: the last block is padded and untouched.
        self.layout_copy(self.c, [(0, 1003)], "F,x", "x_in=8,F,x_out")
        self.layout_copy(self.c, [(0, 30), (0, 7)], "x_in=4,F,y,x_out", "x,y,F")

    def test_copy_without_wait(self):
        bounds = [(0, 512)]
        ref = RefLayout("F,x", bounds, FIELDS)
        sa = self.c.allocate("sys0", ref.total)
        da = self.c.allocate("sys0", ref.total)
        self.c.write(sa, 0, _fill(ref, bounds))
        si = self.c.register_instance(sa, [512], FIELDS, "F,x")
        di = self.c.register_instance(da, [512], FIELDS, "x,F")
        tid = self.c.copy(si, di, priority=7, wait=False)
        self.assertIsInstance(tid, int)
        info = self.c.wait(tid, timeout_ms=10000)
        self.assertEqual((info.id, info.state, info.priority), (tid, "done", 7))
        # The completion also arrives on the session's Attach stream.
        self.wait_for(lambda: self.c.completed(tid) is not None, "the completion event")
        self.assertEqual(self.c.completed(tid).state, "done")
        self.assertEqual(self.c.wait(tid).id, tid)  # answered from the event
        dst = RefLayout("x,F", bounds, FIELDS)
        out = self.c.read(da, 0, dst.total)
        for n in range(512):
            self.assertEqual(struct.unpack_from("<d", out, dst.offset(1, (n,)))[0], _value(1, n))
        self.assertEqual(self.c.transfer(tid).state, "done")
        # ListTransfers shows transfers in flight only; recent=True the ended
        # ones, with their final state and path.
        self.assertNotIn(tid, [t.id for t in self.c.transfers()])
        recent = {t.id: t for t in self.c.transfers(recent=True)}
        self.assertIn(tid, recent)
        self.assertEqual((recent[tid].state, recent[tid].bytes), ("done", ref.total))
        self.assertIn("memcpy0", recent[tid].path)

    def test_recent_transfers_keep_inline_copies_newest_first_and_bounded(self):
        # Copies that end inside the daemon's Copy call (the inline path)
        # go to the history too: newest first, each with its state, bytes
        # and path, and never more than daemon.transfer_history of them.
        d, daemon = IsometrydProcess.started_in_temp_dir(
            ISOMETRYD,
            '[runtime]\ninline_bytes = "64KiB"\n' + CONFIG,
            "isometry-pytest-",
            daemon=dict(DAEMON, extra=(("transfer_history", "3"),)),
        )
        try:
            c = isometry.Client(daemon.socket, name="recent", connect_timeout=10)
            try:
                ref = RefLayout("F,x", [(0, 64)], FIELDS)
                sa = c.allocate("sys0", ref.total)
                da = c.allocate("sys0", ref.total)
                si = c.register_instance(sa, [64], FIELDS, "F,x")
                di = c.register_instance(da, [64], FIELDS, "x,F")
                ids = []
                for _ in range(5):
                    tid = c.copy(si, di, wait=False)
                    self.assertEqual(c.wait(tid, timeout_ms=10000).state, "done")
                    ids.append(tid)
                recent = c.transfers(recent=True)
                self.assertEqual([t.id for t in recent], ids[::-1][:3])
                for t in recent:
                    self.assertEqual((t.state, t.bytes), ("done", ref.total))
                    self.assertIn("memcpy0", t.path)
            finally:
                c.close()
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.log_text())
            daemon.close()
            shutil.rmtree(d, ignore_errors=True)

    def test_introspection(self):
        mems = {m.name: m for m in self.c.memories()}
        self.assertEqual(mems["sys0"].pool_capacity, POOL_BYTES)
        self.assertEqual(mems["sys0"].client_quota, QUOTA_BYTES)
        self.assertIn("memcpy0", [ch.name for ch in self.c.channels()])
        plan = self.c.explain("sys0", "F,x", "sys0", "x,F", [100], FIELDS)
        self.assertGreaterEqual(len(plan.hops), 1)
        self.assertEqual(plan.hops[0].channel, "memcpy0")
        st = self.c.status()
        self.assertEqual(st.sessions, 1)
        self.assertTrue(st.version)

    def test_bad_requests_name_the_problem(self):
        c = self.c
        a = c.allocate("sys0", 4096)
        # Bad layout strings.
        self.assertFails("INVALID_ARGUMENT", c.register_instance, a, [16], FIELDS, "F,q",
                         contains=("F,q", "q"))
        self.assertFails("INVALID_ARGUMENT", c.register_instance, a, [4, 4], FIELDS, "F,x",
                         contains=("F,x",))
        self.assertFails("INVALID_ARGUMENT", c.register_instance, a, [16], FIELDS, "x,F,F")
        self.assertFails("INVALID_ARGUMENT", c.register_instance, a, [16], [("v", 0)], "F,x",
                         contains=("'v'", "size 0"))
        # An instance that does not fit its allocation.
        self.assertFails("OUT_OF_RANGE", c.register_instance, a, [1000], FIELDS, "F,x",
                         contains=("does not fit", str(a.id), "4096"))
        self.assertFails("OUT_OF_RANGE", c.register_instance, a, [16], FIELDS, "F,x",
                         offset=4000, contains=("offset 4000",))
        # Unknown allocation, instance, memory, transfer.
        self.assertFails("NOT_FOUND", c.read, 987654, 0, 8, contains=("987654",))
        self.assertFails("NOT_FOUND", c.register_instance, 987654, [16], FIELDS, "F,x",
                         contains=("987654",))
        self.assertFails("NOT_FOUND", c.free, 987654, contains=("987654",))
        self.assertFails("NOT_FOUND", c.allocate, "nosuchmem", 64, contains=("nosuchmem",))
        self.assertFails("NOT_FOUND", c.copy, 424242, 434343, contains=("424242",))
        self.assertFails("NOT_FOUND", c.wait, 555555, contains=("555555",))
        # Out-of-range data access.
        self.assertFails("OUT_OF_RANGE", c.read, a, 4000, 200, contains=("4096",))
        self.assertFails("OUT_OF_RANGE", c.write, a, 4090, b"x" * 10, contains=("4096",))
        self.assertFails("INVALID_ARGUMENT", c.allocate, "sys0", 0, contains=("0 bytes",))
        # Another client's allocation is off limits until published.
        other = self.client("other")
        self.assertFails("PERMISSION_DENIED", other.read, a, 0, 8, contains=(str(a.id),))
        self.assertFails("PERMISSION_DENIED", other.free, a, contains=(str(a.id),))
        c.publish(a)
        c.write(a, 0, b"published!")
        self.assertEqual(other.read(a, 0, 10), b"published!")
        # Quota: 32 MiB per client, pool of 64 MiB.
        big = c.allocate("sys0", QUOTA_BYTES - 4096)
        self.assertFails("RESOURCE_EXHAUSTED", c.allocate, "sys0", 8192,
                         contains=("quota", "sys0"))
        self.assertFails("RESOURCE_EXHAUSTED", c.allocate, "sys0", POOL_BYTES + 1,
                         contains=("pool",))
        other.allocate("sys0", QUOTA_BYTES)  # its own quota: fits, and fills the pool
        third = self.client("third")
        self.assertFails("RESOURCE_EXHAUSTED", third.allocate, "sys0", 1, contains=("full",))
        c.free(big)
        third.allocate("sys0", 4096)  # room again
        # A missing or bogus session.
        stub = pb_grpc.IsometryStub(grpc.insecure_channel("unix:" + self.socket))
        for md in (None, (("isometry-session", "not-a-session"),)):
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Allocate(pb.AllocateRequest(memory="sys0", bytes=64), metadata=md, timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("session", cm.exception.details())

    def test_copy_and_layout_errors_say_what_is_wrong(self):
        """Issue #21: each malformed blocking factor and component name gets its
        own message; dimension mismatches give the counts; memories are named."""
        c = self.c
        a = c.allocate("sys0", 1 << 16)
        for layout, why in (
            ("F,x_in=4x,x_out", "'4x' is not a number"),
            ("F,x_in=+4,x_out", "takes no sign"),
            ("F,x_in= 4,x_out", "no spaces around '='"),
            ("F,x_in=0x10,x_out", "hexadecimal is not accepted"),
            ("F,x_in=99999999999999999999,x_out", "too large (at most 2^62"),
            ("F,x_IN=4,x_out", "did you mean 'x_in=4'"),
            ("F,x-in=4,x_out", "did you mean 'x_in=4'"),
            ("F,x,y", "names 2 dimension(s) (x, y) but the index space has 1"),
        ):
            with self.subTest(layout=layout):
                self.assertFails("INVALID_ARGUMENT", c.register_instance, a, [64], FIELDS, layout,
                                 contains=(why,))
        one = c.register_instance(a, [64], FIELDS, "F,x")
        two = c.register_instance(a, [8, 8], FIELDS, "F,y,x", offset=4096)
        other = c.register_instance(a, [8, 8], FIELDS, "y,x,F", offset=8192)
        self.assertFails("INVALID_ARGUMENT", c.copy, one, two, wait=True,
                         contains=("source instance has 1 dimension(s)", "the destination 2"))
        self.assertFails("INVALID_ARGUMENT", c.copy, two, other, wait=True, box=[(0, 4)],
                         contains=("box [0..4) has 1 dimension(s) but the instances have 2",))
        self.assertNotIn("lies outside", self.assertFails(
            "INVALID_ARGUMENT", c.copy, two, other, wait=True, box=[(0, 4), (0, 4), (0, 1)]).message)
        # Overlapping storage: the memory by the name the config gives it.
        err = self.assertFails("INVALID_ARGUMENT", c.copy, two, two, wait=True,
                               contains=("overlap in memory 'sys0'",))
        self.assertNotIn("0:0", err.message)

    def test_closing_a_client_frees_its_allocations(self):
        observer = self.c
        base = observer.status()
        base_used = {m.name: m.pool_used for m in observer.memories()}["sys0"]
        worker = self.client("worker")
        kept = worker.allocate("sys0", 1 << 20)
        worker.allocate("sys0", 2 << 20)
        dropped = worker.allocate("sys0", 3 << 20)
        worker.register_instance(dropped, [1000], FIELDS, "F,x")
        worker.publish(kept)
        st = observer.status()
        self.assertEqual(st.allocations, base.allocations + 3)
        self.assertEqual(st.instances, base.instances + 1)
        self.assertEqual(st.sessions, 2)
        worker.close()
        self.assertFalse(worker.alive)
        self.wait_for(
            lambda: observer.status().allocations == base.allocations + 1,
            "the daemon to free the closed session's unpublished allocations",
        )
        st = observer.status()
        self.assertEqual(st.sessions, 1)
        self.assertEqual(st.instances, base.instances)
        used = {m.name: m.pool_used for m in observer.memories()}["sys0"]
        self.assertEqual(used, base_used + (1 << 20), "only the published MiB stays in use")
        self.assertEqual(len(observer.read(kept, 0, 1 << 20)), 1 << 20)  # still usable
        self.assertFails("NOT_FOUND", observer.read, dropped, 0, 8)
        self.assertFails("FAILED_PRECONDITION", worker.status)  # closed client

    def test_malformed_requests_leave_the_daemon_healthy(self):
        rng = random.Random(20240611)
        channel = grpc.insecure_channel("unix:" + self.socket)
        self.addCleanup(channel.close)
        stub = pb_grpc.IsometryStub(channel)
        good = (("isometry-session", self.c.session),)
        a = self.c.allocate("sys0", 4096)
        methods = [
            "ListMemories", "Allocate", "Free", "Publish", "Write", "Read", "RegisterInstance",
            "UnregisterInstance", "Copy", "Wait", "Cancel", "GetTransfer", "ListTransfers",
            "ListChannels", "ExplainPlan", "GetStatus", "ExplainTransfer",
        ]
        raw = {
            m: channel.unary_unary(f"/isometry.v1.Isometry/{m}") for m in methods
        }  # bytes in, bytes out: no (de)serialization on this side
        U64 = (1 << 64) - 1
        I64 = (1 << 63) - 1

        def box(lo, hi):
            return pb.Box(lo=lo, hi=hi)

        def spec(**kw):
            base = dict(allocation=a.id, bounds=box([0], [16]),
                        fields=[pb.Field(name="v", size=4)], layout="F,x")
            base.update(kw)
            return pb.RegisterInstanceRequest(spec=pb.InstanceSpec(**base))

        bad_layouts = ["", ",", "F,", "F,x,x", "x", "F,x_in=0,x_out", "F,x_in=-1,x_out",
                       "x_in=99999999999999999999,F,x_out", "F,x_out", "F,x_in=4", "F,v",
                       "F,x,y,z,w,d4", "\x00", "F" * 1000, "F;x", "F,x_in=,x_out", "é,F"]
        semantic = [
            lambda: ("Allocate", pb.AllocateRequest(memory="sys0", bytes=0)),
            lambda: ("Allocate", pb.AllocateRequest(memory="sys0", bytes=U64)),
            lambda: ("Allocate", pb.AllocateRequest(memory="", bytes=8)),
            lambda: ("Allocate", pb.AllocateRequest(memory="x" * 10000, bytes=8)),
            lambda: ("Free", pb.FreeRequest(allocation=rng.choice([0, U64, 10**9]))),
            lambda: ("Publish", pb.PublishRequest(allocation=U64)),
            lambda: ("Write", pb.WriteRequest(allocation=a.id, offset=U64, data=b"abc")),
            lambda: ("Write", pb.WriteRequest(allocation=a.id, offset=4095, data=b"ab")),
            lambda: ("Write", pb.WriteRequest(allocation=U64, offset=0, data=b"ab")),
            lambda: ("Read", pb.ReadRequest(allocation=a.id, offset=1, length=U64)),
            lambda: ("Read", pb.ReadRequest(allocation=a.id, offset=U64, length=2)),
            lambda: ("Read", pb.ReadRequest(allocation=a.id, offset=0, length=4097)),
            lambda: ("RegisterInstance", pb.RegisterInstanceRequest()),
            lambda: ("RegisterInstance", spec(layout=rng.choice(bad_layouts))),
            lambda: ("RegisterInstance", spec(bounds=box([0, 0], [4]))),
            lambda: ("RegisterInstance", spec(bounds=box([0] * 5, [2] * 5))),
            lambda: ("RegisterInstance", spec(bounds=box([5], [1]))),
            lambda: ("RegisterInstance", spec(bounds=box([-I64 - 1], [I64]))),
            lambda: ("RegisterInstance", spec(bounds=box([0, 0, 0, 0], [I64] * 4),
                                              layout="F,x,y,z,w")),
            lambda: ("RegisterInstance", spec(bounds=box([0], [1 << 40]))),
            lambda: ("RegisterInstance", spec(offset=U64)),
            lambda: ("RegisterInstance", spec(offset=4095)),
            lambda: ("RegisterInstance", spec(fields=[])),
            lambda: ("RegisterInstance", spec(fields=[pb.Field(name="v", size=0)])),
            lambda: ("RegisterInstance", spec(fields=[pb.Field(name="v", size=0xFFFFFFFF)])),
            lambda: ("RegisterInstance", spec(fields=[pb.Field(name="", size=4)])),
            lambda: ("RegisterInstance", spec(fields=[pb.Field(name="v", size=4)] * 2)),
            lambda: ("RegisterInstance",
                     spec(fields=[pb.Field(name=f"f{i}", size=1) for i in range(5000)])),
            lambda: ("RegisterInstance", spec(allocation=U64)),
            lambda: ("UnregisterInstance", pb.UnregisterInstanceRequest(instance=U64)),
            lambda: ("Copy", pb.CopyRequest(src_instance=U64, dst_instance=0, wait=True)),
            lambda: ("Copy", pb.CopyRequest(src_instance=1, dst_instance=1,
                                            box=box([0, 0], [1]), wait=rng.random() < 0.5)),
            lambda: ("Copy", pb.CopyRequest(via=[pb.Hop(memory="sys0", layout="F,x")] * 9)),
            lambda: ("Copy", pb.CopyRequest(src_instance=0, dst_instance=0,
                                            priority=-(1 << 31), via=[pb.Hop(memory="?")])),
            lambda: ("Wait", pb.WaitRequest(transfer=U64, timeout_ms=rng.choice([0, 1, 100]))),
            lambda: ("Cancel", pb.CancelRequest(transfer=rng.choice([0, U64]))),
            lambda: ("GetTransfer", pb.GetTransferRequest(transfer=U64)),
            lambda: ("ExplainTransfer",
                     pb.ExplainTransferRequest(transfer=rng.choice([0, 1, 2, U64]))),
            lambda: ("ExplainPlan", pb.ExplainPlanRequest()),
            lambda: ("ExplainPlan", pb.ExplainPlanRequest(
                src_memory="sys0", dst_memory="sys0", src_layout=rng.choice(bad_layouts),
                dst_layout="x,F", bounds=box([0], [10]), fields=[pb.Field(name="v", size=4)])),
            lambda: ("ExplainPlan", pb.ExplainPlanRequest(
                src_memory="nosuch", dst_memory="sys0", src_layout="F,x", dst_layout="x,F",
                bounds=box([0], [10]), fields=[pb.Field(name="v", size=4)])),
            lambda: ("ExplainPlan", pb.ExplainPlanRequest(
                src_memory="sys0", dst_memory="sys0", src_layout="F,x", dst_layout="x,F",
                bounds=box([0], [1 << 62]),
                fields=[pb.Field(name=f"f{i}", size=1 << 20) for i in range(4)])),
        ]
        # Semantically invalid requests must be refused with a specific code;
        # these would reveal a daemon bug.
        bad_codes = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL,
                     grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
        counts = {"ok": 0, "refused": 0}
        for i in range(2000):
            kind = rng.random()
            md = rng.choice([good, good, None, (("isometry-session", "bogus-" * 50),)])
            if kind < 0.35:
                # Bytes that are rarely a valid message (and sometimes none at all).
                method = rng.choice(methods)
                payload = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
                try:
                    raw[method](payload, metadata=md, timeout=10)
                    counts["ok"] += 1
                except grpc.RpcError as e:
                    counts["refused"] += 1
                    self.assertNotIn(e.code(), {grpc.StatusCode.UNAVAILABLE,
                                                grpc.StatusCode.DEADLINE_EXCEEDED},
                                     f"raw {method} {payload!r}: {e.details()}")
            else:
                method, req = rng.choice(semantic)()
                with self.assertRaises(grpc.RpcError, msg=f"{method} {req} was accepted") as cm:
                    getattr(stub, method)(req, metadata=md, timeout=10)
                counts["refused"] += 1
                self.assertNotIn(cm.exception.code(), bad_codes,
                                 f"{method}({str(req)[:300]}): {cm.exception.details()}")
                self.assertTrue(cm.exception.details(), f"{method}: refused without a message")
            if i % 100 == 0:
                self.assertDaemonAlive()
        self.assertGreater(counts["refused"], 1500)
        # Still healthy: it answers, keeps its sessions and copies correctly.
        self.assertDaemonAlive()
        st = self.c.status()
        self.assertEqual(st.sessions, 1)
        self.assertEqual(st.transfers_active, 0)
        self.assertEqual(st.allocations, 1, "a malformed request leaked an allocation")
        self.c.free(a)
        self.layout_copy(self.c, [(0, 700)], "F,x", "x,F")
        self.assertTrue(self.c.alive)

    def test_daemon_shutdown_ends_the_session(self):
        self.c.allocate("sys0", 1 << 20)
        rc = self.stop_daemon()
        self.assertEqual(rc, 0, f"isometryd exited with {rc} on SIGTERM:\n{self._log()}")
        self.wait_for(lambda: not self.c.alive, "the client to see the session end")
        err = self.assertFails("UNAVAILABLE", self.c.status)
        self.assertIn("session ended", err.message)

    def test_no_daemon_is_a_clear_error(self):
        err = self.assertFails("UNAVAILABLE", isometry.Client,
                               os.path.join(self.dir, "missing.sock"), connect_timeout=5)
        self.assertIn("is the daemon running", err.message)


if __name__ == "__main__":
    unittest.main()
