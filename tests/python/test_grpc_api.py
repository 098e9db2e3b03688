"""The gRPC surface as a client written from docs/ + isometry.proto sees it
(issue #12): streaming Read/Write for large data, health and reflection,
completion events, and the worked layout example of docs/concepts/layouts.md.

    ISOMETRYD=build/daemon/isometryd ISOMETRY_PYTHONPATH=build/python \\
        /usr/bin/python3 -m unittest -v test_grpc_api      # in tests/python

Each test case starts its own daemon in a fresh temporary directory.
"""

import os
import random
import shutil
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyfixture"))
from ports import free_port  # noqa: E402
from isometryd_process import IsometrydProcess  # noqa: E402
from thread_nice import thread_names, thread_switches  # noqa: E402

ISOMETRYD = os.environ.get("ISOMETRYD", "")
if os.environ.get("ISOMETRY_PYTHONPATH"):
    sys.path.insert(0, os.environ["ISOMETRY_PYTHONPATH"])

_IMPORT_ERROR = None
try:
    import grpc
    from google.protobuf import descriptor_pb2

    import isometry
    from isometry import IsometryError
    from isometry import isometry_pb2 as pb
    from isometry import isometry_pb2_grpc as pb_grpc
    from isometry import reflection_v1_pb2 as refl
except ImportError as e:  # reported by setUp (only when the tests are not skipped)
    _IMPORT_ERROR = e

SKIP_REASON = "ISOMETRYD is not set: point it at the isometryd binary (and ISOMETRY_PYTHONPATH)"
if not ISOMETRYD:
    print(f"test_grpc_api: skipped: {SKIP_REASON}", file=sys.stderr)

MiB = 1 << 20

# Follows the [daemon] section the fixture writes (daemon_section: sockets,
# state_dir, log_level warn, calibrate off); {extra_daemon} adds keys to it.
CONFIG = """\
{extra_daemon}
[[memory]]
name = "sys0"
kind = "SYS"
pool = "96MiB"
client_quota = "48MiB"
staging = "64MiB"

[[channel]]
name = "memcpy0"
kind = "memcpy"
threads = 2
{extra}"""

SERVING = 1


def _sanitized(pid):
    """Whether process `pid` runs with AddressSanitizer (its maps name libasan)."""
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


def _minor_faults(pid):
    """Page faults process `pid` has taken without I/O (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def _health_request(service):
    """grpc.health.v1.HealthCheckRequest{service} in wire form (field 1)."""
    name = service.encode()
    assert len(name) < 128
    return b"\x0a" + bytes([len(name)]) + name if name else b""


def _health_status(channel, service):
    """The ServingStatus a Check answers (HealthCheckResponse field 1), or
    the gRPC status code name when the call fails."""
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        reply = check(_health_request(service), timeout=5)
    except grpc.RpcError as e:
        return e.code().name
    return reply[1] if reply[:1] == b"\x08" else 0


def _reflect(channel, package, requests):
    """Answers of grpc.reflection.<package>.ServerReflection to `requests`
    (v1 and v1alpha share the messages, so one set of stubs speaks both)."""
    call = channel.stream_stream(
        f"/grpc.reflection.{package}.ServerReflection/ServerReflectionInfo",
        request_serializer=refl.ServerReflectionRequest.SerializeToString,
        response_deserializer=refl.ServerReflectionResponse.FromString,
    )
    return list(call(iter(requests), timeout=10))


class DaemonCase(unittest.TestCase):
    """A daemon per test and one client, self.c."""

    extra = ""
    extra_daemon = ""

    def setUp(self):
        if _IMPORT_ERROR is not None:
            self.fail(f"cannot import the isometry package and stubs ({_IMPORT_ERROR})")
        template = CONFIG.replace("{extra}", self.extra).replace(
            "{extra_daemon}", self.extra_daemon
        )
        try:
            self.dir, self.daemon = IsometrydProcess.started_in_temp_dir(
                ISOMETRYD, template, "isometry-grpcapi-"
            )
        except AssertionError as e:
            self.fail(str(e))
        self.clients = []
        self.c = self.client("main")

    def client(self, name):
        c = isometry.Client(self.daemon.socket, name=name)
        self.clients.append(c)
        return c

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.daemon.stop()
        log = self.daemon.log_text()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(rc, 0, f"isometryd exited with {rc}:\n{log}")

    def stub(self, channel_options=None):
        channel = grpc.insecure_channel("unix:" + self.daemon.socket, options=channel_options or [])
        self.addCleanup(channel.close)
        return channel, pb_grpc.IsometryStub(channel)

    def md(self, c):
        return (("isometry-session", c.session),)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class LargeData(DaemonCase):
    def test_20_mib_written_and_read_back_through_the_streams(self):
        n = 20 * MiB
        a = self.c.allocate("sys0", n + 4096)
        data = random.Random(7).randbytes(n)
        self.c.write(a, 4096, data)  # WriteStream (above 1 MiB)
        self.assertEqual(self.c.read(a, 4096, n), data)  # ReadStream
        # The raw stream: ordered chunks of at most 1 MiB that tile the range.
        _, stub = self.stub()
        chunks = list(
            stub.ReadStream(
                pb.ReadRequest(allocation=a.id, offset=4096, length=n), metadata=self.md(self.c)
            )
        )
        self.assertTrue(all(len(ch.data) <= MiB for ch in chunks))
        self.assertEqual([ch.offset for ch in chunks], list(range(4096, 4096 + n, MiB)))
        self.assertEqual(b"".join(ch.data for ch in chunks), data)

    def test_repeated_1_mib_writes_reuse_the_daemons_heap(self):
        # A 1 MiB Write is 256 pages of buffers in the daemon: allocated
        # fresh at every call (mapped, or a heap top handed back to the
        # kernel after the last one), it faults all of them in again.
        a = self.c.allocate("sys0", MiB)
        data = random.Random(3).randbytes(MiB)
        for _ in range(40):  # the daemon's buffers reach their size on each of its threads
            self.c.write(a, 0, data)
        pid = self.daemon.proc.pid
        if _sanitized(pid):
            self.skipTest("a sanitized daemon: AddressSanitizer's allocator holds freed "
                          "memory in its quarantine and hands out fresh pages")
        before = _minor_faults(pid)
        calls = 50
        for _ in range(calls):
            self.c.write(a, 0, data)
        faults = _minor_faults(pid) - before
        self.assertEqual(self.c.read(a, 0, MiB), data)
        # At most a quarter of the pages a Write moves: a gRPC thread that
        # starts meanwhile faults its first buffers in once.
        self.assertLess(
            faults, calls * 256 // 4, f"{faults} page faults in the daemon over {calls} Writes"
        )

    def test_a_unary_read_above_4_mib_fails_in_a_default_client(self):
        a = self.c.allocate("sys0", 5 * MiB)
        _, stub = self.stub()  # default options: 4 MiB receive limit
        with self.assertRaises(grpc.RpcError) as e:
            stub.Read(
                pb.ReadRequest(allocation=a.id, offset=0, length=5 * MiB), metadata=self.md(self.c)
            )
        self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # The same client reads it through ReadStream.
        got = b"".join(
            ch.data
            for ch in stub.ReadStream(
                pb.ReadRequest(allocation=a.id, offset=0, length=5 * MiB), metadata=self.md(self.c)
            )
        )
        self.assertEqual(len(got), 5 * MiB)

    def test_bad_offsets_and_lengths_are_refused_and_change_nothing(self):
        size = 4 * MiB
        a = self.c.allocate("sys0", size)
        before = random.Random(3).randbytes(size)
        self.c.write(a, 0, before)
        _, stub = self.stub()
        md = self.md(self.c)
        piece = b"\xee" * MiB

        def write_stream(first, rest=()):
            msgs = [first] + [pb.WriteStreamRequest(data=d) for d in rest]
            return stub.WriteStream(iter(msgs), metadata=md, timeout=10)

        bad_ranges = [(size + 1, 1), (size - 10, 11), (1, 2**64 - 1), (2**64 - 1, 2), (0, size + 1)]
        for offset, length in bad_ranges:
            with self.subTest(offset=offset, length=length):
                with self.assertRaises(grpc.RpcError) as e:
                    write_stream(
                        pb.WriteStreamRequest(
                            allocation=a.id, offset=offset, length=length, data=piece
                        ),
                        [piece] * 3,
                    )
                self.assertEqual(e.exception.code(), grpc.StatusCode.OUT_OF_RANGE)
                self.assertIn("outside allocation", e.exception.details())
                with self.assertRaises(IsometryError) as ie:
                    self.c.read(a, offset, length)
                self.assertEqual(ie.exception.code, "OUT_OF_RANGE")
                with self.assertRaises(grpc.RpcError) as e:
                    list(
                        stub.ReadStream(
                            pb.ReadRequest(allocation=a.id, offset=offset, length=length),
                            metadata=md,
                        )
                    )
                self.assertEqual(e.exception.code(), grpc.StatusCode.OUT_OF_RANGE)
        # Through the client: a 2 MiB write that does not fit writes nothing.
        with self.assertRaises(IsometryError) as ie:
            self.c.write(a, size - MiB, b"\x11" * (2 * MiB))
        self.assertEqual(ie.exception.code, "OUT_OF_RANGE")
        self.assertEqual(self.c.read(a, 0, size), before)

        # More data than announced, or less: INVALID_ARGUMENT, saying what
        # was written (the bytes before that point).
        with self.assertRaises(grpc.RpcError) as e:
            write_stream(pb.WriteStreamRequest(allocation=a.id, offset=0, length=10, data=b"x" * 11))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("more than the 10 bytes", e.exception.details())
        self.assertEqual(self.c.read(a, 0, size), before)
        with self.assertRaises(grpc.RpcError) as e:
            write_stream(pb.WriteStreamRequest(allocation=a.id, offset=0, length=10, data=b"y" * 4))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("after 4 of the 10 bytes", e.exception.details())
        self.assertEqual(self.c.read(a, 0, 4), b"yyyy")

    def test_another_clients_allocation_is_refused(self):
        other = self.client("other")
        a = self.c.allocate("sys0", 2 * MiB)
        before = random.Random(5).randbytes(2 * MiB)
        self.c.write(a, 0, before)
        for call in (
            lambda: other.write(a.id, 0, b"\x00" * (2 * MiB)),
            lambda: other.read(a.id, 0, 2 * MiB),
            lambda: other.write(a.id, 0, b"\x00"),
            lambda: other.read(a.id, 0, 1),
        ):
            with self.assertRaises(IsometryError) as e:
                call()
            self.assertEqual(e.exception.code, "PERMISSION_DENIED")
        # Without a session at all: refused too.
        _, stub = self.stub()
        with self.assertRaises(grpc.RpcError) as e:
            list(stub.ReadStream(pb.ReadRequest(allocation=a.id, offset=0, length=2 * MiB)))
        self.assertNotEqual(e.exception.code(), grpc.StatusCode.OK)
        self.assertEqual(self.c.read(a, 0, 2 * MiB), before)
        # Published, the other client may use it.
        self.c.publish(a)
        self.assertEqual(other.read(a.id, 0, 2 * MiB), before)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class HealthAndReflection(DaemonCase):
    def test_health_answers_for_the_client_service(self):
        channel, _ = self.stub()
        self.assertEqual(_health_status(channel, ""), SERVING)
        self.assertEqual(_health_status(channel, "isometry.v1.Isometry"), SERVING)
        # No peers configured: the peer API is not served here.
        self.assertEqual(_health_status(channel, "isometry.peer.v4.IsometryPeer"), "NOT_FOUND")

    def test_reflection_v1_and_v1alpha_describe_the_api(self):
        channel, _ = self.stub()
        requests = [
            refl.ServerReflectionRequest(list_services=""),
            refl.ServerReflectionRequest(file_containing_symbol="isometry.v1.Isometry"),
            refl.ServerReflectionRequest(file_containing_symbol="isometry.v1.NoSuchThing"),
            refl.ServerReflectionRequest(file_by_filename="isometry.proto"),
        ]
        for package in ("v1", "v1alpha"):
            with self.subTest(package=package):
                answers = _reflect(channel, package, requests)
                self.assertEqual(len(answers), len(requests))
                names = {s.name for s in answers[0].list_services_response.service}
                self.assertIn("isometry.v1.Isometry", names)
                self.assertNotIn("isometry.peer.v4.IsometryPeer", names)
                for answer in (answers[1], answers[3]):
                    files = [
                        descriptor_pb2.FileDescriptorProto.FromString(b)
                        for b in answer.file_descriptor_response.file_descriptor_proto
                    ]
                    self.assertEqual(files[0].name, "isometry.proto")
                    service = next(s for s in files[0].service if s.name == "Isometry")
                    methods = {m.name: m for m in service.method}
                    self.assertTrue(methods["ReadStream"].server_streaming)
                    self.assertTrue(methods["WriteStream"].client_streaming)
                self.assertEqual(answers[2].error_response.error_code, 5)  # NOT_FOUND
        v1_names = {
            s.name for s in _reflect(channel, "v1", requests[:1])[0].list_services_response.service
        }
        self.assertIn("grpc.reflection.v1.ServerReflection", v1_names)
        self.assertIn("grpc.reflection.v1alpha.ServerReflection", v1_names)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class PeerApiOnlyWithPeers(DaemonCase):
    """A node with one (absent) peer: the TCP port serves the peer API only,
    the unix socket the client API only."""

    def setUp(self):
        self.port = free_port()
        secret_dir = os.path.join("/tmp", f"isometry-grpcapi-secret-{os.getpid()}")
        os.makedirs(secret_dir, exist_ok=True)
        self.addCleanup(shutil.rmtree, secret_dir, True)
        secret = os.path.join(secret_dir, "cluster.secret")
        with open(secret, "w") as f:
            f.write("correct horse battery staple 42\n")
        os.chmod(secret, 0o600)
        self.extra_daemon = f'grpc_tcp = "127.0.0.1:{self.port}"\n'
        self.extra = (
            f'\n[cluster]\nnode_name = "a"\nsecret_file = "{secret}"\n'
            f'data_listen = "127.0.0.1:0"\n'
            f'\n[[peer]]\nname = "b"\naddress = "127.0.0.1:{free_port()}"\n'
        )
        super().setUp()

    def test_health_and_reflection_per_server(self):
        unix, _ = self.stub()
        self.assertEqual(_health_status(unix, "isometry.v1.Isometry"), SERVING)
        self.assertEqual(_health_status(unix, "isometry.peer.v4.IsometryPeer"), "NOT_FOUND")
        tcp = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.addCleanup(tcp.close)
        self.assertEqual(_health_status(tcp, ""), SERVING)
        self.assertEqual(_health_status(tcp, "isometry.peer.v4.IsometryPeer"), SERVING)
        self.assertEqual(_health_status(tcp, "isometry.v1.Isometry"), "NOT_FOUND")
        names = {
            s.name
            for s in _reflect(tcp, "v1", [refl.ServerReflectionRequest(list_services="")])[
                0
            ].list_services_response.service
        }
        self.assertIn("isometry.peer.v4.IsometryPeer", names)
        self.assertNotIn("isometry.v1.Isometry", names)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class Completions(DaemonCase):
    def test_completion_events_carry_path_and_hops_like_wait(self):
        n = 4096
        a = self.c.allocate("sys0", 2 * n * 12)
        src = self.c.register_instance(a, [n], [("a", 4), ("b", 8)], "F,x")
        dst = self.c.register_instance(a, [n], [("a", 4), ("b", 8)], "x,F", offset=n * 12)
        tid = self.c.copy(src, dst, wait=False)
        deadline = time.monotonic() + 20
        while self.c.completed(tid) is None:
            self.assertLess(time.monotonic(), deadline, "no completion event")
            time.sleep(0.01)
        event = self.c.completed(tid)
        _, stub = self.stub()
        waited = stub.Wait(pb.WaitRequest(transfer=tid), metadata=self.md(self.c))
        self.assertEqual(event.state, "done")
        self.assertTrue(event.path)
        self.assertEqual(event.path, waited.path)
        self.assertGreaterEqual(len(event.hops), 1)
        self.assertEqual(list(event.hops), list(waited.hops))
        for hop in event.hops:
            self.assertEqual(hop.chunks_done, hop.chunks_total)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class WaitingCopyDeadline(DaemonCase):
    """Copy with `wait`: a call whose deadline passes first cancels its
    transfer (issue #50, item 4); nothing keeps running that its caller
    gave up on."""

    extra = 'rate_limit = "8MiB"'  # 24 MiB take about 3 s

    def test_a_deadline_cancels_the_waiting_copys_transfer(self):
        n = 24 * MiB
        a = self.c.allocate("sys0", n)
        b = self.c.allocate("sys0", n)
        src = self.c.register_instance(a, [n], [("b", 1)], "F,x")
        dst = self.c.register_instance(b, [n], [("b", 1)], "F,x")
        _, stub = self.stub()
        started = time.monotonic()
        with self.assertRaises(grpc.RpcError) as e:
            stub.Copy(pb.CopyRequest(src_instance=src.id, dst_instance=dst.id, wait=True),
                      metadata=self.md(self.c), timeout=0.5)
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        # The transfer was submitted and ends cancelled, long before the
        # 3 s it would take (a slow daemon, ASan's, may also see the
        # deadline pass before it submits: then nothing ran at all).
        while True:
            st = stub.GetStatus(pb.StatusRequest(), timeout=5)
            if st.transfers_active == 0:
                break
            self.assertLess(time.monotonic() - started, 2.5, "the transfer ran on")
            time.sleep(0.02)
        self.assertEqual(st.transfers_completed, 0, st)
        self.assertEqual(st.transfers_cancelled, st.transfers_submitted, st)
        # Far more concurrent Waits on one connection than the 128 streams
        # it once had: every call is served, none queues in the client.
        tid = self.c.copy(src, dst, wait=False)
        waits = [stub.Wait.future(pb.WaitRequest(transfer=tid), metadata=self.md(self.c),
                                  timeout=30) for _ in range(300)]
        self.assertGreater(stub.GetStatus(pb.StatusRequest(), timeout=5).sessions, 0)
        self.c.cancel(tid)
        self.assertEqual({w.result().state for w in waits}, {"cancelled"})
        # Without a deadline the same copy runs to its end.
        done = stub.Copy(pb.CopyRequest(src_instance=src.id, dst_instance=dst.id, wait=True),
                         metadata=self.md(self.c), timeout=60)
        self.assertEqual(done.info.state, "done")


def _switches_of(pid, thread_name):
    """Context switches (voluntary and not) of process `pid`'s threads
    named `thread_name`, summed; None when it has none."""
    named = [tid for tid, name in thread_names(pid).items() if name == thread_name]
    if not named:
        return None
    switches = thread_switches(pid)
    return sum(switches.get(tid, 0) for tid in named)


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class WaitedCopyAnsweredInline(DaemonCase):
    """A waited copy that ran inline (on the gRPC thread that received it)
    is answered there: no thread of gRPC's executor wakes up for it, which
    on a small copy costs as much as the daemon's own work."""

    extra = '[runtime]\ninline_bytes = "64KiB"'  # as the embedded default config
    EXECUTOR = "default-executo"  # gRPC's executor thread, as Linux shortens its name

    def test_no_executor_wake_up_per_waited_copy(self):
        a, b = (self.c.register_instance(self.c.allocate("sys0", 4096), [4096], [("b", 1)],
                                         "F,x") for _ in range(2))
        _, stub = self.stub()
        request = pb.CopyRequest(src_instance=a.id, dst_instance=b.id, wait=True)
        for _ in range(20):  # gRPC's threads started, the plan cached
            stub.Copy(request, metadata=self.md(self.c), timeout=10)
        pid = self.daemon.proc.pid
        if _sanitized(pid):
            # gRPC hands its own work to the executor when a thread has run
            # past its time budget, which a sanitized daemon does on a fifth
            # of its calls or more.
            self.skipTest("a sanitized daemon: gRPC's own hand-offs to its executor "
                          "outnumber what this test looks for")
        before = _switches_of(pid, self.EXECUTOR)
        if before is None:
            self.skipTest("this gRPC build runs no default-executor thread")
        copies = 300
        for _ in range(copies):
            reply = stub.Copy(request, metadata=self.md(self.c), timeout=10)
            self.assertEqual(reply.info.state, "done")
            self.assertEqual(reply.info.bytes, 4096)
            self.assertGreaterEqual(len(reply.info.hops), 1)
        woke = _switches_of(pid, self.EXECUTOR) - before
        print(f"test_grpc_api: {woke} executor switches over {copies} waited copies",
              file=sys.stderr)
        # At least one a copy when the answer goes through a reactor of
        # ours (301 over 300 on an idle machine); the margin is for gRPC's
        # own hand-offs, which a machine busy with other tests makes
        # frequent (177 over 300 in a CI run beside them).
        self.assertLess(woke, copies * 4 // 5, f"{woke} executor switches over {copies} copies")


# The worked example of (docs/concepts/layouts.md, "Byte by byte") and of
# isometry.proto (InstanceSpec): x in [10, 14), y in [20, 23), fields
# a (4 bytes), b (8), c (2): 14 bytes per point.
BOUNDS = [(10, 14), (20, 23)]
FIELDS = [("a", 4), ("b", 8), ("c", 2)]
FORMATS = ["<I", "<Q", "<H"]
SIZES = [4, 8, 2]
FIELD_OFFSETS = [0, 4, 12]
NX, NY = 4, 3


def _offset(layout, f, x, y):
    """The formulas of docs/concepts/layouts.md, one per layout of the example."""
    i, j = x - 10, y - 20
    if layout == "F,y,x":
        return FIELD_OFFSETS[f] + 14 * (j + NY * i)
    if layout == "x,F,y":
        return NX * FIELD_OFFSETS[f] + SIZES[f] * i + NX * 14 * j
    if layout == "y,x,F":
        return NX * NY * FIELD_OFFSETS[f] + SIZES[f] * (j + NY * i)
    raise ValueError(layout)


def _value(f, x, y):
    return [x * 1000 + y, (x << 40) | (y << 8) | 0xAB, (x * 7 + y) & 0xFFFF][f]


@unittest.skipUnless(ISOMETRYD, SKIP_REASON)
class WorkedLayoutExample(DaemonCase):
    def test_readme_offsets_match_a_real_copy(self):
        # The numbers docs/concepts/layouts.md quotes.
        self.assertEqual(_offset("F,y,x", 1, 12, 21), 102)
        self.assertEqual(_offset("x,F,y", 1, 12, 21), 88)
        self.assertEqual(_offset("y,x,F", 1, 12, 21), 104)
        total = 14 * NX * NY
        a = self.c.allocate("sys0", 4 * total)
        src_buf = bytearray(total)
        for x in range(10, 14):
            for y in range(20, 23):
                for f, fmt in enumerate(FORMATS):
                    struct.pack_into(fmt, src_buf, _offset("y,x,F", f, x, y), _value(f, x, y))
        self.c.write(a, 0, bytes(src_buf))
        src = self.c.register_instance(a, BOUNDS, FIELDS, "y,x,F")
        self.assertEqual(src.total_bytes, total)
        for k, layout in enumerate(["F,y,x", "x,F,y"], start=1):
            with self.subTest(layout=layout):
                dst = self.c.register_instance(a, BOUNDS, FIELDS, layout, offset=k * total)
                self.c.copy(src, dst)
                got = self.c.read(a, k * total, total)
                for x in range(10, 14):
                    for y in range(20, 23):
                        for f, fmt in enumerate(FORMATS):
                            (v,) = struct.unpack_from(fmt, got, _offset(layout, f, x, y))
                            self.assertEqual(v, _value(f, x, y), (layout, f, x, y))

    def test_copy_box_is_in_absolute_coordinates(self):
        total = 14 * NX * NY
        a = self.c.allocate("sys0", 2 * total)
        self.c.write(a, 0, b"\x5a" * total)
        self.c.write(a, total, b"\x00" * total)
        src = self.c.register_instance(a, BOUNDS, FIELDS, "F,y,x")
        dst = self.c.register_instance(a, BOUNDS, FIELDS, "F,y,x", offset=total)
        # The one point (12, 21): box lo/hi in the instances' coordinates.
        self.c.copy(src, dst, box=[(12, 13), (21, 22)])
        got = self.c.read(a, total, total)
        point = _offset("F,y,x", 0, 12, 21)  # 98: the point's 14 bytes
        self.assertEqual(point, 98)
        self.assertEqual(got[point : point + 14], b"\x5a" * 14)
        self.assertEqual(got[:point] + got[point + 14 :], b"\x00" * (total - 14))
        # A box outside the bounds (relative coordinates) is refused.
        with self.assertRaises(IsometryError) as e:
            self.c.copy(src, dst, box=[(2, 3), (1, 2)])
        self.assertEqual(e.exception.code, "OUT_OF_RANGE")


if __name__ == "__main__":
    unittest.main()
